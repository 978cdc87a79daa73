"""Produce throughput as the log grows: the rate at ``log_bytes`` against the first slice.

One partition, ``segment.bytes`` at Kafka's default (1 GiB), 100-byte records in pre-built
16 KiB batches sent over the native protocol with 64 requests in flight (acks=1) — the
broker's ingest path (validation, offset assignment, ``pwritev``, index entries, segment
rolls), without the client's per-record encoding, which does not depend on the log's size.
The log is written in ``slice_bytes`` slices, each timed; the figures are the rate over the
first ~500 MB (the baseline), over as many bytes at the end, and the slowest slice. Issue
#8's goal: the rate at 5 GB is within 10 % of the rate over the first 500 MB.

To tell the broker's share from the machine's, each broker slice is followed by a *raw* slice:
the same batches ``os.write`` n to one growing file beside the log (no fsync), timed the same
way; the dirty and writeback page-cache bytes (``/proc/meminfo``) are noted per slice. If the
raw writes slow down as much as the broker does, the kernel (dirty-page writeback on these
two cores) is what slows down, not the append path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures, Stopwatch, format_size, mb_per_s
from bench.fetch import produce_batches
from bench.storage import Params as StorageParams
from bench.storage import build_batches
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "produce throughput as the log grows to 5 GiB"
TOPIC = "growth"

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    log_bytes: int = 5 << 30
    slice_bytes: int = 512 << 20
    pipeline: int = 64

    @classmethod
    def quick(cls) -> Params:
        return cls(log_bytes=1 << 30, slice_bytes=128 << 20)


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    batches, _ = build_batches(StorageParams())
    per_slice = max(1, params.slice_bytes // len(batches[0]))
    slices = max(2, params.log_bytes // params.slice_bytes)
    rates: list[float] = []
    raw_rates: list[float] = []
    slice_bytes = per_slice * len(batches[0])
    broker = BrokerProcess([scratch / "logs"]).start()
    raw_fd = os.open(scratch / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic(TOPIC, partitions=1)
            for index in range(slices):
                with Stopwatch() as watch:
                    produce_batches(wire, TOPIC, batches, per_slice, params.pipeline)
                rates.append(mb_per_s(slice_bytes, watch.seconds))
                with Stopwatch() as watch:
                    for i in range(per_slice):
                        os.write(raw_fd, batches[i % len(batches)])
                raw_rates.append(mb_per_s(slice_bytes, watch.seconds))
                dirty, writeback = _dirty_bytes()
                say(
                    f"slice {index + 1}/{slices}: broker {rates[-1]:,.0f} MB/s, raw write "
                    f"{raw_rates[-1]:,.0f} MB/s; dirty {format_size(dirty)}, "
                    f"writeback {format_size(writeback)}"
                )
    finally:
        os.close(raw_fd)
        broker.stop()
    # The goal compares the rate over the first ~500 MB with the rate at the end: average
    # that many slices at each end (one 512 MiB slice in the full run, four 128 MiB quick).
    window = max(1, min(len(rates) // 2, round(500e6 / params.slice_bytes)))
    written = format_size(slices * params.slice_bytes)
    span = format_size(window * params.slice_bytes)
    figures = Figures()
    first = _first_and_last(
        figures, "produce", rates, window, span, f"log at {written}",
        f"{len(rates)} slices of {format_size(params.slice_bytes)}",
    )  # fmt: skip
    figures.add("produce, slowest slice", min(rates), "MB/s", baseline=first)
    _first_and_last(
        figures, "raw os.write", raw_rates, window, span, f"file at {written}",
        "the same batches, after each broker slice",
    )  # fmt: skip
    return figures.items


def _first_and_last(
    figures: Figures, what: str, rates: list[float], window: int, span: str, at: str, note: str
) -> str:
    """Add the rate over the first and over the last ``window`` slices (against the first);
    returns the first figure's name."""
    first = f"{what}, first {span}"
    figures.add(first, _mean_rate(rates[:window]), "MB/s", is_baseline=True)
    figures.add(
        f"{what}, last {span} ({at})",
        _mean_rate(rates[-window:]),
        "MB/s",
        baseline=first,
        samples=rates,
        note=note,
    )
    return first


def _dirty_bytes() -> tuple[int, int]:
    """The page cache's ``Dirty`` and ``Writeback`` bytes (0, 0 where /proc is missing)."""
    fields = {"Dirty:": 0, "Writeback:": 0}
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                name, value, *_ = line.split()
                if name in fields:
                    fields[name] = int(value) * 1024
    except OSError:
        pass
    return fields["Dirty:"], fields["Writeback:"]


def _mean_rate(rates: list[float]) -> float:
    """The rate over consecutive equal-sized slices (the harmonic mean of their rates)."""
    return len(rates) / sum(1 / r for r in rates)
