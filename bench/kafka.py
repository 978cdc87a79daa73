"""The Kafka listener against the native protocol on the same broker, and unmodified clients.

One ``odradek serve`` process (the shipped config; the Kafka protocol and the native one share
its port). Three parts, each interleaved round by round (one untimed warm-up round, medians):

1. **Produce, records/s.** The same pre-built 16 KiB batches of 100-byte records
   (``bench.storage.build_batches``: 148 records each), one batch per request, acks=1, one
   partition, ``window`` requests in flight on one raw socket, every partition error checked.
   ``native``: ``tests.broker.wire.Wire`` with ``bench.fetch.produce_batches`` (the
   baseline). ``Kafka Produce v7`` / ``v9``: requests built per send with
   ``odradek.protocol.kafka.encode_request`` (v9 is the flexible encoding), responses read in
   order with ``decode_response``, each correlation id checked. Both encoders cost ~3-5 µs
   per 16 KiB request in this process (measured when writing this); the broker, not the
   client, is what is timed. Each round writes into a fresh topic, deleted afterwards
   (untimed), so the log does not grow from round to round.
2. **Fetch serving, MB/s.** A partition filled with ``data_bytes`` (``bench.fetch
   .fill_partition``), the broker restarted cleanly, then read back from offset 0 with
   back-to-back Fetch requests of ``fetch_bytes`` (one in flight, ``max_wait_ms`` 0): the native
   raw reader (``bench.fetch.read_partition``, the baseline), Kafka Fetch v11 and v12
   (flexible) through the codec, each response received into one reused buffer and only its
   batch headers parsed for the next offset; and loopback ``os.sendfile`` of the same files
   (``bench.fetch``), the machine's ceiling.
3. **Unmodified clients, 100-byte records, records/s** (:mod:`bench.kafka_unmodified`). Each
   workload a process of its own (:mod:`bench.kafka_clients`; ``odradek perf
   produce|consume``; :mod:`bench.peer_clients` for Redis): confluent-kafka, kafka-python 3
   and aiokafka produce (acks=1, idempotence off, linger 5 ms) into a fresh one-partition
   topic and consume it back (partition 0 assigned, from the beginning); the baselines are
   ``odradek perf produce --acks 1`` / ``perf consume`` on the same kind of topic and Redis
   Streams (``XADD`` pipelined, ``XRANGE`` pages; AOF off) as in ``bench.peers``.
   confluent-kafka consumes twice per round: with ``fetch.queue.backoff.ms=1`` (the figure)
   and with librdkafka's defaults (its 1 s fetch pause once 100,000 records are queued
   locally is a client timer, see ``bench.kafka_unmodified.CONFLUENT_CONSUME``). A client
   library that is not installed, or a Redis that cannot be, is reported ``n/a`` with the
   reason.

4. **Broker instructions per Produce request** (``instructions``; not in ``--quick``): the
   same three produce workloads, ``instruction_requests`` requests each, twice, against a
   second broker run under valgrind's callgrind (:mod:`bench.callgrind`): instructions the
   broker executed ÷ requests. Unlike the timed figures, these repeat to within 0.2 % on a
   busy machine; the ratio is the Kafka path's cost over the native one (lower is better).

``--set profile_broker=true`` runs the broker under cProfile (main thread only) and writes
``bench/results/kafka-broker-<phase>.prof`` per broker lifetime (``produce`` covers the
produce rounds and the fill, ``serve`` the fetch rounds and the clients).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import callgrind
from bench.common import Figure, Figures, Stopwatch, format_size, interleaved, mb_per_s, median
from bench.fetch import Params as FetchParams
from bench.fetch import _sendfile_loopback, fill_partition, produce_batches
from bench.fetch import read_partition as native_read_partition
from bench.kafka_unmodified import clients_part
from bench.kafka_wire import kafka_produce, kafka_read_partition
from bench.storage import Params as StorageParams
from bench.storage import build_batches
from odradek.protocol import messages as m
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "process_cpu_s", "run"]

TITLE = "Kafka listener vs native protocol (same broker, same run), and unmodified Kafka clients"
RESULTS = Path(__file__).resolve().parent / "results"

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    produce_requests: int = 16_384  # 16 KiB batches per produce run (256 MiB)
    window: int = 32  # produce requests in flight
    data_bytes: int = 1 << 30  # the partition read back by the fetch runs
    fetch_bytes: int = 1 << 20  # max_bytes and partition_max_bytes of each Fetch
    repeats: int = 5  # produce and fetch rounds (after one warm-up round)
    num_records: int = 300_000  # per client workload
    record_bytes: int = 100
    client_repeats: int = 3
    client_warmup: int = 1
    redis_pipeline: int = 1000
    redis_page: int = 10_000
    install: bool = True  # apt-get install redis-server when it is missing
    profile_broker: bool = False
    instructions: bool = True  # part 4 (valgrind)
    instruction_requests: int = 1000

    @classmethod
    def quick(cls) -> Params:
        return cls(
            produce_requests=2048,
            data_bytes=128 << 20,
            repeats=3,
            num_records=50_000,
            client_repeats=1,
            client_warmup=0,
            instructions=False,
        )


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    figures = Figures()
    broker = BrokerProcess([scratch / "logs"], overrides=["log.segment.delete.delay.ms=0"])
    _profiled(broker, params, "produce")
    with contextlib.ExitStack() as stack:
        stack.enter_context(broker)  # started here, stopped on the way out
        _produce_part(params, broker, figures, say)
        say(f"fetch: filling a partition with {format_size(params.data_bytes)}")
        fill = FetchParams(data_bytes=params.data_bytes)
        end_offset = fill_partition(broker.port, "fetch-bench", fill)  # type: ignore[arg-type]
        broker.stop()
        _profiled(broker, params, "serve")
        broker.start()
        _fetch_part(params, broker.port, scratch, end_offset, figures, say)  # type: ignore[arg-type]
        clients_part(params, broker, scratch, stack, figures, say)
    _instructions_part(params, scratch, figures, say)
    return figures.items


def _profiled(broker: BrokerProcess, params: Params, phase: str) -> None:
    if params.profile_broker:
        RESULTS.mkdir(parents=True, exist_ok=True)
        profile = str(RESULTS / f"kafka-broker-{phase}.prof")
        broker.program = [sys.executable, "-m", "cProfile", "-o", profile, "-m", "odradek.cli.main"]


# -- 1. produce --------------------------------------------------------------------------------


def _produce_part(params: Params, broker: BrokerProcess, figures: Figures, say: Say) -> None:
    batches, per_batch = build_batches(StorageParams())
    count, state = params.produce_requests, {"round": 0}
    port, pid = broker.port, broker.process.pid  # type: ignore[union-attr]
    cpu_us: dict[str, list[float]] = {"native": [], "v7": [], "v9": []}
    say(
        f"produce: {count:,} x {len(batches[0]):,} B batches ({per_batch} records) per run, "
        f"{params.window} in flight, {params.repeats} rounds + 1 warm-up"
    )

    def timed(name: str, produce: Callable[[str], None]) -> Callable[[], float]:
        def go() -> float:
            state["round"] += 1
            topic = f"produce-{name}-{state['round']}"
            with Wire(port) as wire:
                wire.create_topic(topic, partitions=1)
            cpu_s = process_cpu_s(pid)
            with Stopwatch() as watch:
                produce(topic)
            cpu_us[name].append((process_cpu_s(pid) - cpu_s) / count * 1e6)
            with Wire(port) as wire:
                end = wire.list_offset(topic, 0, -1).offset
                wire.call(m.DeleteTopicsRequest(correlation_id=0, topic_names=[topic]))
            if end != count * per_batch:
                raise RuntimeError(f"{topic}: log end offset {end}, expected {count * per_batch}")
            return count * per_batch / watch.seconds

        return go

    def native(topic: str) -> None:
        with Wire(port) as wire:
            produce_batches(wire, topic, batches, count, params.window)

    def kafka_v(version: int) -> Callable[[str], None]:
        return lambda topic: kafka_produce(port, topic, batches, count, params.window, version)

    samples = interleaved(
        {
            "native": timed("native", native),
            "v7": timed("v7", kafka_v(7)),
            "v9": timed("v9", kafka_v(9)),
        },
        params.repeats,
        warmup=1,
    )
    note = f"{per_batch} x {StorageParams().value_bytes} B per 16 KiB batch, acks=1"
    base = figures.add(
        "native Produce, 16 KiB batches",
        median(samples["native"]),
        "records/s",
        samples=samples["native"],
        note=f"{note}, {params.window} in flight",
        is_baseline=True,
    ).name
    for version, what in ((7, "non-flexible"), (9, "flexible")):
        values = samples[f"v{version}"]
        figures.add(f"Kafka Produce v{version}", median(values), "records/s",
                    baseline=base, samples=values, note=f"{what}; goal >= 0.9")  # fmt: skip
    # the warm-up round is the first sample of each: dropped, as interleaved() drops its value
    base = figures.add("broker CPU per request, native Produce", median(cpu_us["native"][1:]),
                       "µs", samples=cpu_us["native"][1:], is_baseline=True,
                       note="utime + stime of the broker process / requests").name  # fmt: skip
    for version in (7, 9):
        values = cpu_us[f"v{version}"][1:]
        figures.add(f"broker CPU per request, Kafka Produce v{version}", median(values), "µs",
                    baseline=base, samples=values)  # fmt: skip


def _instructions_part(params: Params, scratch: Path, figures: Figures, say: Say) -> None:
    if not params.instructions:
        return
    if not callgrind.available():
        say("instructions: skipped, valgrind is not installed (apt-get install valgrind)")
        return
    batches, _per_batch = build_batches(StorageParams())
    count, counts = params.instruction_requests, {"native": [], "v7": [], "v9": []}
    say(f"instructions: {count:,} produce requests per workload, broker under callgrind")

    def produce(port: int, topic: str, name: str, requests: int) -> None:
        if name == "native":
            with Wire(port) as wire:
                produce_batches(wire, topic, batches, requests, params.window)
        else:
            kafka_produce(port, topic, batches, requests, params.window, int(name[1:]))

    with callgrind.CallgrindBroker([scratch / "callgrind-logs"], scratch / "callgrind") as cg:
        for round_ in range(2):
            for name, values in counts.items():
                topic = f"instructions-{name}-{round_}"
                with Wire(cg.port) as wire:
                    wire.create_topic(topic, partitions=1)
                produce(cg.port, topic, name, 50)  # warm-up: first-use compilation, buffers
                work = functools.partial(produce, cg.port, topic, name, count)
                values.append(cg.instructions(work) / count)
    base = figures.add(
        "broker instructions per request, native Produce",
        median(counts["native"]),
        "instructions",
        samples=counts["native"],
        is_baseline=True,
        note=f"callgrind, {count:,} requests x 2 rounds",
    ).name
    for version in (7, 9):
        values = counts[f"v{version}"]
        figures.add(
            f"broker instructions per request, Kafka Produce v{version}",
            median(values),
            "instructions",
            baseline=base,
            samples=values,
            note="lower is better",
        )


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` has used (``/proc/<pid>/stat``;
    clock-tick resolution, 10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- 2. fetch ----------------------------------------------------------------------------------


def _fetch_part(
    params: Params, port: int, scratch: Path, end_offset: int, figures: Figures, say: Say
) -> None:
    segments = sorted((scratch / "logs" / "fetch-bench-0").glob("*.log"))
    total = sum(p.stat().st_size for p in segments)
    size = params.fetch_bytes
    say(f"fetch: {end_offset:,} records, {format_size(total)}, {format_size(size)} per Fetch")
    timings = interleaved(
        {
            "sendfile": lambda: _sendfile_loopback(segments),
            "native": lambda: native_read_partition(port, "fetch-bench", end_offset, size),
            "v11": lambda: kafka_read_partition(port, "fetch-bench", end_offset, size, 11),
            "v12": lambda: kafka_read_partition(port, "fetch-bench", end_offset, size, 12),
        },
        params.repeats,
        warmup=1,
    )
    rates = {name: [mb_per_s(total, s) for s in runs] for name, runs in timings.items()}
    ceiling = figures.add("loopback os.sendfile", median(rates["sendfile"]), "MB/s",
                          samples=rates["sendfile"], note="the same .log files",
                          is_baseline=True).name  # fmt: skip
    one = f"{format_size(size)} per Fetch, one in flight"
    native = figures.add("native Fetch, raw reader", median(rates["native"]), "MB/s",
                         baseline=ceiling, samples=rates["native"], note=one).name  # fmt: skip
    for version, what in ((11, "non-flexible"), (12, "flexible")):
        values = rates[f"v{version}"]
        figures.add(f"Kafka Fetch v{version}", median(values), "MB/s", baseline=native,
                    samples=values, note=f"{what}; goal >= 0.9")  # fmt: skip
