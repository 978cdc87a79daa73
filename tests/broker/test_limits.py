"""Connection limits: max.connections, connections.max.idle.ms, and a client that stalls
half-way through a frame (it must not hold anyone else up)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from odradek.protocol import messages as m
from tests.broker.wire import Wire, bad_events, batch, fetch_all
from tests.broker_process import BrokerProcess


def connect_when_allowed(broker: BrokerProcess, timeout_s: float = 5.0) -> Wire:
    """A working connection, retrying while the broker still counts a closed one."""
    deadline = time.monotonic() + timeout_s
    while True:
        wire = Wire(broker.port, timeout_s=2.0)  # type: ignore[arg-type]
        try:
            wire.call(m.ApiVersionsRequest(correlation_id=0))
            return wire
        except (EOFError, ConnectionError):
            wire.close()
            if time.monotonic() > deadline:
                raise


def test_max_connections(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(overrides=["max.connections=2"])
    first, second = Wire(broker.port), Wire(broker.port)  # type: ignore[arg-type]
    with first, second:
        for wire in (first, second):
            assert wire.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0
        with Wire(broker.port) as third:  # type: ignore[arg-type]
            assert third.closed_by_peer(timeout_s=5.0)
        assert broker.wait_for_events("refusing connection: max.connections reached")
        # The two admitted connections are unaffected.
        first.create_topic("limited")
        assert second.produce("limited", 0, batch(2)).error_code == 0
        second.close()
        with connect_when_allowed(broker) as replacement:  # a slot is free again
            assert len(fetch_all(replacement, "limited")) == 2
    assert bad_events(broker.lines) == []


def test_idle_connection_is_closed(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(overrides=["connections.max.idle.ms=300"])
    with Wire(broker.port) as busy:  # type: ignore[arg-type]
        busy.create_topic("idle")
        # A long poll longer than the idle limit is not cut short: it is a request in flight.
        started = time.monotonic()
        result, _ = busy.fetch("idle", 0, 0, max_wait_ms=1000)
        assert result.error_code == 0 and time.monotonic() - started >= 0.95
        with Wire(broker.port) as idle:  # type: ignore[arg-type]
            started = time.monotonic()
            assert idle.closed_by_peer(timeout_s=5.0)  # reads until EOF: no sleep
            elapsed = time.monotonic() - started
        assert 0.25 <= elapsed < 3.0, elapsed
    assert broker.wait_for_events("closing idle connection")
    assert bad_events(broker.lines) == []


def test_half_a_frame_does_not_block_others(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory()
    with Wire(broker.port) as stalled, Wire(broker.port) as other:  # type: ignore[arg-type]
        request = m.encode_request(m.ApiVersionsRequest(correlation_id=1))
        whole = b"".join(bytes(p) for p in request)
        stalled.send_bytes(whole[:2])  # half of the length prefix...
        other.create_topic("flowing")
        stalled.send_bytes(whole[2:7])  # ...then half of the body, and nothing more
        for i in range(20):
            assert other.produce("flowing", 0, batch(5), acks=m.ACKS_ALL).base_offset == 5 * i
        assert len(fetch_all(other, "flowing")) == 100
        # A big frame arriving slowly does not hold others up either.
        big = batch(1, value_bytes=500_000)
        produce, raw = other.produce_request([("flowing", 0, big)])
        frame = b"".join(bytes(p) for p in m.encode_request(produce, raw))
        with Wire(broker.port) as slow:  # type: ignore[arg-type]
            slow.send_bytes(frame[: len(frame) // 2])
            assert other.call(m.MetadataRequest(correlation_id=0, topics=["flowing"])).topics
            slow.send_bytes(frame[len(frame) // 2 :])
            assert slow.recv()[0].topics[0].partitions[0].base_offset == 100
        # The stalled client can still finish its frame and be answered.
        stalled.send_bytes(whole[7:])
        response, _ = stalled.recv()
        assert isinstance(response, m.ApiVersionsResponse) and response.correlation_id == 1
    assert bad_events(broker.lines) == []


def test_many_connections_come_and_go(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory()
    for _ in range(200):
        sock = socket.create_connection(("127.0.0.1", broker.port))
        if _ % 2:
            sock.sendall(struct.pack(">I", 50))  # some leave mid-frame
        sock.close()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert wire.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0
    assert broker.stop() == 0
    assert bad_events(broker.lines) == []
