"""Power cuts, not only ``kill -9``: the broker runs on the power-cut file system
(:mod:`tests.powercut`), and each cut drops everything it had not made durable.

One broker, one log dir inside the FUSE mount, these workers in every cycle
(:mod:`tests.reliability.powercut_workload`): native ``acks=all`` producers on ``chaos`` (2
partitions, a roll every 16 KiB), on ``retained`` (``retention.bytes``: segments deleted all the
time) and on the compacted ``compacted`` (the cleaner swaps segments every few ms);
confluent-kafka's idempotent producer on ``idem`` (Kafka protocol; rolls write ``.snapshot``
files); an admin creating and deleting topics; a group committing offsets.

Each cycle cuts the power at one moment, taken in turn from :data:`MOMENTS`: ``random`` (a
random delay into the run) or a trip wire right after one step of the broker's own (a segment
roll, a checkpoint rename, a topic directory's creation, a deletion's rename, a cleaner swap, a
retention rename, an append to ``__consumer_offsets``, a ``.snapshot`` write). Then:

1. the broker is SIGKILLed (by the trip wire, or by the test), the file system unmounted and the
   backing directory rewound to its durable state, torn writes included; mounted again;
2. the broker restarts on it; a failed start is a recovery crash;
3. every record acknowledged in any cycle is at its acknowledged offset exactly once (compacted:
   every key's latest acknowledged record), every acknowledged topic creation exists and
   deletion stays, the group's committed offset is the last acknowledged one.

The counts (cuts per moment, acknowledged records, lost, duplicated, recovery crashes, bytes
recovery truncated) are printed at the end. ``POWERCUT_CYCLES``: ``make test`` runs 30 (three
of each moment), ``make reliability`` 250 (25 of each). ``POWERCUT_MOMENTS`` (names from
:data:`MOMENTS`, comma-separated) runs only those.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess
from tests.powercut.mount import PowerCutMount
from tests.reliability.conftest import SUMMARIES
from tests.reliability.powercut_workload import (
    Admin,
    Committer,
    IdempotentProducer,
    NativeProducer,
    check_admin,
    check_commits,
    check_log,
)

pytestmark = pytest.mark.slow

CYCLES = int(os.environ.get("POWERCUT_CYCLES", "30"))
OVERRIDES = [
    "log.segment.bytes=16384",
    "log.flush.offset.checkpoint.interval.ms=50",
    "log.retention.check.interval.ms=50",
    "log.segment.delete.delay.ms=50",
    "log.cleaner.backoff.ms=20",
    "offsets.topic.num.partitions=1",
]
TOPICS = {
    "chaos": (2, {}),
    "retained": (1, {"retention.bytes": "16384", "segment.bytes": "4096"}),
    "compacted": (
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "8192",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    ),
    "idem": (2, {"segment.bytes": "8192"}),
}
# name -> (change kind, glob on the path under the mount, most matches to let pass first,
# then: a second change of that kind to the same file is the moment)
Trip = tuple[str, str, int, str | None]
MOMENTS: dict[str, Trip | None] = {
    "random": None,
    "segment roll": ("create", "logs/chaos-*/*.log", 3, None),
    "first append after a roll": ("create", "logs/chaos-*/*.log", 3, "write"),
    "checkpoint write": ("rename", "logs/recovery-point-offset-checkpoint", 5, None),
    "topic creation": ("mkdir", "logs/pc-new-*", 2, None),
    "topic deletion": ("rename", "logs/*-delete", 1, None),
    "cleaner swap": ("rename", "logs/compacted-*/*.swap", 3, None),
    "retention deletion": ("rename", "logs/retained-*/*.deleted", 3, None),
    "group commit": ("write", "logs/__consumer_offsets-*/*.log", 10, None),
    "producer snapshot": ("*", "logs/idem-*/*.snapshot*", 3, None),
}
TRIP_TIMEOUT_S = 20.0


@pytest.mark.timeout(300 + 40 * CYCLES)
def test_power_cuts_never_lose_what_was_acknowledged(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "20261127")))
    fs = PowerCutMount(tmp_path / "powercut").mount()
    try:
        _run(fs, rng)
    finally:
        fs.close()


def _run(fs: PowerCutMount, rng: random.Random) -> None:
    broker = BrokerProcess([fs.mountpoint / "logs"], overrides=OVERRIDES).start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        for topic, (partitions, configs) in TOPICS.items():
            wire.create_topic(topic, partitions=partitions, configs=configs)
    acked: dict[tuple[str, int], dict[int, bytes]] = {}
    compacted_keys: dict[int, bytes] = {}
    created: set[str] = set()
    deleted: set[str] = set()
    deleting: set[str] = set()
    commit = (-1, -1)
    counts: Counter[str] = Counter({"lost": 0, "duplicated": 0, "recovery crashes": 0})
    problems: list[str] = []
    names = [n for n in os.environ.get("POWERCUT_MOMENTS", "").split(",") if n] or list(MOMENTS)
    for cycle in range(CYCLES):
        moment = names[cycle % len(names)]
        tag = f"c{cycle}"
        port: int = broker.port  # type: ignore[assignment]
        # Two producers share chaos-0: one's roll can come while the other's append is not
        # fsynced yet (one producer alone has always had its last append fsynced).
        natives = [NativeProducer(port, rng, "chaos", p, f"{tag}-p{p}") for p in (0, 1)]
        natives.append(NativeProducer(port, rng, "chaos", 0, f"{tag}-p0b"))
        natives.append(NativeProducer(port, rng, "retained", 0, f"{tag}-r"))
        natives.append(NativeProducer(port, rng, "compacted", 0, f"{tag}-k", keys=25))
        idem = IdempotentProducer(port, rng, "idem", f"{tag}-i")
        admin = Admin(port, rng, tag)
        committer = Committer(port, rng, "chaos", max(commit[1], 0) + 1)
        workers = [*natives, idem, admin, committer]
        for worker in workers:
            worker.start()
        tripped = _cut_at(fs, broker, rng, MOMENTS[moment])
        counts[f"cuts: {moment}" + ("" if tripped else " (not reached: cut at the timeout)")] += 1
        for worker in workers:
            worker.stop.set()
        for worker in workers:
            worker.join(60)
            assert not worker.is_alive(), f"{worker} hangs"
            problems += [f"cycle {cycle}: {e}" for e in worker.errors]
        for producer in natives:
            key = (producer.topic, producer.partition)
            acked.setdefault(key, {}).update({o: v for o, (_, v) in producer.acked.items()})
            if producer.topic == "compacted":
                compacted_keys.update({o: k for o, (k, _) in producer.acked.items()})
        for partition, values in idem.acked.items():
            acked.setdefault(("idem", partition), {}).update(values)
        created |= set(admin.created)
        deleted |= set(admin.deleted)
        deleting |= set(admin.deleting)
        commit = (max(commit[0], committer.acked), max(commit[1], committer.sent))
        report = fs.cut(rng)
        print(f"cycle {cycle} ({moment}, tripped: {tripped}): {report.summary()}", flush=True)
        counts["bytes dropped by the cut"] += report.bytes_dropped
        broker.lines.clear()
        restart_s = time.monotonic()
        try:  # recovery through FUSE on a loaded machine may be slow; only failing is a crash
            broker.start(timeout_s=120)
        except RuntimeError as exc:
            counts["recovery crashes"] += 1
            problems.append(f"cycle {cycle} ({moment}): recovery crashed: {exc}")
            break
        slowest = max(counts["slowest restart, s"], round(time.monotonic() - restart_s))
        counts["slowest restart, s"] = slowest  # shown: slow recovery is no crash, but a cost
        counts["recovery truncations logged"] += len(
            [e for e in broker.lines if "truncated" in str(e.get("event", ""))]
        )
        damaged = [e for e in broker.lines if e.get("level") in ("error", "critical")]
        problems += [f"cycle {cycle} ({moment}): {e.get('event')}" for e in damaged]
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            for (topic, partition), values in sorted(acked.items()):
                result = check_log(
                    wire,
                    topic,
                    partition,
                    values,
                    compacted=topic == "compacted",
                    keys=compacted_keys,
                )
                counts["lost"] += result.lost
                counts["duplicated"] += result.duplicated
                problems += [f"cycle {cycle} ({moment}): {p}" for p in result.problems]
            admin_problems = check_admin(wire, created, deleted, deleting)
            commit_problems = check_commits(wire, "chaos", *commit)
            problems += [f"cycle {cycle} ({moment}): {p}" for p in admin_problems + commit_problems]
        if problems:
            break
    broker.stop()
    counts["acknowledged records"] = sum(len(v) for v in acked.values())
    counts["acknowledged topic creations"] = len(created)
    counts["acknowledged group commits"] = max(commit[0], 0)
    summary = "power-cut chaos: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print("\n" + summary)
    SUMMARIES.append(summary)
    assert not problems, "\n".join(problems[:20])
    assert counts["acknowledged records"] > 0, "nothing was acknowledged: the test tested nothing"
    if len(names) <= CYCLES:  # torn tails happen in every few cuts: recovery must say so
        assert counts["recovery truncations logged"] > 0, "no cut ever left a torn tail"
    for moment in names:
        if MOMENTS[moment] is not None and len(names) <= CYCLES:
            assert counts[f"cuts: {moment}"] > 0, f"no cut ever landed on: {moment}"


def _cut_at(
    fs: PowerCutMount,
    broker: BrokerProcess,
    rng: random.Random,
    trip: Trip | None,
) -> bool:
    """Kill the broker at the moment ``trip`` names (or at random); whether it tripped."""
    process = broker.process
    assert process is not None
    if trip is None:
        time.sleep(rng.uniform(0.3, 2.0))
        broker.kill()
        return True
    kind, glob, most, then = trip
    fs.arm_trip(kind, glob, rng.randint(0, most), then)
    try:
        process.wait(TRIP_TIMEOUT_S)  # the trip wire SIGKILLs it
    except subprocess.TimeoutExpired:  # the moment never came
        broker.kill()
        return False
    broker.kill()  # reaps it and its log reader
    return True
