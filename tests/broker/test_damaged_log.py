"""Issue 14, finding 1 (the recovery half): damage in a segment other than a torn last tail
never costs the later segments' acknowledged records. The partition stays offline alone,
every file in place, until ``odradek repair-log`` cuts the damage out on request."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import parse_batch_header, recompute_crc
from odradek.protocol.records import decode_records
from tests.broker.wire import Wire, batch, fetch_all, split_batches
from tests.broker_process import REPO, BrokerProcess

OVERRIDES = [
    "log.segment.bytes=2048",
    "log.flush.offset.checkpoint.interval.ms=2147483647",  # recovery point 0: all re-validated
]


def repair_log(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "odradek.cli.main", "repair-log", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)


def batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """``(position, base offset, last offset)`` of every batch in a ``.log``."""
    data = path.read_bytes()
    out, position = [], 0
    while position < len(data):
        header = parse_batch_header(data, position)
        out.append((position, header.base_offset, header.last_offset))
        position += header.size_bytes
    return out


def logs_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.log"))}


def test_damage_in_an_earlier_segment_keeps_the_later_acknowledged_records(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=OVERRIDES)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("orders")
        wire.create_topic("other")
        acked = []
        for i in range(30):  # acks=all: each is fsynced before it is acknowledged
            result = wire.produce("orders", 0, batch(4, tag=f"r{i}-", value_bytes=40), m.ACKS_ALL)
            assert result.error_code == 0
            acked.append(result.base_offset)
        assert wire.produce("other", 0, batch(2), m.ACKS_ALL).error_code == 0
    broker.kill()  # SIGKILL: unclean, every segment is re-validated at the next start
    directory = broker.log_dirs[0] / "orders-0"
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 3
    first = segments[0]
    victim_position, victim_base, victim_last = batch_positions(first)[1]
    with open(first, "r+b") as f:  # bit rot in a record of the second batch of segment 0
        f.seek(victim_position + 70)
        byte = f.read(1)[0]
        f.seek(victim_position + 70)
        f.write(bytes([byte ^ 0x40]))
    damaged_logs = logs_of(directory)

    since = len(broker.lines)
    broker.start()
    errors = [e["event"] for e in broker.lines[since:] if e.get("level") == "error"]
    assert any(f"damaged log {first} at byte {victim_position}" in e for e in errors), errors
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        produced = wire.produce("orders", 0, batch(1), m.ACKS_ALL)
        assert produced.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        fetched, _ = wire.fetch("orders", 0, 0)
        assert fetched.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        (topic,) = wire.metadata(["orders"]).topics
        assert [p.error_code for p in topic.partitions] == [ErrorCode.KAFKA_STORAGE_ERROR]
        assert wire.produce("other", 0, batch(1), m.ACKS_ALL).error_code == 0  # others served
        assert len(fetch_all(wire, "other")) == 3
    assert logs_of(directory) == damaged_logs  # every .log as it was, nothing deleted

    assert repair_log(str(broker.log_dirs[0])).returncode == 2  # a root, not a partition
    locked = repair_log(str(directory))  # the broker owns the dir: refused
    assert locked.returncode == 2 and "lock" in locked.stderr, locked
    assert broker.stop() == 0
    assert not (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()  # found again next time

    shown = repair_log(str(directory))
    assert shown.returncode == 1, shown
    assert f"{first}: damaged at byte {victim_position}" in shown.stdout, shown.stdout
    assert f"offsets {victim_base}..{victim_last}" in shown.stdout, shown.stdout
    assert logs_of(directory) == damaged_logs  # showing changes nothing

    repaired = repair_log(str(directory), "--drop-damaged")
    assert repaired.returncode == 0, repaired
    saved = directory / f"{first.name}.damaged-{victim_position}"
    assert saved.exists()

    broker.start()
    lost = set(range(victim_base, victim_last + 1))
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        offsets = [r.offset for r in fetch_all(wire, "orders")]
        assert offsets == [o for o in range(acked[-1] + 4) if o not in lost]
        assert wire.produce("orders", 0, batch(1), m.ACKS_ALL).base_offset == acked[-1] + 4
    assert broker.stop() == 0
    assert repair_log(str(directory)).returncode == 0  # nothing left to repair


def test_a_torn_tail_of_the_last_segment_is_still_cut_automatically(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=OVERRIDES)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("orders")
        for i in range(30):
            wire.produce("orders", 0, batch(4, tag=f"r{i}-", value_bytes=40), m.ACKS_ALL)
    broker.kill()
    last = sorted((broker.log_dirs[0] / "orders-0").glob("*.log"))[-1]
    size = last.stat().st_size
    with open(last, "ab") as f:  # half a batch: what a write cut short by the crash leaves
        f.write(batch(4, value_bytes=40)[:57])
    since = len(broker.lines)
    broker.start()
    truncated = [e["event"] for e in broker.lines[since:] if "truncated" in e.get("event", "")]
    assert len(truncated) == 1, truncated
    assert f"truncated 57 bytes at position {size} of {last} (a torn tail)" in truncated[0]
    assert last.stat().st_size == size
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert len(fetch_all(wire, "orders")) == 120
        assert wire.produce("orders", 0, batch(1), m.ACKS_ALL).base_offset == 120


def lying_batch() -> bytes:
    """One record whose header claims 2**31 - 1 (recordCount and lastOffsetDelta agree, the
    CRC is valid): the issue's crafted Produce."""
    data = bytearray(batch(1))
    data[23:27] = (2**31 - 2).to_bytes(4, "big")  # lastOffsetDelta
    data[57:61] = (2**31 - 1).to_bytes(4, "big")  # recordCount
    recompute_crc(data)
    return bytes(data)


def test_a_lying_batch_never_costs_a_later_acknowledged_record(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """The issue's scenario: two lying batches, another client's acks=all record after them,
    SIGKILL. Whether the produce path refuses the lies or stores them, the victim's record is
    never deleted and the high watermark never goes backwards; if recovery finds damage, the
    partition waits offline for repair-log and then serves the victim."""
    broker = broker_factory(overrides=OVERRIDES)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("orders")
        assert wire.produce("orders", 0, batch(1, tag="first"), m.ACKS_ALL).error_code == 0
        for _ in range(2):
            wire.produce("orders", 0, lying_batch(), m.ACKS_ALL)
        victim = wire.produce("orders", 0, batch(1, tag="victim"), m.ACKS_ALL)
        assert victim.error_code == 0
    broker.kill()
    directory = broker.log_dirs[0] / "orders-0"
    broker.start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        fetched, _ = wire.fetch("orders", 0, 0)
    if fetched.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
        assert broker.stop() == 0
        assert repair_log(str(directory), "--drop-damaged").returncode == 0
        broker.start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        records = fetch_all(wire, "orders", start=victim.base_offset)
        assert [(r.offset, r.value) for r in records] == [(victim.base_offset, b"victim0")]
        assert wire.fetch("orders", 0, 0)[0].high_watermark == victim.base_offset + 1
        _, tail = wire.fetch("orders", 0, 0, partition_max_bytes=1)
        assert decode_records(split_batches(tail)[0])[0].value == b"first0"
