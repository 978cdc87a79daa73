"""End to end through the public client: producer and consumer throughput, and latency.

One broker process; every client runs in its own process, as an application would.

1. ``raw produce`` (baseline): pre-built 16 KiB batches of 100-byte records sent over the
   native protocol, 64 requests in flight, acks=1 — what the broker can ingest when the
   client costs nothing. Records/s.
2. ``Producer, acks=1`` / ``acks=all``: ``odradek perf produce`` (the public
   :class:`odradek.client.Producer`, one record per ``send()``), ``num_records`` 100-byte records;
   acks=1 against 1, acks=all against acks=1 (goal: at least 0.5).
3. ``raw fetch reader`` (baseline): back-to-back 8 MiB Fetches of the same topic that only
   find the next offset (see ``bench.fetch``); ``Consumer`` = ``odradek perf consume``
   iterating every record through the public :class:`odradek.client.Consumer`. Records/s.
4. Latency: a producer process sends at ``latency_rate`` records/s (``linger_ms`` 0, acks=1),
   each value starting with its ``time.time_ns()`` at ``send()``; the consumer (this
   process) takes ``now - stamp`` for each record. p50/p99/p99.9 against the median round
   trip of an ApiVersions request on the same machine (the floor any request pays).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures, Stopwatch, median, percentile
from bench.fetch import Params as FetchParams
from bench.fetch import fill_partition, read_partition
from odradek.protocol import messages as m
from tests.broker.wire import Wire
from tests.broker_process import REPO, BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "producer and consumer throughput, produce-to-consume latency (public client)"
_STAMP = struct.Struct(">q")

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    num_records: int = 2_000_000
    record_bytes: int = 100
    raw_bytes: int = 256 << 20
    repeats: int = 3
    latency_rate: int = 50_000  # records/s
    latency_seconds: float = 10.0
    pings: int = 2_000

    @classmethod
    def quick(cls) -> Params:
        return cls(
            num_records=300_000, raw_bytes=64 << 20, repeats=1, latency_seconds=3.0, pings=500
        )


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    figures = Figures()
    broker = BrokerProcess([scratch / "logs"]).start()
    bootstrap = broker.bootstrap
    try:
        raw, acks1, acks_all, reader, consumer = [], [], [], [], []
        for round_ in range(params.repeats):
            say(f"round {round_ + 1}/{params.repeats}")
            raw_topic = f"raw-{round_}"
            fill = FetchParams(data_bytes=params.raw_bytes)
            with Stopwatch() as watch:
                records = fill_partition(broker.port, raw_topic, fill)  # type: ignore[arg-type]
            raw.append(records / watch.seconds)
            acks1.append(_perf_produce(bootstrap, f"p1-{round_}", params, "1"))
            acks_all.append(_perf_produce(bootstrap, f"pa-{round_}", params, "all"))
            with Stopwatch() as watch:
                read_partition(broker.port, f"p1-{round_}", params.num_records, 8 << 20)  # type: ignore[arg-type]
            reader.append(params.num_records / watch.seconds)
            consumer.append(_perf_consume(bootstrap, f"p1-{round_}", params.num_records))
        say(f"latency at {params.latency_rate} records/s for {params.latency_seconds} s")
        latencies_ms = _latency(bootstrap, params)
        pings_ms = _pings(broker.port, params.pings)  # type: ignore[arg-type]
    finally:
        broker.stop()

    add = figures.add
    add("raw produce, pre-built batches", median(raw), "records/s", samples=raw, is_baseline=True)
    add("Producer, acks=1", median(acks1), "records/s", baseline="raw produce, pre-built batches",
        samples=acks1, note=f"{params.num_records:,} x {params.record_bytes} B")  # fmt: skip
    add("Producer, acks=all", median(acks_all), "records/s", baseline="Producer, acks=1",
        samples=acks_all, note="fsync group commit")  # fmt: skip
    add("raw fetch reader", median(reader), "records/s", samples=reader, is_baseline=True)
    add("Consumer, iterating", median(consumer), "records/s", baseline="raw fetch reader",
        samples=consumer)  # fmt: skip
    ping = median(pings_ms)
    add("ApiVersions round trip, p50", ping, "ms", is_baseline=True, note="loopback floor")
    for p in (50, 99, 99.9):
        add(f"produce-to-consume latency, p{p}", percentile(latencies_ms, p), "ms",
            baseline="ApiVersions round trip, p50",
            note=f"{params.latency_rate:,} records/s, {len(latencies_ms):,} records")  # fmt: skip
    return figures.items


def _odradek(*args: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"odradek {' '.join(args)} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def _perf_produce(bootstrap: str, topic: str, params: Params, acks: str) -> float:
    summary = _odradek(
        "perf", "produce", "--bootstrap-server", bootstrap, "--topic", topic,
        "--num-records", str(params.num_records), "--record-size", str(params.record_bytes),
        "--acks", acks,
    )  # fmt: skip
    return summary["records_per_s"]


def _perf_consume(bootstrap: str, topic: str, count: int) -> float:
    summary = _odradek(
        "perf", "consume", "--bootstrap-server", bootstrap, "--topic", topic,
        "--num-records", str(count),
    )  # fmt: skip
    return summary["records_per_s"]


def _pings(port: int, count: int) -> list[float]:
    with Wire(port) as wire:
        samples = []
        for _ in range(count):
            t0 = time.perf_counter()
            wire.call(m.ApiVersionsRequest(correlation_id=0))
            samples.append((time.perf_counter() - t0) * 1000)
    return samples


def _latency(bootstrap: str, params: Params) -> list[float]:
    """Produce-to-consume latencies (ms) of every record a paced producer sends."""
    from odradek.client import Admin, Consumer, NewTopic, TopicPartition

    topic = "latency"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    total = int(params.latency_rate * params.latency_seconds)
    latencies: list[float] = []
    with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=100) as consumer:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_end(partition)
        consumer.position(partition)
        producer = multiprocessing.get_context("spawn").Process(
            target=_paced_producer,
            args=(bootstrap, topic, params.latency_rate, total, params.record_bytes),
        )
        producer.start()
        try:
            deadline = time.monotonic() + params.latency_seconds * 3 + 30
            while len(latencies) < total and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    now_ns = time.time_ns()
                    latencies.extend(
                        (now_ns - _STAMP.unpack_from(r.value)[0]) / 1e6 for r in records
                    )
        finally:
            producer.join(30)
    if len(latencies) < total:
        raise RuntimeError(f"only {len(latencies)} of {total} latency records arrived")
    return latencies


def _paced_producer(bootstrap: str, topic: str, rate: int, total: int, size: int) -> None:
    """Send ``total`` records at ``rate``/s, each stamped with ``time.time_ns()``."""
    from odradek.client import Producer

    padding = os.urandom(max(0, size - _STAMP.size))
    with Producer(bootstrap, acks=1, linger_ms=0) as producer:
        started = time.perf_counter()
        for i in range(total):
            ahead_s = i / rate - (time.perf_counter() - started)
            if ahead_s > 0.0005:
                time.sleep(ahead_s)
            producer.send(topic, _STAMP.pack(time.time_ns()) + padding)
        producer.flush()
