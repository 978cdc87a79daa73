"""A client that hangs up gives its slot back at once (issue 14, finding 4).

Clients send a request that waits (a long-poll Fetch with ``max_wait_ms`` 2^31-1, a JoinGroup
held by the initial rebalance delay) and close their socket. The broker must cancel those
waits when it reads the EOF and close its side: no socket of the broker's port stays in
CLOSE-WAIT, and a new client connects although the dead ones filled ``max.connections``.
A Fetch's wait is also capped by ``fetch.wait.max.ms``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from tests.broker.test_limits import connect_when_allowed
from tests.broker.wire import Wire, bad_events
from tests.broker_process import BrokerProcess, wait_until

HANGERS = 200
INT32_MAX = 2**31 - 1
_CLOSE_WAIT = "08"  # the state column of /proc/net/tcp


def _sockets_in_close_wait(port: int) -> int:
    """The broker's sockets (local port ``port``) whose peer closed and that it has not."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == _CLOSE_WAIT:
                count += 1
    return count


def _long_poll(topic: str) -> m.FetchRequest:
    return m.FetchRequest(
        correlation_id=0,
        max_wait_ms=INT32_MAX,
        min_bytes=1,
        topics=[
            m.FetchTopic(
                name=topic, partitions=[m.FetchPartition(partition_index=0, fetch_offset=0)]
            )
        ],
    )


def _assert_slots_and_sockets_freed(broker: BrokerProcess) -> None:
    port = broker.port
    assert port is not None
    assert wait_until(lambda: _sockets_in_close_wait(port) == 0), _sockets_in_close_wait(port)
    with connect_when_allowed(broker, timeout_s=10.0) as newcomer:  # a slot is free
        assert newcomer.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0
    assert bad_events(broker.lines) == []


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_long_polls_of_clients_that_hung_up_free_their_slots(
    broker_factory: Callable[..., BrokerProcess], backend: str
) -> None:
    broker = broker_factory(overrides=[f"max.connections={HANGERS + 1}"], backend=backend)
    with Wire(broker.port) as admin:  # type: ignore[arg-type]
        admin.create_topic("idle")  # empty: every poll waits at its log end
        hangers = [Wire(broker.port) for _ in range(HANGERS)]  # type: ignore[arg-type]
        for wire in hangers:  # every slot is taken (the admin holds the last one)
            wire.send(_long_poll("idle"))
        for wire in hangers:
            wire.close()
        _assert_slots_and_sockets_freed(broker)


def test_joins_of_clients_that_hung_up_free_their_slots(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    hangers_count = 20
    broker = broker_factory(
        overrides=[
            f"max.connections={hangers_count}",
            "group.initial.rebalance.delay.ms=600000",  # a second join waits 10 minutes
        ]
    )
    hangers = [Wire(broker.port) for _ in range(hangers_count)]  # type: ignore[arg-type]
    for i, wire in enumerate(hangers):
        join = m.JoinGroupRequest(correlation_id=0, group_id=f"g{i}", topics=["t"])
        first = wire.call(join)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        join.member_id = first.member_id
        wire.send(join)  # waits for the rebalance delay
    for wire in hangers:
        wire.close()
    _assert_slots_and_sockets_freed(broker)


def test_fetch_wait_is_capped_by_fetch_wait_max_ms(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=["fetch.wait.max.ms=200"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("capped")
        result, tail = wire.fetch("capped", 0, 0, max_wait_ms=INT32_MAX, timeout_s=10.0)
        assert (result.error_code, result.high_watermark, len(tail)) == (0, 0, 0)
    assert bad_events(broker.lines) == []


def test_the_close_wait_probe_sees_a_socket_left_open() -> None:
    """The CLOSE-WAIT probe itself: a listener that never closes an accepted socket whose
    peer closed shows one (so a zero above is evidence, not a blind spot)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        client.close()
        assert wait_until(lambda: _sockets_in_close_wait(port) == 1)
        accepted.close()
        assert wait_until(lambda: _sockets_in_close_wait(port) == 0)
    finally:
        listener.close()
