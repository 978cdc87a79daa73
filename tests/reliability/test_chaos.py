"""Chaos: SIGKILL the broker at random moments while producers write (acks=all, acks=1).

Each cycle starts the broker on the same log dir, runs one producer thread per partition (its
own connection, batches of 1-20 records with unique values), kills the broker with
SIGKILL after a random delay (appends, segment rolls every few KiB, offset checkpoints every
50 ms and group-commit fsyncs are all in flight), restarts it and checks, per partition:

1. offsets are dense from 0 to the log end (nothing skipped, nothing duplicated);
2. every batch acknowledged in any cycle is there, at its acknowledged offsets, unchanged;
3. no value appears twice (an unacknowledged batch is there at most once).

After the last cycle a clean stop, then ``odradek dump-log --verify-index-only`` over every
segment: the indexes the recoveries rebuilt agree with the logs. ``make test`` runs
``CHAOS_CYCLES`` cycles (default 5); ``make chaos`` runs 50.
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

import pytest

from protocol import messages as m
from protocol.records import encode_batch
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

Acked = dict[int, dict[int, bytes]]  # partition -> offset -> value


class Producer(threading.Thread):
    """Sends acks=all batches until the connection dies; records what was acknowledged."""

    def __init__(
        self, port: int, partition: int, cycle: int, rng: random.Random, acks: int
    ) -> None:
        super().__init__(daemon=True)
        self.port, self.partition, self.cycle, self.acks = port, partition, cycle, acks
        self.rng = random.Random(rng.random())
        self.acked: dict[int, bytes] = {}
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
                data = encode_batch([(b"k", v) for v in values])
                try:
                    result = wire.produce(TOPIC, self.partition, data, acks=self.acks)
                except (OSError, EOFError):
                    return  # the broker died under us: this batch is unacknowledged
                if result.error_code:
                    self.errors.append(f"batch {self.sent_batches}: error {result.error_code}")
                    return
                self.sent_batches += 1
                for i, value in enumerate(values):
                    self.acked[result.base_offset + i] = value


def check_partition(wire: Wire, partition: int, acked: dict[int, bytes]) -> int:
    records = fetch_all(wire, TOPIC, partition)
    offsets = [r.offset for r in records]
    assert offsets == list(range(len(records))), f"partition {partition}: offsets not dense"
    values = [r.value for r in records]
    assert len(set(values)) == len(values), f"partition {partition}: a value appears twice"
    lost = {o: v for o, v in acked.items() if o >= len(records) or records[o].value != v}
    assert not lost, f"partition {partition}: {len(lost)} acknowledged records lost or changed"
    return len(records)


@pytest.mark.slow
@pytest.mark.timeout(60 + 30 * CYCLES)
@pytest.mark.parametrize("acks", [m.ACKS_ALL, m.ACKS_LEADER], ids=["acks=all", "acks=1"])
def test_sigkill_never_loses_acknowledged_records(
    broker_factory: Callable[..., BrokerProcess], acks: int
) -> None:
    """acks=all: fsynced before the ack. acks=1: in the page cache before the ack, which a
    process crash (SIGKILL) does not lose; a power cut would (docs/durability.md)."""
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "20261123")))
    broker = broker_factory(overrides=OVERRIDES)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic(TOPIC, partitions=PARTITIONS)
    acked: Acked = {p: {} for p in range(PARTITIONS)}
    total_batches = 0
    for cycle in range(CYCLES):
        producers = [Producer(broker.port, p, cycle, rng, acks) for p in range(PARTITIONS)]  # type: ignore[arg-type]
        for producer in producers:
            producer.start()
        # Kill once the producers are under way: after a first ack, then a random delay.
        deadline = time.monotonic() + 20
        while not any(p.acked for p in producers) and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.3))
        assert broker.kill() == -9
        for producer in producers:
            producer.join(30)
            assert not producer.is_alive()
            assert producer.errors == [], producer.errors
            acked[producer.partition].update(producer.acked)
            total_batches += producer.sent_batches
        broker.lines.clear()
        broker.start()
        assert broker.events(f"loaded log dir {broker.log_dirs[0]} (unclean shutdown)")
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            for partition in range(PARTITIONS):
                check_partition(wire, partition, acked[partition])
    assert total_batches > 0, "no batch was ever acknowledged: the test tested nothing"
    assert broker.stop() == 0
    segments = sorted(str(p) for p in broker.log_dirs[0].glob(f"{TOPIC}-*/*.log"))
    assert len(segments) > PARTITIONS  # rolls happened
    verify = subprocess.run(
        [sys.executable, "-m", "cli.main", "dump-log", "--verify-index-only", *segments],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
