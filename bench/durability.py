"""What durability costs: acks=all against acks=1, and each fsync the power-cut fixes added.

1. Produce through a broker process (native protocol, one partition per topic, pre-built
   16 KiB batches of 100-byte records, ``window`` requests in flight, ``produce_bytes`` per
   round): ``acks=1`` (baseline: appended to the page cache) and ``acks=all`` (appended and
   fsynced, the group commit as it is: one fsync round covers every request that arrived
   meanwhile).
2. The added roll fsync, in the broker: the same produce with a roll every
   ``small_segment_bytes``, ``acks=all`` and ``acks=1``, against a second broker process in
   the same run whose ``Log.roll`` skips the fsync of the rolled segment (the code before the
   fix, patched in by its command line: nothing in the shipped broker can turn the fsync off).
   The roll fsync runs on the event-loop thread.
3. Each added fsync alone, in this process, on the scratch directory's file system:
   ``make_directories`` of a new log dir (the directory fsynced into its parent; once per log
   dir, at its first start) against a plain ``mkdir``; ``Log.roll`` after appending
   ``roll_append_bytes`` without fsync, against the same roll after a flush (so the added fsync
   has nothing to write: what remains is the roll's own cost).

Repeats are interleaved (:func:`bench.common.interleaved`); medians.
"""

from __future__ import annotations

import os
import sys
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

TITLE = "acks=all vs acks=1, and the cost of each fsync added for power cuts"

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    produce_bytes: int = 128 << 20  # per round and per figure
    window: int = 16  # requests in flight
    small_segment_bytes: int = 1 << 20
    repeats: int = 3
    mkdirs: int = 300  # directories per round
    rolls: int = 200  # rolls per round
    roll_append_bytes: int = 64 << 10  # appended (not fsynced) before each timed roll

    @classmethod
    def quick(cls) -> Params:
        return cls(produce_bytes=32 << 20, repeats=1, mkdirs=100, rolls=50)


# The broker as it was before the roll fsync (bench only): Log.roll with the rolled segment's
# flush shadowed by a no-op for the duration of the roll.
_WITHOUT_ROLL_FSYNC = """
import sys
from odradek.storage.log import Log
roll = Log.roll
def roll_without_fsync(self, now_ms):
    active = self.active_segment
    active.flush = lambda: None
    try:
        return roll(self, now_ms)
    finally:
        del active.flush
Log.roll = roll_without_fsync
from odradek.cli.main import main
sys.exit(main())
"""


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    batches, per_batch = build_batches(StorageParams())
    requests = max(1, params.produce_bytes // len(batches[0]))
    broker = BrokerProcess([scratch / "logs"]).start()
    before = BrokerProcess(
        [scratch / "logs-before"], program=[sys.executable, "-c", _WITHOUT_ROLL_FSYNC]
    ).start()
    rounds = [0]
    small = {"segment.bytes": str(params.small_segment_bytes)}
    try:
        with (
            Wire(broker.port, timeout_s=120) as wire,  # type: ignore[arg-type]
            Wire(before.port, timeout_s=120) as wire_before,  # type: ignore[arg-type]
        ):

            def produce(on: Wire, acks: int, configs: dict[str, str]) -> Callable[[], float]:
                def one() -> float:
                    rounds[0] += 1
                    topic = f"t{rounds[0]}"
                    on.create_topic(topic, partitions=1, configs=configs)
                    start = time.perf_counter()
                    _pipelined(on, topic, batches, requests, params.window, acks)
                    return requests * per_batch / (time.perf_counter() - start)

                return one

            say(f"produce: {requests:,} requests of {len(batches[0]):,} B per figure and round")
            produced = interleaved(
                {
                    "acks=1": produce(wire, m.ACKS_LEADER, {}),
                    "acks=all": produce(wire, m.ACKS_ALL, {}),
                    "all, rolls, before": produce(wire_before, m.ACKS_ALL, small),
                    "all, rolls": produce(wire, m.ACKS_ALL, small),
                    "1, rolls, before": produce(wire_before, m.ACKS_LEADER, small),
                    "1, rolls": produce(wire, m.ACKS_LEADER, small),
                },
                params.repeats,
            )
    finally:
        broker.stop()
        before.stop()
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
    rolls = f"a roll every {params.small_segment_bytes >> 20} MiB"
    add("produce acks=1", median(produced["acks=1"]), "records/s",
        samples=produced["acks=1"], is_baseline=True, note=note)  # fmt: skip
    add("produce acks=all", median(produced["acks=all"]), "records/s",
        baseline="produce acks=1", samples=produced["acks=all"], note="group commit")  # fmt: skip
    for acks in ("all", "1"):
        base = f"acks={acks}, {rolls}, no roll fsync (before)"
        add(base, median(produced[f"{acks}, rolls, before"]), "records/s",
            samples=produced[f"{acks}, rolls, before"], is_baseline=True)  # fmt: skip
        add(f"acks={acks}, {rolls}, roll fsync", median(produced[f"{acks}, rolls"]),
            "records/s", baseline=base, samples=produced[f"{acks}, rolls"])  # fmt: skip
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
