"""Chaos: SIGKILL the broker at random moments while producers write (acks=all, acks=1).

Each cycle starts the broker on the same log dir, runs one producer thread per partition (its
own connection, batches of 1-20 records with unique values), kills the broker with
SIGKILL after a random delay (appends, segment rolls every few KiB, offset checkpoints every
50 ms and group-commit fsyncs are all in flight), restarts it and checks, per partition:

1. offsets are dense from 0 to the log end (nothing skipped, nothing duplicated);
2. every batch acknowledged in any cycle is there, at its acknowledged offsets, unchanged;
3. no value appears twice (an unacknowledged batch is there at most once).

The ``compacted`` run writes keyed records to a compacted topic whose cleaner runs every
20 ms, so kills also land in cleaning passes (``.cleaned`` / ``.swap`` / ``.deleted``):
there, offsets only increase, nothing at an acknowledged offset changes, and the latest
acknowledged record of every key is still there (or a later one of the same key).

Beside the honest producers, a hostile one (its own connection) sends forged batches to the
same partitions through every cycle: headers claiming 2^31-1 records, counts that lie, bodies
that are no records, zstd bombs (:mod:`tests.broker.forge`). Every one must be refused, and
none may cost an honest acknowledged record (the checks above hold as they are: offsets stay
dense, so no forged batch took an offset).

After the last cycle a clean stop, then ``odradek dump-log --verify-index-only`` over every
segment: the indexes the recoveries rebuilt agree with the logs. ``make test`` runs
``CHAOS_CYCLES`` cycles (default 5); ``make reliability`` runs 50.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import cramjam
import pytest

from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from tests.broker.forge import INT32_MAX, forge, lying_count, record, records, zstd_bomb
from tests.broker.wire import Wire, fetch_all
from tests.broker_process import BrokerProcess

TOPIC = "chaos"
PARTITIONS = 2
CYCLES = int(os.environ.get("CHAOS_CYCLES", "5"))
OVERRIDES = [
    "log.segment.bytes=16384",  # a roll every few dozen batches
    "log.flush.offset.checkpoint.interval.ms=50",
    "log.flush.scheduler.interval.ms=50",
]

Acked = dict[int, dict[int, tuple[bytes, bytes]]]  # partition -> offset -> (key, value)
COMPACTED_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "16384",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
}


class Producer(threading.Thread):
    """Sends acks=all batches until the connection dies; records what was acknowledged."""

    def __init__(
        self,
        port: int,
        partition: int,
        cycle: int,
        rng: random.Random,
        acks: int,
        keys: int | None,
    ) -> None:
        super().__init__(daemon=True)
        self.port, self.partition, self.cycle, self.acks = port, partition, cycle, acks
        self.keys = keys  # None: one key for all; n: keys drawn from n (a compacted topic)
        self.rng = random.Random(rng.random())
        self.acked: dict[int, tuple[bytes, bytes]] = {}
        self.sent_batches = 0
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            wire = Wire(self.port, timeout_s=30)
        except OSError:
            return
        with wire:
            seq = 0
            while True:
                count = self.rng.randint(1, 20)
                values = [
                    f"c{self.cycle}-p{self.partition}-{seq + i}".encode() for i in range(count)
                ]
                seq += count
                keys = [
                    b"k%d" % self.rng.randrange(self.keys) if self.keys else b"k" for _ in values
                ]
                data = encode_batch(list(zip(keys, values, strict=True)))
                try:
                    result = wire.produce(TOPIC, self.partition, data, acks=self.acks)
                except (OSError, EOFError):
                    return  # the broker died under us: this batch is unacknowledged
                if result.error_code:
                    self.errors.append(f"batch {self.sent_batches}: error {result.error_code}")
                    return
                self.sent_batches += 1
                for i, record in enumerate(zip(keys, values, strict=True)):
                    self.acked[result.base_offset + i] = record


def hostile_batches() -> list[tuple[str, bytes]]:
    """What the hostile producer sends: forged batches every broker must refuse."""
    return [
        ("claims 2^31-1 records", lying_count(INT32_MAX)),
        ("claims 3 records, holds 1", lying_count(3)),
        ("body of garbage", forge(b"\x07" * 64, 1)),
        ("offset deltas skip", forge(record(0) + record(2), 2)),
        (
            "compressed count lie",
            forge(bytes(cramjam.zstd.compress(records(1))), INT32_MAX, codec=4),
        ),
        ("zstd bomb", zstd_bomb(4)),
    ]


class Hostile(threading.Thread):
    """Sends forged batches until the connection dies; records any the broker accepted."""

    def __init__(self, port: int, rng: random.Random, batches: list[tuple[str, bytes]]) -> None:
        super().__init__(daemon=True)
        self.port, self.batches = port, batches
        self.rng = random.Random(rng.random())
        self.sent = 0
        self.accepted: list[str] = []

    def run(self) -> None:
        try:
            wire = Wire(self.port, timeout_s=30)
        except OSError:
            return
        with wire:
            while True:
                name, data = self.rng.choice(self.batches)
                partition = self.rng.randrange(PARTITIONS)
                acks = self.rng.choice([m.ACKS_ALL, m.ACKS_LEADER])
                try:
                    result = wire.produce(TOPIC, partition, data, acks=acks)
                except (OSError, EOFError):
                    return
                self.sent += 1
                if result.error_code == 0:
                    self.accepted.append(f"{name} at offset {result.base_offset}")


def check_partition(
    wire: Wire, partition: int, acked: dict[int, tuple[bytes, bytes]], *, compacted: bool
) -> None:
    """Every acknowledged record is there unchanged (compacted: or a later one of its key)."""
    records = fetch_all(wire, TOPIC, partition)
    offsets = [r.offset for r in records]
    values = [r.value for r in records]
    assert len(set(values)) == len(values), f"partition {partition}: a value appears twice"
    changed = [r.offset for r in records if r.offset in acked and acked[r.offset][1] != r.value]
    assert not changed, f"partition {partition}: records changed at offsets {changed[:5]}"
    if not compacted:
        assert offsets == list(range(len(records))), f"partition {partition}: offsets not dense"
        lost = [o for o in acked if o >= len(records)]
        assert not lost, f"partition {partition}: {len(lost)} acknowledged records lost"
        return
    assert offsets == sorted(set(offsets)), f"partition {partition}: offsets not increasing"
    latest_in_log = {r.key: r.offset for r in records}
    latest_acked: dict[bytes, int] = {}
    for offset, (key, _) in sorted(acked.items()):
        latest_acked[key] = offset
    lost = {k: o for k, o in latest_acked.items() if latest_in_log.get(k, -1) < o}
    assert not lost, f"partition {partition}: the latest acknowledged value of {lost} is gone"


@pytest.mark.slow
@pytest.mark.timeout(60 + 30 * CYCLES)
@pytest.mark.parametrize(
    ("acks", "keys"),
    [(m.ACKS_ALL, None), (m.ACKS_LEADER, None), (m.ACKS_ALL, 25)],
    ids=["acks=all", "acks=1", "compacted"],
)
def test_sigkill_never_loses_acknowledged_records(
    broker_factory: Callable[..., BrokerProcess], acks: int, keys: int | None
) -> None:
    """acks=all: fsynced before the ack. acks=1: in the page cache before the ack, which a
    process crash (SIGKILL) does not lose; a power cut would (docs/durability.md).
    compacted: the cleaner runs all the time (kills land in its .cleaned/.swap steps); the
    latest acknowledged value of every key survives."""
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "20261123")))
    broker = broker_factory(overrides=[*OVERRIDES, "log.cleaner.backoff.ms=20"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        configs = COMPACTED_CONFIGS if keys else {}
        wire.create_topic(TOPIC, partitions=PARTITIONS, configs=configs)
    acked: Acked = {p: {} for p in range(PARTITIONS)}
    total_batches = cleaner_passes = hostile_sent = 0
    forged = hostile_batches()
    for cycle in range(CYCLES):
        producers = [Producer(broker.port, p, cycle, rng, acks, keys) for p in range(PARTITIONS)]  # type: ignore[arg-type]
        hostile = Hostile(broker.port, rng, forged)  # type: ignore[arg-type]
        hostile.start()
        for producer in producers:
            producer.start()
        # Kill once the producers are well under way: after a random number of acknowledged
        # records (enough, over the cycles, for segments to roll and the cleaner to run however
        # slow a loaded machine makes the fsyncs), then a random delay.
        wanted = rng.randint(400, 1200)
        deadline = time.monotonic() + 20
        while sum(len(p.acked) for p in producers) < wanted and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.3))
        assert broker.kill() == -9
        for producer in producers:
            producer.join(30)
            assert not producer.is_alive()
            assert producer.errors == [], producer.errors
            acked[producer.partition].update(producer.acked)
            total_batches += producer.sent_batches
        hostile.join(30)
        assert not hostile.is_alive()
        assert hostile.accepted == [], hostile.accepted
        hostile_sent += hostile.sent
        cleaner_passes += len(broker.events("log cleaned"))
        broker.lines.clear()
        broker.start()
        assert broker.events(f"loaded log dir {broker.log_dirs[0]} (unclean shutdown)")
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            for partition in range(PARTITIONS):
                check_partition(wire, partition, acked[partition], compacted=bool(keys))
    assert total_batches > 0, "no batch was ever acknowledged: the test tested nothing"
    assert hostile_sent > 0, "the hostile producer never got a batch refused"
    if keys:
        assert cleaner_passes > 0, "the cleaner never ran: the test tested no compaction"
    assert broker.stop() == 0
    segments = sorted(str(p) for p in broker.log_dirs[0].glob(f"{TOPIC}-*/*.log"))
    assert len(segments) > PARTITIONS  # rolls happened
    verify = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "dump-log", "--verify-index-only", *segments],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
