"""Storage benchmark: append throughput, random offset lookup latency, recovery speed.

Every figure has a baseline measured in the same run on the same files (docs/architecture.md §10):

1. Baselines: raw ``os.write`` of the same pre-built batches to a plain file, with no fsync,
   with one final fsync, and with an fsync every ``flush_every_bytes``.
2. Append: the same batches through :meth:`Log.append` (validation, offset assignment, one
   ``pwritev`` per batch, sparse index entries), with no flush, a final ``flush()``, and a
   ``flush()`` every ``flush_every_bytes``; each against its raw-write twin. The batches
   (``value_bytes`` values, at most ``batch_bytes`` each) are built once, outside the timed
   loop, and reused: ``Log.append`` writes the new baseOffset in front of bytes 8..end and never
   modifies its input.
3. Lookup: on a ``log_bytes`` log, ``Log.read(random offset, lookup_max_bytes)`` (the region
   only: bisect segments, index lookup, header scan), then an ``os.pread`` of the region's first
   ``pread_bytes``; baseline: an ``os.pread`` of ``pread_bytes`` at a random position of the
   same segment files. Per-call latencies, p50/p99/p99.9, warm page cache.
4. Recovery: ``Log.open(..., clean_shutdown=False, recovery_point=0)`` re-validates every batch
   (CRC-32C) and rebuilds the indexes; baseline: reading the same ``.log`` files front to back
   in 128 KiB ``readv`` calls (what ``cat`` does). Warm page cache, and cold: the partition's
   files evicted from this machine's page cache with ``posix_fadvise(DONTNEED)`` first (a
   virtual machine's host may still cache them). Also the clean-shutdown open of the big log
   against that of a one-batch log: it should not grow with the log.

The timed operations themselves (the writes, appends, opens, reads and page-cache evictions)
are in :mod:`bench.storage_io`; this module schedules them and reports the figures.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
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
from bench.storage_io import (
    NOW_MS,
    PARTITION,
    TOPIC,
    evict,
    log_append,
    open_log,
    raw_write,
    read_files,
    timed_open,
)
from odradek.protocol.batch_builder import BatchBuilder
from odradek.protocol.record_batch import parse_batch_header

__all__ = ["TITLE", "Params", "build_batches", "run"]

TITLE = "append throughput, random offset lookup latency, recovery speed"
_VERIFIED_LOOKUPS = 200


@dataclass(frozen=True)
class Params:
    batch_bytes: int = 16 * 1024
    value_bytes: int = 100
    distinct_batches: int = 16
    append_bytes: int = 256 << 20  # per repeat and variant
    append_repeats: int = 5
    flush_every_bytes: int = 1 << 20
    log_bytes: int = 2 << 30  # the multi-GB log for lookups and recovery
    segment_bytes: int = 1 << 30  # Kafka's default log.segment.bytes
    lookups: int = 50_000
    lookup_max_bytes: int = 1 << 20
    pread_bytes: int = 16 * 1024
    open_repeats: int = 5
    recovery_repeats: int = 3
    cold_cache: bool = True
    seed: int = 1

    @classmethod
    def quick(cls) -> Params:
        return cls(
            append_bytes=64 << 20,
            append_repeats=3,
            log_bytes=512 << 20,
            segment_bytes=128 << 20,
            lookups=10_000,
            open_repeats=3,
            recovery_repeats=2,
        )


Say = Callable[[str], None]


def build_batches(params: Params) -> tuple[list[bytes], int]:
    """``distinct_batches`` v2 batches of random ``value_bytes`` values, each as full as fits in
    ``batch_bytes``; returns them and the record count per batch."""
    rng = random.Random(params.seed)
    probe = BatchBuilder()
    while probe.size_bytes <= params.batch_bytes:
        probe.append(bytes(params.value_bytes), timestamp_ms=NOW_MS)
    records = len(probe) - 1
    if records < 1:
        raise ValueError(f"batch_bytes={params.batch_bytes} holds no {params.value_bytes} B value")
    batches = []
    for _ in range(params.distinct_batches):
        builder = BatchBuilder()
        for _ in range(records):
            builder.append(rng.randbytes(params.value_bytes), timestamp_ms=NOW_MS)
        batches.append(builder.build())
    return batches, records


def _sequence(batches: Sequence[bytes], total_bytes: int) -> list[bytes]:
    """References to ``batches`` in turn, enough to add up to ``total_bytes`` (at least one)."""
    count = max(1, total_bytes // len(batches[0]))
    return [batches[i % len(batches)] for i in range(count)]


# -- 1, 2: append -----------------------------------------------------------------------------


def _bench_append(
    figures: Figures, params: Params, batches: list[bytes], records: int, scratch: Path, say: Say
) -> None:
    seq = _sequence(batches, params.append_bytes)
    size = sum(len(b) for b in seq)
    every = max(1, params.flush_every_bytes // len(batches[0]))
    every_text = format_size(params.flush_every_bytes)
    segment_bytes = params.segment_bytes
    variants = {"none": "no fsync", "final": "final fsync", "every": f"fsync every {every_text}"}
    runs: dict[str, Callable[[], float]] = {}
    for flush in variants:
        runs[f"raw {flush}"] = lambda f=flush: raw_write(scratch / "raw", seq, f, every)
        runs[f"log {flush}"] = lambda f=flush: log_append(
            scratch / "log", seq, f, every, segment_bytes
        )
    say(
        f"append: {format_size(size)} x {len(runs)} variants x {params.append_repeats} repeats "
        f"({len(seq)} batches of {len(batches[0])} B, {records} records each)"
    )
    # One untimed round: the first writes into fresh memory of a VM are several times slower.
    samples = interleaved(runs, params.append_repeats, warmup=1)
    for flush, text in variants.items():
        mbs = [mb_per_s(size, s) for s in samples[f"raw {flush}"]]
        figures.add(f"raw os.write, {text}", median(mbs), "MB/s", samples=mbs, is_baseline=True)
    flush_text = {
        "none": "no flush",
        "final": "final flush()",
        "every": f"flush() every {every_text}",
    }
    for flush, text in variants.items():
        seconds = samples[f"log {flush}"]
        mbs = [mb_per_s(size, s) for s in seconds]
        name = f"Log.append, {flush_text[flush]}"
        figures.add(name, median(mbs), "MB/s", baseline=f"raw os.write, {text}", samples=mbs)
        rate = [len(seq) * records / s for s in seconds]
        figures.add(
            f"{name}, records/s",
            median(rate),
            "records/s",
            note=f"{params.value_bytes} B values, {records} per batch",
            samples=rate,
        )


# -- 3: the big log and lookups ---------------------------------------------------------------


def _build_log(
    figures: Figures, params: Params, batches: list[bytes], directory: Path, say: Say
) -> tuple[int, int]:
    """Write the ``log_bytes`` log; returns its next offset and size."""
    seq = _sequence(batches, params.log_bytes)
    size = sum(len(b) for b in seq)
    size_text = format_size(size)
    say(f"building the {size_text} log ({len(seq)} batches), after a raw write of as much")
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Untimed first pass: in a VM, writing into memory the guest never touched runs at a
    # fraction of the speed of reusing freed page-cache pages; then the same-size baseline.
    raw_write(directory.parent / "raw", seq, "none", 0)
    raw_name = f"raw os.write of {size_text}, no fsync"
    raw_seconds = raw_write(directory.parent / "raw", seq, "none", 0)
    figures.add(raw_name, mb_per_s(size, raw_seconds), "MB/s", note="one pass", is_baseline=True)
    log = open_log(directory, params.segment_bytes)
    append = log.append
    try:
        with Stopwatch() as sw:
            for batch in seq:
                append(batch, now_ms=NOW_MS)
        next_offset, segments = log.next_offset, len(log.segments)
    finally:
        log.close()
    figures.add(
        f"Log.append, building the {size_text} log",
        mb_per_s(size, sw.seconds),
        "MB/s",
        baseline=raw_name,
        note=f"one pass, {segments} segments",
    )
    return next_offset, size


def _bench_lookups(
    figures: Figures, params: Params, directory: Path, next_offset: int, say: Say
) -> None:
    rng = random.Random(params.seed)
    log = open_log(directory, params.segment_bytes, clean=True, recovery_point=next_offset)
    try:
        files = [(s.file.fileno(), s.size_bytes) for s in log.segments if s.size_bytes]
        fds = [fd for fd, _ in files]
        weights = [size for _, size in files]
        span = params.pread_bytes

        def random_position() -> tuple[int, int]:
            (index,) = rng.choices(range(len(files)), weights)
            return fds[index], rng.randrange(max(1, files[index][1] - span))

        # Untimed: check that a region starts at the batch holding its offset, and warm up.
        for _ in range(_VERIFIED_LOOKUPS):
            offset = rng.randrange(log.log_start_offset, next_offset)
            region = log.read(offset, params.lookup_max_bytes).region
            assert region is not None, offset
            header = parse_batch_header(os.pread(region.file.fileno(), 61, region.position))
            assert header.base_offset <= offset <= header.last_offset, (offset, header)
        say(f"lookups: {params.lookups} random offsets of {next_offset:,}")
        targets = [rng.randrange(log.log_start_offset, next_offset) for _ in range(params.lookups)]
        baseline_targets = [random_position() for _ in range(params.lookups)]
        lookup_ns, region_ns, baseline_ns = [], [], []
        read, pread = log.read, os.pread
        now = time.perf_counter_ns
        for offset, (base_fd, base_position) in zip(targets, baseline_targets, strict=True):
            t0 = now()
            region = read(offset, params.lookup_max_bytes).region
            t1 = now()
            fd, position = region.file.fileno(), region.position
            t2 = now()
            pread(fd, span, position)
            t3 = now()
            pread(base_fd, span, base_position)
            t4 = now()
            lookup_ns.append(t1 - t0)
            region_ns.append(t3 - t2)
            baseline_ns.append(t4 - t3)
    finally:
        log.close()
    size_text = format_size(span)
    base_name = f"random os.pread {size_text}"
    for p in (50, 99, 99.9):
        figures.add(
            f"{base_name}, p{p:g}",
            percentile(baseline_ns, p) / 1000,
            "µs",
            is_baseline=True,
            note="same files",
        )
    for p in (50, 99, 99.9):
        figures.add(
            f"Log.read(random offset, {format_size(params.lookup_max_bytes)}), p{p:g}",
            percentile(lookup_ns, p) / 1000,
            "µs",
            baseline=f"{base_name}, p{p:g}",
            note="region only",
        )
    for p in (50, 99, 99.9):
        figures.add(
            f"os.pread of the region's first {size_text}, p{p:g}",
            percentile(region_ns, p) / 1000,
            "µs",
            baseline=f"{base_name}, p{p:g}",
        )


# -- 4: opening and recovery ------------------------------------------------------------------


def _bench_clean_open(
    figures: Figures,
    params: Params,
    batches: list[bytes],
    scratch: Path,
    directory: Path,
    next_offset: int,
    size: int,
) -> None:
    small = scratch / "small" / f"{TOPIC}-{PARTITION}"
    log = open_log(small, params.segment_bytes)
    log.append(batches[0], now_ms=NOW_MS)
    small_next, small_size = log.next_offset, log.size_bytes
    log.close()
    runs = {
        "small": lambda: timed_open(
            small, params.segment_bytes, clean=True, next_offset=small_next, size=small_size
        ),
        "big": lambda: timed_open(
            directory, params.segment_bytes, clean=True, next_offset=next_offset, size=size
        ),
    }
    samples = interleaved(runs, params.open_repeats, warmup=1)
    shutil.rmtree(small.parent)
    small_ms = [s * 1000 for s in samples["small"]]
    big_ms = [s * 1000 for s in samples["big"]]
    figures.add(
        "clean open, 1-batch log", median(small_ms), "ms", samples=small_ms, is_baseline=True
    )
    figures.add(
        f"clean open, {format_size(size)} log",
        median(big_ms),
        "ms",
        baseline="clean open, 1-batch log",
        samples=big_ms,
    )


def _bench_recovery(
    figures: Figures, params: Params, directory: Path, next_offset: int, size: int, say: Say
) -> None:
    logs = sorted(directory.glob("*.log"))
    log_bytes = sum(p.stat().st_size for p in logs)
    modes = ["warm", "cold"] if params.cold_cache else ["warm"]
    say(f"recovery: {format_size(log_bytes)} in {len(logs)} segments, {modes}")

    def read(cold: bool) -> float:
        if cold:
            evict(directory)
        return read_files(logs)

    def recover(cold: bool) -> float:
        if cold:
            evict(directory)
        return timed_open(
            directory, params.segment_bytes, clean=False, next_offset=next_offset, size=size
        )

    runs: dict[str, Callable[[], float]] = {}
    for mode in modes:
        runs[f"read {mode}"] = lambda c=mode == "cold": read(c)
        runs[f"recover {mode}"] = lambda c=mode == "cold": recover(c)
    read_files(logs)  # make "warm" warm
    samples = interleaved(runs, params.recovery_repeats)
    for mode in modes:
        read_mbs = [mb_per_s(log_bytes, s) for s in samples[f"read {mode}"]]
        base = f"sequential read of the .log files, {mode} cache"
        figures.add(base, median(read_mbs), "MB/s", samples=read_mbs, is_baseline=True)
        seconds = samples[f"recover {mode}"]
        mbs = [mb_per_s(log_bytes, s) for s in seconds]
        figures.add(
            f"recovery (unclean open, recovery point 0), {mode} cache",
            median(mbs),
            "MB/s",
            baseline=base,
            note=f"{median(seconds):.2f} s",
            samples=mbs,
        )


# -- entry point ------------------------------------------------------------------------------


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    needed = params.log_bytes + params.append_bytes
    free = shutil.disk_usage(scratch).free
    if free < needed * 1.2 + (256 << 20):
        raise RuntimeError(
            f"{format_size(free)} free in {scratch}, the benchmark needs about "
            f"{format_size(int(needed * 1.2))}: lower log_bytes / append_bytes with --set"
        )
    figures = Figures()
    batches, records = build_batches(params)
    _bench_append(figures, params, batches, records, scratch, say)
    directory = scratch / "big" / f"{TOPIC}-{PARTITION}"
    next_offset, size = _build_log(figures, params, batches, directory, say)
    _bench_clean_open(figures, params, batches, scratch, directory, next_offset, size)
    _bench_lookups(figures, params, directory, next_offset, say)
    _bench_recovery(figures, params, directory, next_offset, size, say)
    return figures.items
