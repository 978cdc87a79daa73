"""Consumer groups on the broker: membership, server-side assignment, committed offsets.

``assignors``   range, roundrobin and cooperative-sticky (pure functions)
``offsets``     the ``__consumer_offsets`` record format (Kafka's schemas, byte for byte)
``store``       committed offsets in memory, replay of ``__consumer_offsets`` at start-up
``group``       one group's members, state and protocol choice (data, no transitions)
``coordinator`` the membership state machine (clock injected, no I/O)
``api``         the request handlers and the timer task (the async, I/O side)
"""
