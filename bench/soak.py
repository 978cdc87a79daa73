"""Soak: minutes of mixed load; the broker's memory, descriptors and latency must stay flat.

One broker (loopback, temporary dirs) with small segments, 1 s retention and cleaner checks,
and everything running at once, each client in its own process:

- a paced producer (``odradek perf produce --throughput``) on ``events`` (cleanup.policy
  delete, ``retention.ms`` 10 s: segments are deleted all the time);
- a keyed producer on ``table`` (cleanup.policy compact; a small key space, so the cleaner
  always has work), with tombstones;
- a consumer following ``events`` from its end (it falls behind retention and resets);
- group churn: consumers of one group join, read for a while and leave, one after another;
- a probe in this process: one acks=1 produce round trip every 50 ms on ``probe``.

Every ``sample_s`` the broker's RSS (``/proc/<pid>/status``), open descriptors
(``/proc/<pid>/fd``) and the probe's latencies are taken. Figures: the first and the last
window of each, the last against the first (flat = a ratio near 1), and the maximum RSS and
descriptor count. The run is bounded (``duration_s``) and never leaves loopback.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures, open_fds, percentile, rss_bytes
from tests.broker.wire import Wire, batch
from tests.broker_process import REPO, BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "soak: RSS, open descriptors and produce latency under mixed load"
BROKER_OVERRIDES = [
    "log.segment.bytes=1048576",
    "log.retention.check.interval.ms=1000",
    "log.cleaner.backoff.ms=1000",
    "log.segment.delete.delay.ms=1000",
    "group.initial.rebalance.delay.ms=0",
]

TABLE_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "262144",
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": "5000",
}

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    duration_s: float = 300.0
    sample_s: float = 5.0
    events_per_s: int = 20_000
    keyed_per_s: int = 5_000
    keys: int = 2_000
    probe_interval_s: float = 0.05
    churn_every_s: float = 3.0

    @classmethod
    def quick(cls) -> Params:
        return cls(duration_s=30.0, sample_s=3.0)


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    broker = BrokerProcess([scratch / "logs"], overrides=BROKER_OVERRIDES).start()
    pid = broker.process.pid  # type: ignore[union-attr]
    workers: list[subprocess.Popen[bytes] | multiprocessing.process.BaseProcess] = []
    samples: list[tuple[float, int, int, list[float]]] = []
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic(
                "events", configs={"retention.ms": "10000", "segment.bytes": "1048576"}
            )
            wire.create_topic("table", configs=TABLE_CONFIGS)
            wire.create_topic("probe")
        workers += _start_workers(broker.bootstrap, params)
        say(f"soaking for {params.duration_s:.0f} s ({len(workers)} client processes)")
        samples = _probe(broker.port, pid, params)  # type: ignore[arg-type]
    finally:
        for worker in workers:
            _stop(worker)
        status = broker.stop()
    if status != 0:
        raise RuntimeError(f"broker exited with {status}")
    errors = [e for e in broker.lines if e.get("level") in ("error", "critical")]
    if errors:
        raise RuntimeError(f"broker logged errors: {errors[:3]}")
    return _figures(samples, broker, params)


def _start_workers(
    bootstrap: str, params: Params
) -> list[subprocess.Popen[bytes] | multiprocessing.process.BaseProcess]:
    records = int(params.events_per_s * params.duration_s * 2)  # paced: runs past the end
    produce = subprocess.Popen(
        [sys.executable, "-m", "odradek.cli.main", "perf", "produce", "--bootstrap-server",
        bootstrap,
         "--topic", "events", "--num-records", str(records), "--throughput",
         str(params.events_per_s), "--acks", "1"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    spawn = multiprocessing.get_context("spawn")
    keyed = spawn.Process(target=_keyed_producer, args=(bootstrap, params), daemon=True)
    follower = spawn.Process(target=_follower, args=(bootstrap,), daemon=True)
    churn = spawn.Process(target=_group_churn, args=(bootstrap, params), daemon=True)
    for process in (keyed, follower, churn):
        process.start()
    return [produce, keyed, follower, churn]


def _stop(worker: subprocess.Popen[bytes] | multiprocessing.process.BaseProcess) -> None:
    if isinstance(worker, subprocess.Popen):
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
    else:
        worker.terminate()
        worker.join(10)


def _probe(port: int, pid: int, params: Params) -> list[tuple[float, int, int, list[float]]]:
    """Produce round trips every ``probe_interval_s``; a sample every ``sample_s``."""
    samples = []
    started = time.monotonic()
    window: list[float] = []
    next_sample = started + params.sample_s
    with Wire(port) as wire:
        data = batch(1, value_bytes=100)
        while (now := time.monotonic()) - started < params.duration_s:
            t0 = time.perf_counter()
            result = wire.produce("probe", 0, data)
            window.append((time.perf_counter() - t0) * 1000)
            if result.error_code:
                raise RuntimeError(f"probe produce failed: {result}")
            if now >= next_sample:
                samples.append((now - started, rss_bytes(pid), open_fds(pid), window))
                window = []
                next_sample += params.sample_s
            time.sleep(params.probe_interval_s)
    return samples


def _figures(
    samples: list[tuple[float, int, int, list[float]]], broker: BrokerProcess, params: Params
) -> list[Figure]:
    if len(samples) < 2:
        raise RuntimeError("the soak was too short to take two samples")
    figures = Figures()
    first, last = samples[0], samples[-1]
    mib = 1 << 20
    figures.add("broker RSS, first window", first[1] / mib, "MiB", is_baseline=True)
    figures.add("broker RSS, last window", last[1] / mib, "MiB",
                baseline="broker RSS, first window", note=f"at {last[0]:.0f} s")  # fmt: skip
    figures.add("broker RSS, max", max(s[1] for s in samples) / mib, "MiB",
                baseline="broker RSS, first window")  # fmt: skip
    figures.add("open descriptors, first window", first[2], "fds", is_baseline=True)
    figures.add("open descriptors, last window", last[2], "fds",
                baseline="open descriptors, first window")  # fmt: skip
    figures.add("open descriptors, max", max(s[2] for s in samples), "fds",
                baseline="open descriptors, first window")  # fmt: skip
    for p in (50, 99):
        base = f"probe produce p{p}, first window"
        figures.add(base, percentile(first[3], p), "ms", is_baseline=True)
        figures.add(f"probe produce p{p}, last window", percentile(last[3], p), "ms",
                    baseline=base)  # fmt: skip
        figures.add(f"probe produce p{p}, worst window",
                    max(percentile(s[3], p) for s in samples), "ms", baseline=base)  # fmt: skip
    deleted = len(broker.events("log segments deleted"))
    cleaned = len(broker.events("log cleaned"))
    generations = len(broker.events("group generation formed"))
    figures.add("retention deletions", deleted, "events", note="log segments deleted")
    figures.add("cleaner passes", cleaned, "events", note="log cleaned")
    figures.add("group generations formed", generations, "events", note="group churn")
    return figures.items


# -- client processes (spawned: they import the client themselves) ----------------------------


def _keyed_producer(bootstrap: str, params: Params) -> None:
    from odradek.client import Producer

    with Producer(bootstrap, acks=1, linger_ms=5) as producer:
        started, sent = time.perf_counter(), 0
        while True:
            key = b"key-%d" % (sent % params.keys)
            value = None if sent % 97 == 0 else b"value-%d" % sent  # some tombstones
            producer.send("table", value, key)
            sent += 1
            ahead_s = sent / params.keyed_per_s - (time.perf_counter() - started)
            if ahead_s > 0.001:
                time.sleep(ahead_s)


def _follower(bootstrap: str) -> None:
    from odradek.client import Consumer, TopicPartition

    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        tp = TopicPartition("events", 0)
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        for _ in consumer:
            pass


def _group_churn(bootstrap: str, params: Params) -> None:
    """Group members come and go: each joins, reads for ``churn_every_s``, commits, leaves."""
    from odradek.client import Consumer

    while True:
        consumer = Consumer(
            "events", bootstrap_servers=bootstrap, group_id="soak-group", auto_offset_reset="latest"
        )
        deadline = time.monotonic() + params.churn_every_s
        with consumer:
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)
