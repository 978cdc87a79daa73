"""Long-poll fetches: woken by an append on another connection, or answered at max_wait_ms;
and a SIGTERM while one waits is still a prompt, clean shutdown."""

from __future__ import annotations

import select
import time
from collections.abc import Callable

import pytest

from odradek.protocol import messages as m
from odradek.protocol.records import decode_records
from tests.broker.wire import Wire, bad_events, batch, split_batches
from tests.broker_process import BrokerProcess


def _fetch_request(topic: str, offset: int, max_wait_ms: int) -> m.FetchRequest:
    return m.FetchRequest(
        correlation_id=0,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        topics=[
            m.FetchTopic(
                name=topic, partitions=[m.FetchPartition(partition_index=0, fetch_offset=offset)]
            )
        ],
    )


def _unanswered(wire: Wire, within_s: float) -> bool:
    """Nothing to read on ``wire`` for ``within_s`` (the request is still waiting)."""
    readable, _, _ = select.select([wire.sock], [], [], within_s)
    return not readable


def test_long_poll_returns_soon_after_an_append(shared_broker: BrokerProcess, topic: str) -> None:
    with Wire(shared_broker.port) as consumer, Wire(shared_broker.port) as producer:  # type: ignore[arg-type]
        consumer.create_topic(topic)
        producer.produce(topic, 0, batch(2, tag="old"))
        started = time.monotonic()
        cid = consumer.send(_fetch_request(topic, 2, max_wait_ms=5000))
        assert _unanswered(consumer, 0.2)  # really waiting at the log end
        producer.produce(topic, 0, batch(3, tag="new"))
        response, tail = consumer.recv()
        elapsed = time.monotonic() - started
    assert response.correlation_id == cid
    part = response.topics[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 5
    records = [r for raw in split_batches(tail) for r in decode_records(raw)]
    assert [(r.offset, r.value) for r in records] == [(2, b"new0"), (3, b"new1"), (4, b"new2")]
    assert elapsed < 2.5, elapsed  # well before max_wait_ms


def test_long_poll_without_data_returns_after_max_wait(wire: Wire, topic: str) -> None:
    wire.create_topic(topic)
    started = time.monotonic()
    result, tail = wire.fetch(topic, 0, 0, max_wait_ms=1000, min_bytes=1)
    elapsed = time.monotonic() - started
    assert (result.error_code, result.high_watermark, len(tail)) == (0, 0, 0)
    assert 0.95 <= elapsed < 3.0, elapsed


def test_long_poll_on_one_connection_does_not_block_its_other_requests(
    wire: Wire, topic: str
) -> None:
    wire.create_topic(topic)
    fetch_cid = wire.send(_fetch_request(topic, 0, max_wait_ms=5000))
    meta_cid = wire.send(m.MetadataRequest(correlation_id=0, topics=[topic]))
    response, _ = wire.recv(timeout_s=2.0)
    assert response.correlation_id == meta_cid  # answered while the fetch waits
    request, raw = wire.produce_request([(topic, 0, batch(1))])
    produce_cid = wire.send(request, raw)  # wakes the fetch; either response may come first
    answered = {wire.recv()[0].correlation_id for _ in range(2)}
    assert answered == {fetch_cid, produce_cid}


def test_sigterm_while_a_long_poll_waits_is_a_prompt_clean_shutdown(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("waiting")
        wire.produce("waiting", 0, batch(3), acks=m.ACKS_ALL)
        wire.send(_fetch_request("waiting", 3, max_wait_ms=60_000))
        assert _unanswered(wire, 0.2)
        started = time.monotonic()
        assert broker.stop() == 0
        elapsed = time.monotonic() - started
        # The waiting fetch was answered (empty) or its connection closed; either way it ended.
        try:
            _, tail = wire.recv(timeout_s=1.0)
            assert len(tail) == 0
        except (EOFError, ConnectionResetError):
            pass
    assert elapsed < 5.0, elapsed
    assert (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()
    assert bad_events(broker.lines) == []

    broker.lines.clear()
    broker.start()
    loaded = [e for e in broker.lines if e["event"].startswith("loaded log dir")]
    assert [e["event"] for e in loaded] == [f"loaded log dir {broker.log_dirs[0]} (clean shutdown)"]
    assert not (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()  # consumed at start
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        result, tail = wire.fetch("waiting", 0, 0)
        assert result.high_watermark == 3
        assert len(decode_records(split_batches(tail)[0])) == 3


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_sigterm_with_idle_connections_on_each_backend(
    broker_factory: Callable[..., BrokerProcess], backend: str
) -> None:
    broker = broker_factory(backend=backend)
    with Wire(broker.port) as idle, Wire(broker.port) as fetching:  # type: ignore[arg-type]
        idle.create_topic("t")
        fetching.send(_fetch_request("t", 0, max_wait_ms=60_000))
        assert _unanswered(fetching, 0.1)
        started = time.monotonic()
        assert broker.stop() == 0
        assert time.monotonic() - started < 5.0
    assert broker.events("broker stopped")
