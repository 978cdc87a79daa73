"""Produce throughput as the log grows: the rate at ``log_bytes`` against the first slice.

One partition, ``segment.bytes`` at Kafka's default (1 GiB), 100-byte records in pre-built
16 KiB batches sent over the native protocol with 64 requests in flight (acks=1) — the
broker's ingest path (validation, offset assignment, ``pwritev``, index entries, segment
rolls), without the client's per-record encoding, which does not depend on the log's size.
The log is written in ``slice_bytes`` slices, each timed; the figures are the rate over the
first ~500 MB (the baseline), over as many bytes at the end, and the slowest slice. Issue
#8's goal: the rate at 5 GB is within 10 % of the rate over the first 500 MB.
"""

from __future__ import annotations

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
    broker = BrokerProcess([scratch / "logs"]).start()
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic(TOPIC, partitions=1)
            for index in range(slices):
                with Stopwatch() as watch:
                    produce_batches(wire, TOPIC, batches, per_slice, params.pipeline)
                rates.append(mb_per_s(per_slice * len(batches[0]), watch.seconds))
                say(f"slice {index + 1}/{slices}: {rates[-1]:,.0f} MB/s")
    finally:
        broker.stop()
    # The goal compares the rate over the first ~500 MB with the rate at the end: average
    # that many slices at each end (one 512 MiB slice in the full run, four 128 MiB quick).
    window = max(1, min(len(rates) // 2, round(500e6 / params.slice_bytes)))
    written = format_size(slices * params.slice_bytes)
    span = format_size(window * params.slice_bytes)
    figures = Figures()
    first = f"produce, first {span}"
    figures.add(first, _mean_rate(rates[:window]), "MB/s", is_baseline=True)
    figures.add(
        f"produce, last {span} (log at {written})",
        _mean_rate(rates[-window:]),
        "MB/s",
        baseline=first,
        samples=rates,
        note=f"{len(rates)} slices of {format_size(params.slice_bytes)}",
    )
    figures.add("produce, slowest slice", min(rates), "MB/s", baseline=first)
    return figures.items


def _mean_rate(rates: list[float]) -> float:
    """The rate over consecutive equal-sized slices (the harmonic mean of their rates)."""
    return len(rates) / sum(1 / r for r in rates)
