"""Retention and compaction in a real broker: runtime config changes, log start moves,
OFFSET_OUT_OF_RANGE below it, a compacted topic cleaned while it is produced to."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import parse_batch_header
from odradek.protocol.records import Record, decode_records
from tests.broker.wire import Wire, bad_events, split_batches
from tests.broker_process import BrokerProcess

FAST = [
    "log.retention.check.interval.ms=100",
    "log.cleaner.backoff.ms=50",
    "log.segment.delete.delay.ms=0",
]


def _wait_for(condition: Callable[[], object], timeout_s: float = 30.0, what: str = "") -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or condition}")


def _consume(wire: Wire, topic: str, start: int = 0) -> list[Record]:
    """Everything from ``start`` to the high watermark, advancing past each batch's last
    offset as a Kafka consumer does (compacted batches keep their offset range)."""
    records: list[Record] = []
    offset = start
    while True:
        result, tail = wire.fetch(topic, 0, offset)
        assert result.error_code == 0, result
        for raw in split_batches(tail):
            header = parse_batch_header(raw)
            records.extend(r for r in decode_records(raw) if r.offset >= offset)
            offset = max(offset, header.last_offset + 1)
        if offset >= result.high_watermark:
            return records


def _alter(wire: Wire, topic: str, **configs: str) -> None:
    ops = [m.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()]
    result = wire.alter_configs(topic, *ops)
    assert result.error_code == 0, result


def _segment_logs(broker: BrokerProcess, topic: str) -> list[str]:
    directory = broker.log_dirs[0] / f"{topic}-0"
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".log"))


def test_retention_altered_at_runtime_deletes_segments(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=FAST)
    now_ms = int(time.time() * 1000)
    with Wire(broker.port) as wire:
        wire.create_topic("events", 1, {"segment.bytes": "1024"})
        old = [(f"k{i}".encode(), b"o" * 200, now_ms - 3_600_000) for i in range(12)]
        new = [(f"k{i}".encode(), b"n" * 200, now_ms) for i in range(12)]
        for record in old + new:
            assert wire.produce("events", 0, encode_batch([record])).error_code == 0
        assert len(_segment_logs(broker, "events")) >= 6
        assert wire.list_offset("events", 0, m.EARLIEST_TIMESTAMP).offset == 0

        _alter(wire, "events", retention_ms="600000")  # 10 minutes: the old hour goes
        start = _wait_for(
            lambda: wire.list_offset("events", 0, m.EARLIEST_TIMESTAMP).offset,
            what="the log start offset to move",
        )
        assert 0 < start <= 12  # every all-old segment went; the mixed one stays
        result, _ = wire.fetch("events", 0, 0)
        assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert result.log_start_offset == start
        records = _consume(wire, "events", start)
        assert [r.offset for r in records] == list(range(start, 24))
        assert all(r.value == b"n" * 200 for r in records if r.offset >= 12)
        _wait_for(
            lambda: _segment_logs(broker, "events")[0] == f"{start:020d}.log",
            what="the segment files to be deleted",
        )
        deleted = broker.events("log segments deleted")
        assert deleted and deleted[0]["reason"] == "retention-ms"
        assert deleted[0]["topic"] == "events"

        # DeleteRecords moves the log start inside a segment: the segments wholly below it go.
        target = start + 5
        assert wire.delete_records("events", 0, target).low_watermark == target
        _wait_for(
            lambda: any(
                e["reason"] == "log-start-offset" for e in broker.events("log segments deleted")
            ),
            what="deletion by log start offset",
        )
        first_file = _segment_logs(broker, "events")[0]
        assert start < int(first_file[:20]) <= target
        assert wire.fetch("events", 0, target - 1)[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert wire.fetch("events", 0, target)[0].error_code == 0

        _alter(wire, "events", retention_bytes="0")  # size: everything but the active one
        _wait_for(
            lambda: wire.list_offset("events", 0, m.EARLIEST_TIMESTAMP).offset == 24,
            what="size retention",
        )
        assert wire.produce("events", 0, encode_batch([(b"k", b"v", now_ms)])).base_offset == 24
    assert broker.stop() == 0
    assert bad_events(broker.lines) == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_compacted_topic_is_cleaned_while_produced_to(
    broker_factory: Callable[..., BrokerProcess], backend: str
) -> None:
    broker = broker_factory(overrides=FAST, backend=backend)
    now_ms = int(time.time() * 1000)
    latest: dict[bytes, bytes | None] = {}
    produced = 0
    with Wire(broker.port) as wire:
        wire.create_topic(
            "table",
            1,
            {
                "cleanup.policy": "compact",
                "segment.bytes": "2048",
                "min.cleanable.dirty.ratio": "0.1",
            },
        )
        keyless = wire.produce("table", 0, encode_batch([(None, b"v", now_ms)]))
        assert keyless.error_code == ErrorCode.INVALID_RECORD  # as Kafka answers

        def produce_round(n: int) -> None:
            nonlocal produced
            items = []
            for i in range(5):
                key = f"key{(n * 5 + i) % 17}".encode()
                value = None if (n + i) % 11 == 0 else f"{n}-{i}".encode() * 4
                items.append((key, value, now_ms))
                latest[key] = value
            assert wire.produce("table", 0, encode_batch(items)).error_code == 0
            produced += len(items)

        n = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            produce_round(n)
            n += 1
            cleaned = [e for e in broker.events("log cleaned") if e["segments_before"] > 1]
            if len(cleaned) >= 2 and n > 200:
                break
        else:
            raise AssertionError("the cleaner never cleaned the topic")
        for _ in range(20):  # keep producing a little after the passes
            produce_round(n)
            n += 1

        records = _consume(wire, "table")
        offsets = [r.offset for r in records]
        assert offsets == sorted(set(offsets))
        assert len(records) < produced  # compaction removed records
        last: dict[bytes, bytes | None] = {}
        for r in records:
            last[r.key] = r.value  # type: ignore[index]
        assert last == latest
        event = cleaned[0]
        assert event["bytes_after"] < event["bytes_before"]
        assert event["duration_ms"] >= 0 and event["topic"] == "table"
        checkpoint = broker.log_dirs[0] / "cleaner-offset-checkpoint"
        assert _wait_for(lambda: "table 0 " in checkpoint.read_text(), what="checkpoint")
    assert broker.stop() == 0
    assert bad_events(broker.lines) == []


def test_restart_after_cleaning_reads_the_same_records(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=FAST)
    now_ms = int(time.time() * 1000)
    with Wire(broker.port) as wire:
        wire.create_topic(
            "kv",
            1,
            {"cleanup.policy": "compact", "segment.bytes": "512", "min.cleanable.dirty.ratio": "0"},
        )
        for i in range(60):
            batch = encode_batch([(f"k{i % 4}".encode(), f"v{i}".encode(), now_ms)])
            assert wire.produce("kv", 0, batch, acks=m.ACKS_ALL).error_code == 0
        _wait_for(lambda: broker.events("log cleaned"), what="a cleaning pass")
        before = _consume(wire, "kv")
    broker.kill()  # no clean shutdown: recovery re-validates the cleaned segments
    broker.start()
    with Wire(broker.port) as wire:
        after = _consume(wire, "kv")
    # The same records at the same offsets (a pass after the restart may only remove more).
    by_offset = {r.offset: (r.key, r.value) for r in before}
    assert all(by_offset[r.offset] == (r.key, r.value) for r in after)
    latest = {f"k{i % 4}".encode(): f"v{i}".encode() for i in range(56, 60)}
    assert {r.key: r.value for r in after} == latest
    assert {r.key: r.value for r in before} == latest
