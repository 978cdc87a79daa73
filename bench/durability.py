"""What durability costs: acks=all against acks=1, and each fsync the power-cut fixes added.

1. Produce through one broker process (native protocol, one partition, pre-built 16 KiB batches
   of 100-byte records, ``window`` requests in flight, ``produce_bytes`` per round):
   ``acks=1`` (baseline: appended to the page cache), ``acks=all`` (appended and fsynced, the
   group commit as it is: one fsync round covers every request that arrived meanwhile), and
   ``acks=all`` with ``segment.bytes`` = ``small_segment_bytes``, so that rolls (each one now
   fsyncs the rolled segment and the partition directory before the new segment takes an
   append) happen every few dozen requests, against ``acks=all`` with the default 1 GiB
   segments (no roll in the run).
2. Each added fsync alone, in this process, on the scratch directory's file system:
   ``make_directories`` of a new log dir (the directory fsynced into its parent) against a
   plain ``mkdir``; ``Log.roll`` with the rolled segment's fsync against the same roll of a
   log whose active segment holds only fsynced bytes (so the added fsync has nothing to write:
   what remains is the roll's own cost, including the directory fsync it always had).

Repeats are interleaved (:func:`bench.common.interleaved`); medians.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures, interleaved, median
from bench.storage import Params as StorageParams
from bench.storage import build_batches
from odradek.protocol import messages as m
from odradek.storage.atomic import make_directories
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "durability: acks=all vs acks=1, and the cost of each fsync added for power cuts"

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    produce_bytes: int = 256 << 20  # per round and per figure
    window: int = 16  # requests in flight
    small_segment_bytes: int = 1 << 20
    repeats: int = 3
    mkdirs: int = 300  # directories per round
    rolls: int = 200  # rolls per round
    roll_append_bytes: int = 64 << 10  # appended (not fsynced) before each timed roll

    @classmethod
    def quick(cls) -> Params:
        return cls(produce_bytes=32 << 20, repeats=1, mkdirs=100, rolls=50)


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    batches, per_batch = build_batches(StorageParams())
    requests = max(1, params.produce_bytes // len(batches[0]))
    broker = BrokerProcess([scratch / "logs"]).start()
    rounds = [0]
    try:
        with Wire(broker.port, timeout_s=120) as wire:  # type: ignore[arg-type]

            def produce(acks: int, configs: dict[str, str]) -> Callable[[], float]:
                def one() -> float:
                    rounds[0] += 1
                    topic = f"t{rounds[0]}"
                    wire.create_topic(topic, partitions=1, configs=configs)
                    start = time.perf_counter()
                    _pipelined(wire, topic, batches, requests, params.window, acks)
                    return requests * per_batch / (time.perf_counter() - start)

                return one

            small = {"segment.bytes": str(params.small_segment_bytes)}
            say(f"produce: {requests:,} requests of {len(batches[0]):,} B per figure and round")
            produced = interleaved(
                {
                    "acks=1": produce(m.ACKS_LEADER, {}),
                    "acks=all": produce(m.ACKS_ALL, {}),
                    "acks=all, small segments": produce(m.ACKS_ALL, small),
                },
                params.repeats,
            )
    finally:
        broker.stop()
    say("each added fsync alone")
    alone = interleaved(
        {
            "mkdir": lambda: _mkdirs(scratch / "plain", params.mkdirs, durable=False),
            "make_directories": lambda: _mkdirs(scratch / "durable", params.mkdirs, durable=True),
            "roll, fsynced data": lambda: _rolls(scratch / "synced", params, synced=True),
            "roll, unsynced data": lambda: _rolls(scratch / "unsynced", params, synced=False),
        },
        params.repeats,
    )

    figures = Figures()
    add = figures.add
    note = f"{len(batches[0]):,} B batches, {params.window} in flight"
    add("produce acks=1", median(produced["acks=1"]), "records/s",
        samples=produced["acks=1"], is_baseline=True, note=note)  # fmt: skip
    add("produce acks=all", median(produced["acks=all"]), "records/s",
        baseline="produce acks=1", samples=produced["acks=all"], note="group commit")  # fmt: skip
    add("produce acks=all, small segments", median(produced["acks=all, small segments"]),
        "records/s", baseline="produce acks=all", samples=produced["acks=all, small segments"],
        note=f"a roll every {params.small_segment_bytes >> 20} MiB")  # fmt: skip
    add("mkdir", median(alone["mkdir"]), "µs", samples=alone["mkdir"], is_baseline=True)
    add("make_directories (+ parent fsync)", median(alone["make_directories"]), "µs",
        baseline="mkdir", samples=alone["make_directories"], note="a new log dir")  # fmt: skip
    add("roll, active segment already fsynced", median(alone["roll, fsynced data"]), "µs",
        samples=alone["roll, fsynced data"], is_baseline=True)  # fmt: skip
    add("roll, fsyncing the rolled segment", median(alone["roll, unsynced data"]), "µs",
        baseline="roll, active segment already fsynced", samples=alone["roll, unsynced data"],
        note=f"{params.roll_append_bytes >> 10} KiB unsynced at the roll")  # fmt: skip
    return figures.items


def _pipelined(
    wire: Wire, topic: str, batches: list[bytes], count: int, window: int, acks: int
) -> None:
    in_flight = 0
    for i in range(count):
        wire.send(*wire.produce_request([(topic, 0, batches[i % len(batches)])], acks=acks))
        in_flight += 1
        if in_flight >= window:
            _expect_ok(wire.recv()[0])
            in_flight -= 1
    for _ in range(in_flight):
        _expect_ok(wire.recv()[0])


def _expect_ok(response: m.ProduceResponse) -> None:
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code:
                raise RuntimeError(f"produce failed: error {partition.error_code}")


def _mkdirs(root: Path, count: int, *, durable: bool) -> float:
    """Median µs to create one new directory in ``root``."""
    root.mkdir(exist_ok=True)
    base = len(os.listdir(root))
    samples = []
    for i in range(count):
        path = root / f"d{base + i}"
        start = time.perf_counter()
        if durable:
            make_directories(path)
        else:
            path.mkdir()
        samples.append((time.perf_counter() - start) * 1e6)
    return median(samples)


def _rolls(root: Path, params: Params, *, synced: bool) -> float:
    """Median µs of ``Log.roll`` after appending ``roll_append_bytes`` (fsynced first or not)."""
    batches, _ = build_batches(StorageParams())
    root.mkdir(exist_ok=True)
    directory = root / f"t-{len(os.listdir(root))}"
    log = Log.open(directory, "t", 0, LogConfig(), now_ms=0)
    samples = []
    try:
        for _ in range(params.rolls):
            for _ in range(max(1, params.roll_append_bytes // len(batches[0]))):
                log.append(batches[0], now_ms=0)
            if synced:
                log.flush()
            start = time.perf_counter()
            log.roll(0)
            samples.append((time.perf_counter() - start) * 1e6)
    finally:
        log.close()
    return median(samples)
