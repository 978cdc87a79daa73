"""An idle connection costs a few KiB, not a large read buffer (issue 14, finding 9).

Each connection used to allocate a 256 KiB read buffer up front (3,000 silent connections:
+793 MiB, never returned). Now the buffer starts small, grows while a large request streams
in, and drops back once the connection goes quiet. Measured as the broker's resident memory
(``VmRSS``) per connection: many connections that each made one round trip (so each is being
served and has read), then sat idle; and as many that each sent one 1 MiB Produce first.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.protocol import messages as m
from tests.broker.wire import Wire, bad_events, batch
from tests.broker_process import BrokerProcess

CONNECTIONS = 400
MAX_PER_CONNECTION_BYTES = 64 * 1024  # a 256 KiB buffer each (the bug) is far above


def _rss_bytes(broker: BrokerProcess) -> int:
    assert broker.process is not None
    with open(f"/proc/{broker.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _open_served(
    broker: BrokerProcess, first: Callable[[Wire], None], count: int = CONNECTIONS
) -> list[Wire]:
    wires = []
    for _ in range(count):
        wire = Wire(broker.port)  # type: ignore[arg-type]
        wires.append(wire)
        first(wire)  # a round trip: the broker serves this connection and has read from it
    return wires


def _per_connection_bytes(broker: BrokerProcess, first: Callable[[Wire], None]) -> float:
    # Warm-up (the code paths, the allocator's first pools) with a few connections only:
    # memory freed by many closed connections would be reused by the next ones, unseen.
    _close_all(_open_served(broker, first, count=10))
    before = _rss_bytes(broker)
    wires = _open_served(broker, first)
    try:
        return (_rss_bytes(broker) - before) / CONNECTIONS
    finally:
        _close_all(wires)


def _close_all(wires: list[Wire]) -> None:
    for wire in wires:
        wire.close()


def _api_versions(wire: Wire) -> None:
    assert wire.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0


def test_idle_connections_hold_small_read_buffers(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    per_connection = _per_connection_bytes(broker, _api_versions)
    print(f"RSS per idle connection: {per_connection / 1024:.1f} KiB")
    assert per_connection < MAX_PER_CONNECTION_BYTES, per_connection
    assert bad_events(broker.lines) == []


def test_a_connection_gives_its_large_buffer_back_when_quiet(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    big = batch(1, value_bytes=(1 << 20) - 200)
    with Wire(broker.port) as admin:  # type: ignore[arg-type]
        admin.create_topic("big")

    def produce_one_mib(wire: Wire) -> None:
        assert wire.produce("big", 0, big).error_code == 0

    per_connection = _per_connection_bytes(broker, produce_one_mib)
    print(f"RSS per quiet connection after a 1 MiB produce: {per_connection / 1024:.1f} KiB")
    assert per_connection < MAX_PER_CONNECTION_BYTES, per_connection
    assert bad_events(broker.lines) == []
