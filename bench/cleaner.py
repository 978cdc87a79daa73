"""Log compaction: cleaner throughput, and produce latency while the cleaner runs.

1. In process, ``cleaner pass``: a compacted log of ``dirty_bytes`` (16 KiB batches of
   ``value_bytes`` values over ``keys`` distinct keys, ``segment_bytes`` segments, all flushed)
   is cleaned by one full pass exactly as the broker's cleaner runs it (offset map, groups,
   ``.cleaned`` segments, swap), unthrottled; MB/s of dirty log cleaned. Baseline: reading the
   same ``.log`` files front to back with ``os.pread`` (what the pass must at least do). Each
   repeat cleans a fresh copy of the same log; repeats are interleaved with the baseline.
2. Broker, ``produce p99``: a one-in-flight producer sends small acks=1 batches to a plain topic
   and times each request. Idle: while a compacted topic holding ``broker_dirty_bytes`` of dirty
   data is not cleanable (``min.cleanable.dirty.ratio=1``). Cleaning: after AlterConfigs sets
   the ratio to 0, until the broker logs the pass (``log cleaned``). Rounds alternate idle and
   cleaning; the figure is the p99 over all rounds' requests, against the idle p99.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import (
    Figure,
    Figures,
    Stopwatch,
    format_size,
    interleaved,
    mb_per_s,
    median,
    percentile,
)
from odradek.protocol import messages as m
from odradek.protocol.batch_builder import BatchBuilder, encode_batch
from odradek.storage.cleaner.clean import (
    CleaningStats,
    build_offset_map,
    clean_group,
    commit_group,
    finish_pass,
    plan_groups,
)
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.plan import cleanable_log
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "log cleaner throughput, produce latency while cleaning"
Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    dirty_bytes: int = 128 << 20
    value_bytes: int = 100
    batch_bytes: int = 16 * 1024
    keys: int = 100_000
    segment_bytes: int = 32 << 20
    repeats: int = 3
    broker_dirty_bytes: int = 64 << 20
    broker_rounds: int = 3
    probe_requests: int = 1_000

    @classmethod
    def quick(cls) -> Params:
        return cls(
            dirty_bytes=16 << 20,
            keys=20_000,
            segment_bytes=4 << 20,
            repeats=2,
            broker_dirty_bytes=8 << 20,
            broker_rounds=1,
            probe_requests=300,
        )


def _batches(params: Params, count_bytes: int, now_ms: int) -> list[bytes]:
    out: list[bytes] = []
    total = 0
    n = 0
    while total < count_bytes:
        builder = BatchBuilder()
        while builder.size_bytes + params.value_bytes + 30 < params.batch_bytes:
            key = f"key-{(n * 7919) % params.keys}".encode()
            builder.append(os.urandom(params.value_bytes // 2).hex().encode(), key, now_ms)
            n += 1
        data = builder.build()
        out.append(data)
        total += len(data)
    return out


def _build_log(directory: Path, params: Params, now_ms: int) -> int:
    config = LogConfig().with_overrides(
        {
            "cleanup.policy": "compact",
            "segment.bytes": str(params.segment_bytes),
            "min.cleanable.dirty.ratio": "0",
        }
    )
    log = Log.open(directory, "bench", 0, config, now_ms=now_ms, clean_shutdown=True)
    for data in _batches(params, params.dirty_bytes, now_ms):
        log.append(data, now_ms=now_ms)
    log.roll(now_ms)
    log.close()
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def _clean_copy(pristine: Path, work: Path, now_ms: int) -> float:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    config = LogConfig().with_overrides(
        {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0", "file.delete.delay.ms": "0"}
    )
    log = Log.open(work, "bench", 0, config, now_ms=now_ms, clean_shutdown=True)
    log.flush()
    with Stopwatch() as sw:
        cleanable = cleanable_log(log, now_ms)
        stats = CleaningStats()
        offset_map = OffsetMap.for_buffer(128 << 20)
        end = build_offset_map(cleanable, offset_map, stats)
        for group in plan_groups(log, end):
            cleaned = clean_group(log, group, offset_map, stats, now_ms=now_ms)
            commit_group(log, cleaned, group, stats, now_ms=now_ms)
        finish_pass(log, stats)
    log.close()
    return sw.seconds


def _read_files(directory: Path) -> float:
    with Stopwatch() as sw:
        for path in sorted(directory.glob("*.log")):
            fd = os.open(path, os.O_RDONLY)
            try:
                position = 0
                while chunk := os.pread(fd, 1 << 20, position):
                    position += len(chunk)
            finally:
                os.close(fd)
    return sw.seconds


def _probe(wire: Wire, count: int, until: Callable[[], bool] | None = None) -> list[float]:
    """Latency (µs) of one-in-flight acks=1 produces of one small batch."""
    data = encode_batch([(b"p", b"x" * 100, int(time.time() * 1000))])
    out = []
    while len(out) < count or (until is not None and not until()):
        with Stopwatch() as sw:
            wire.produce("probe", 0, data)
        out.append(sw.elapsed_ns / 1000)
        if until is not None and until() and len(out) >= count // 10:
            break
    return out


def _broker_rounds(
    params: Params, scratch: Path, say: Say
) -> tuple[list[float], list[float], list[float]]:
    broker = BrokerProcess(
        [scratch / "broker-logs"], overrides=["log.cleaner.backoff.ms=100"]
    ).start()
    idle: list[float] = []
    busy: list[float] = []
    cleaner_mb_s: list[float] = []
    try:
        now_ms = int(time.time() * 1000)
        with Wire(broker.port, timeout_s=120) as wire:
            wire.create_topic("probe", 1)
            wire.create_topic(
                "table",
                1,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(params.segment_bytes),
                    "min.cleanable.dirty.ratio": "1",
                },
            )
            batches = _batches(params, params.broker_dirty_bytes, now_ms)
            for round_ in range(params.broker_rounds):
                wire.alter_configs(
                    "table", m.AlterableConfig(name="min.cleanable.dirty.ratio", value="1")
                )
                for data in batches:
                    wire.produce("table", 0, data)
                wire.produce("table", 0, batches[0])  # rolls the last full segment
                idle += _probe(wire, params.probe_requests)
                passes = len(broker.events("log cleaned"))
                wire.alter_configs(
                    "table", m.AlterableConfig(name="min.cleanable.dirty.ratio", value="0")
                )

                def done(before: int = passes) -> bool:
                    return len(broker.events("log cleaned")) > before

                busy += _probe(wire, params.probe_requests, until=done)
                event = broker.events("log cleaned")[-1]
                cleaner_mb_s.append(event["bytes_before"] / 1e6 / (event["duration_ms"] / 1000))
                say(
                    f"round {round_}: pass over {format_size(event['bytes_before'])} "
                    f"in {event['duration_ms']:.0f} ms"
                )
    finally:
        broker.stop()
    return idle, busy, cleaner_mb_s


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    figures = Figures()
    now_ms = int(time.time() * 1000)
    pristine = scratch / "pristine" / "bench-0"
    total = _build_log(pristine, params, now_ms)
    say(f"dirty log: {format_size(total)}, {params.keys} keys")
    timings = interleaved(
        {
            "baseline": lambda: _read_files(pristine),
            "clean": lambda: _clean_copy(pristine, scratch / "work" / "bench-0", now_ms),
        },
        params.repeats,
        warmup=1,
    )
    base = [mb_per_s(total, s) for s in timings["baseline"]]
    clean = [mb_per_s(total, s) for s in timings["clean"]]
    figures.add(
        "read the .log files (pread 1 MiB)", median(base), "MB/s", samples=base, is_baseline=True
    )
    figures.add(
        "cleaner pass, in process",
        median(clean),
        "MB/s",
        baseline="read the .log files (pread 1 MiB)",
        samples=clean,
        note=f"{format_size(total)} dirty, {params.keys} keys, {params.value_bytes} B values",
    )
    idle, busy, broker_mb_s = _broker_rounds(params, scratch, say)
    figures.add(
        "produce p99, cleaner idle",
        percentile(idle, 99),
        "µs",
        is_baseline=True,
        note=f"{len(idle)} requests, acks=1, one in flight",
    )
    figures.add(
        "produce p99, cleaner running",
        percentile(busy, 99),
        "µs",
        baseline="produce p99, cleaner idle",
        note=f"{len(busy)} requests",
    )
    figures.add("produce p50, cleaner idle", percentile(idle, 50), "µs", is_baseline=True)
    figures.add(
        "produce p50, cleaner running",
        percentile(busy, 50),
        "µs",
        baseline="produce p50, cleaner idle",
    )
    figures.add(
        "cleaner pass in the broker",
        median(broker_mb_s),
        "MB/s",
        samples=broker_mb_s,
        note="bytes of the groups cleaned / pass duration",
    )
    return figures.items
