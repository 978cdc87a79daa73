"""``odradek perf produce|consume``: kafka-producer-perf-test / kafka-consumer-perf-test.

``perf produce`` sends ``--num-records`` records of ``--record-size`` random bytes (a pool of
distinct payloads, reused) through the public :class:`odradek.client.Producer`, optionally throttled
to ``--throughput`` records/s, and reports throughput and send-to-acknowledgement latency.
Latency is sampled: one record in ``ceil(N / 20,000)`` carries a completion callback (a
callback on every record would measure the callbacks). ``perf consume`` iterates a
:class:`odradek.client.Consumer` over the topic from the log start of every partition and reports
records/s and MB/s (of values and keys).

Both loops are lean, so they measure the client rather than themselves: without a throughput
cap ``perf produce`` sends each sampled record and then ``every - 1`` plain ones in a tight
loop; ``perf consume`` takes records 256 at a time (few alive at once: see
:class:`odradek.client.record_decoder.DecodedRecords`) and sums their sizes with C-level
``map``s.

A progress bar is drawn on a terminal (stderr); the final summary line goes to stdout, and
``--json`` adds one JSON object per run on stdout for scripts (``bench/``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from itertools import islice
from operator import itemgetter

from odradek.cli.common import add_bootstrap, client_options, positive_int, run_reported

_LATENCY_SAMPLES = 20_000
_PAYLOAD_POOL = 64
# ConsumerRecord.value / .key by position (a NamedTuple: ~30 % cheaper than by name)
_value = itemgetter(6)
_key = itemgetter(5)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "perf", help="producer and consumer throughput tests", description=__doc__
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    produce = actions.add_parser("produce", help="like kafka-producer-perf-test")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--num-records", type=positive_int, required=True)
    produce.add_argument("--record-size", type=positive_int, default=100, metavar="BYTES")
    produce.add_argument(
        "--throughput", type=int, default=-1, metavar="R", help="records/s cap (-1: none)"
    )
    produce.add_argument("--acks", choices=["0", "1", "all", "-1"], default="1")
    produce.add_argument("--linger-ms", type=int, default=5)
    produce.add_argument("--batch-size", type=positive_int, default=None, metavar="BYTES")
    produce.add_argument(
        "--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none"
    )
    produce.set_defaults(func=_produce)

    consume = actions.add_parser("consume", help="like kafka-consumer-perf-test")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--num-records", type=positive_int, required=True)
    consume.add_argument(
        "--timeout-ms", type=positive_int, default=10_000, help="give up after T ms idle"
    )
    consume.set_defaults(func=_consume)

    for sub in (produce, consume):
        add_bootstrap(sub)
        sub.add_argument("--json", action="store_true", help="also print a JSON summary")


# -- produce -----------------------------------------------------------------------------------


def _produce(args: argparse.Namespace) -> int:
    return run_reported("perf produce", lambda: produce(args))


def produce(args: argparse.Namespace) -> int:
    from odradek.client import Producer

    acks: int | str = "all" if args.acks in ("all", "-1") else int(args.acks)
    options: dict[str, object] = {"acks": acks, "linger_ms": args.linger_ms}
    options.update(client_options(args))
    if args.batch_size is not None:
        options["batch_size"] = args.batch_size
    if args.compression != "none":
        options["compression_type"] = args.compression
    payloads = [os.urandom(args.record_size) for _ in range(_PAYLOAD_POOL)]
    every = max(1, math.ceil(args.num_records / _LATENCY_SAMPLES))
    latencies_ms: list[float] = []
    errors: list[BaseException] = []

    def sampled(sent_ns: int) -> Callable[[Future], None]:
        def done(future: Future) -> None:
            if future.exception() is not None:
                errors.append(future.exception())  # type: ignore[arg-type]
            else:
                latencies_ms.append((time.perf_counter_ns() - sent_ns) / 1e6)

        return done

    throttle = _Throttle(args.throughput)
    n = args.num_records
    with Producer(args.bootstrap_server, **options) as producer, _progress(n, "sent") as advance:
        send = producer.send
        topic = args.topic
        started = time.perf_counter()
        if args.throughput > 0:
            for i in range(n):
                future = send(topic, payloads[i % _PAYLOAD_POOL])
                if i % every == 0:
                    future.add_done_callback(sampled(time.perf_counter_ns()))
                throttle.wait(i, started)
                if not i & 0xFFFF:
                    advance(i)
                    if errors:
                        break
        else:  # lean: a sampled record, then `every - 1` plain sends in a tight loop
            rest = [payloads[j % _PAYLOAD_POOL] for j in range(1, every)]
            reported = sent = 0
            while sent < n:
                send(topic, payloads[0]).add_done_callback(sampled(time.perf_counter_ns()))
                for value in rest if n - sent >= every else rest[: n - sent - 1]:
                    send(topic, value)
                sent += every
                if sent - reported >= 0x10000:
                    reported = sent
                    advance(sent)
                    if errors:
                        break
        producer.flush()
        elapsed = time.perf_counter() - started
        advance(n)
    if errors:
        raise errors[0]
    latencies_ms.sort()
    summary = {
        "records": n,
        "seconds": elapsed,
        "records_per_s": n / elapsed,
        "mb_per_s": n * args.record_size / elapsed / 1e6,
        "latency_avg_ms": sum(latencies_ms) / len(latencies_ms) if latencies_ms else None,
        "latency_max_ms": latencies_ms[-1] if latencies_ms else None,
        **{f"latency_p{p}_ms": _percentile(latencies_ms, p) for p in ("50", "95", "99", "99.9")},
    }
    latency = ""
    if latencies_ms:
        latency = (
            f", {summary['latency_avg_ms']:.1f} ms avg latency, "
            f"{summary['latency_max_ms']:.1f} ms max latency, "
            + ", ".join(f"p{p} {summary[f'latency_p{p}_ms']:.1f} ms" for p in ("50", "95", "99"))
            + f", p99.9 {summary['latency_p99.9_ms']:.1f} ms"
        )
    print(
        f"{n} records sent, {summary['records_per_s']:.1f} records/s "
        f"({summary['mb_per_s']:.2f} MB/s){latency}"
    )
    if args.json:
        print(json.dumps(summary))
    return 0


class _Throttle:
    """Kafka's ThroughputThrottler: sleep whenever the sender runs ahead of ``per_s``."""

    def __init__(self, per_s: int) -> None:
        self.per_s = per_s

    def wait(self, sent: int, started: float) -> None:
        if self.per_s <= 0:
            return
        ahead_s = sent / self.per_s - (time.perf_counter() - started)
        if ahead_s > 0:
            time.sleep(ahead_s)


def _percentile(sorted_values: list[float], p: str) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, int(len(sorted_values) * float(p) / 100))
    return sorted_values[index]


# -- consume -----------------------------------------------------------------------------------


def _consume(args: argparse.Namespace) -> int:
    return run_reported("perf consume", lambda: consume(args))


def consume(args: argparse.Namespace) -> int:
    from odradek.client import Consumer, TopicPartition
    from odradek.client.errors import UnknownTopicOrPartitionError

    count = payload_bytes = 0
    with Consumer(
        bootstrap_servers=args.bootstrap_server,
        enable_auto_commit=False,
        consumer_timeout_ms=args.timeout_ms,
        **client_options(args),
    ) as consumer:
        partitions = consumer.partitions_for_topic(args.topic)
        if not partitions:
            raise UnknownTopicOrPartitionError(f"topic {args.topic!r} does not exist")
        assigned = [TopicPartition(args.topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        n = args.num_records
        with _progress(n, "received") as advance:
            started = time.perf_counter()
            records = iter(consumer)
            while count < n:  # lean: records counted and measured a chunk at a time, in C
                chunk = list(islice(records, min(n - count, 256)))
                if not chunk:
                    break
                count += len(chunk)
                payload_bytes += sum(map(len, filter(None, map(_value, chunk))))
                payload_bytes += sum(map(len, filter(None, map(_key, chunk))))
                advance(count)
            elapsed = time.perf_counter() - started
            advance(count)
    summary = {
        "records": count,
        "seconds": elapsed,
        "records_per_s": count / elapsed if elapsed else 0.0,
        "mb_per_s": payload_bytes / elapsed / 1e6 if elapsed else 0.0,
    }
    print(
        f"{count} records received, {summary['records_per_s']:.1f} records/s "
        f"({summary['mb_per_s']:.2f} MB/s) in {elapsed:.2f} s"
    )
    if args.json:
        print(json.dumps(summary))
    if count < args.num_records:
        print(
            f"odradek perf consume: only {count} of {args.num_records} records arrived "
            f"within --timeout-ms {args.timeout_ms}",
            file=sys.stderr,
        )
        return 1
    return 0


@contextmanager
def _progress(total: int, verb: str) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on a terminal (stderr); a no-op otherwise."""
    if not sys.stderr.isatty():
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        f"records {verb}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task(verb, total=total)
        yield lambda done: progress.update(task, completed=done)
