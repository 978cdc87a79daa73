"""Unmodified Kafka clients against odradek, one workload per process:
``python -m bench.kafka_clients ACTION --bootstrap-server HOST:PORT --topic T --num-records N``.

Each action connects, prepares (metadata, the assignment), then times only its workload and
prints one JSON line on stdout, as :mod:`bench.peer_clients` does::

    {"records": N, "seconds": S, "records_per_s": R, "mb_per_s": M, "client": "name version"}

(MB = 10**6 bytes of values.) Values are ``--record-size`` random bytes from a pool of 64
distinct payloads reused in turn, as ``odradek perf produce`` does. Every client is configured
the same way, as an application that wants throughput with acknowledged writes would:

* **produce**: ``acks=1``, idempotence off, the client's default batch size, ``linger`` of
  ``--linger-ms`` (5, as ``odradek perf produce``), no key (one partition: the topic is
  created with one by the caller). Timed from the first send until every delivery is
  confirmed; the run fails if any delivery failed or fewer than ``--num-records`` were
  confirmed.

  - ``confluent-produce``: ``Producer.produce(topic, value)``; on ``BufferError`` (the local
    queue is full) ``poll(0)`` serves callbacks and the send is retried; one delivery callback
    (``on_delivery`` in the config) counts successes and failures; ``flush()`` at the end.
  - ``kafka-python-produce``: ``KafkaProducer.send(topic, value)``, every future kept;
    ``flush()``, then each future must have succeeded.
  - ``aiokafka-produce``: ``await AIOKafkaProducer.send(topic, value)`` (it waits only when
    the accumulator is full), every future kept; ``flush()``, then each must have succeeded.

* **consume**: partition 0 assigned by hand from the beginning (no group), until
  ``--num-records`` records have arrived; value bytes are summed (so every value is touched)
  and checked against ``records x --record-size``. Timed from the assignment to the last
  record. ``confluent-consume`` calls ``consume(10000, 1.0)`` (``--config KEY=VALUE`` adds
  librdkafka settings, to both confluent actions: the benchmark also runs it with
  ``fetch.queue.backoff.ms=1``, see :mod:`bench.kafka`; :mod:`bench.security` passes TLS and
  SASL settings); ``kafka-python-consume``
  ``poll(timeout_ms=1000, max_records=10000)``; ``aiokafka-consume``
  ``getmany(timeout_ms=1000, max_records=10000)``. A consumer that receives nothing for
  ``--idle-timeout-s`` fails.

aiokafka runs on uvloop when it is installed (``--loop``), like the broker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from importlib import metadata

__all__ = ["ACTIONS", "main"]

_PAYLOAD_POOL = 64
_POLL_RECORDS = 10_000


def _payloads(size: int) -> list[bytes]:
    return [os.urandom(size) for _ in range(_PAYLOAD_POOL)]


def _summary(records: int, value_bytes: int, seconds: float, dist: str) -> dict[str, object]:
    return {
        "records": records,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "mb_per_s": value_bytes / seconds / 1e6,
        "client": f"{dist} {metadata.version(dist)}",
    }


def _check_consumed(args: argparse.Namespace, count: int, value_bytes: int) -> None:
    if count < args.num_records:
        raise RuntimeError(f"{args.topic}: only {count} of {args.num_records} records arrived")
    if value_bytes != count * args.record_size:
        raise RuntimeError(f"{args.topic}: {value_bytes} value bytes in {count} records")


class _Idle:
    """Fails a consumer that has received nothing for ``limit_s`` seconds."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.last = time.monotonic()

    def got(self, count: int) -> None:
        now = time.monotonic()
        if count:
            self.last = now
        elif now - self.last > self.limit_s:
            raise RuntimeError(f"no records for {self.limit_s} s")


# -- confluent-kafka (librdkafka) --------------------------------------------------------------


def confluent_produce(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import Producer

    delivered = [0, 0]  # successes, failures
    first_error: list[object] = []

    def on_delivery(error: object, _message: object) -> None:
        if error is None:
            delivered[0] += 1
        else:
            delivered[1] += 1
            first_error.append(error)

    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap_server,
            "acks": 1,
            "enable.idempotence": False,
            "linger.ms": args.linger_ms,
            "on_delivery": on_delivery,
            **dict(item.split("=", 1) for item in args.config),
        }
    )
    producer.list_topics(args.topic, timeout=10)  # connected, metadata known
    payloads = _payloads(args.record_size)
    produce, poll, topic, n = producer.produce, producer.poll, args.topic, args.num_records
    started = time.perf_counter()
    for i in range(n):
        value = payloads[i % _PAYLOAD_POOL]
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.001)
    left = producer.flush(60)
    elapsed = time.perf_counter() - started
    if left or delivered[1] or delivered[0] != n:
        raise RuntimeError(
            f"{delivered[0]} of {n} delivered, {delivered[1]} failed, {left} left in queue"
            + (f"; first error: {first_error[0]}" if first_error else "")
        )
    return _summary(n, n * args.record_size, elapsed, "confluent-kafka")


def confluent_consume(args: argparse.Namespace) -> dict[str, object]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap_server,
            "group.id": "bench-unused",  # required by the client; no group calls (assign)
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            **dict(item.split("=", 1) for item in args.config),
        }
    )
    try:
        consumer.list_topics(args.topic, timeout=10)
        count = value_bytes = 0
        idle = _Idle(args.idle_timeout_s)
        started = time.perf_counter()
        consumer.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
        while count < args.num_records:
            messages = consumer.consume(min(_POLL_RECORDS, args.num_records - count), 1.0)
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(f"consume error: {message.error()}")
                value_bytes += len(message.value())
            count += len(messages)
            idle.got(len(messages))
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    _check_consumed(args, count, value_bytes)
    return _summary(count, value_bytes, elapsed, "confluent-kafka")


# -- kafka-python (3.x) ------------------------------------------------------------------------


def kafka_python_produce(args: argparse.Namespace) -> dict[str, object]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap_server,
        acks=1,
        enable_idempotence=False,
        linger_ms=args.linger_ms,
    )
    try:
        producer.partitions_for(args.topic)  # connected, metadata known
        payloads = _payloads(args.record_size)
        send, topic, n = producer.send, args.topic, args.num_records
        started = time.perf_counter()
        futures = [send(topic, payloads[i % _PAYLOAD_POOL]) for i in range(n)]
        producer.flush()
        elapsed = time.perf_counter() - started
        failed = [f for f in futures if not f.succeeded()]
        if failed:
            raise RuntimeError(f"{len(failed)} of {n} sends failed: {failed[0].exception!r}")
    finally:
        producer.close()
    return _summary(n, n * args.record_size, elapsed, "kafka-python")


def kafka_python_consume(args: argparse.Namespace) -> dict[str, object]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap_server, group_id=None, enable_auto_commit=False
    )
    try:
        consumer.partitions_for_topic(args.topic)
        count = value_bytes = 0
        idle = _Idle(args.idle_timeout_s)
        started = time.perf_counter()
        partition = TopicPartition(args.topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        while count < args.num_records:
            left = args.num_records - count
            batches = consumer.poll(timeout_ms=1000, max_records=min(_POLL_RECORDS, left))
            got = 0
            for records in batches.values():
                value_bytes += sum(len(r.value) for r in records)
                got += len(records)
            count += got
            idle.got(got)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    _check_consumed(args, count, value_bytes)
    return _summary(count, value_bytes, elapsed, "kafka-python")


# -- aiokafka ----------------------------------------------------------------------------------


async def aiokafka_produce(args: argparse.Namespace) -> dict[str, object]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap_server,
        acks=1,
        enable_idempotence=False,
        linger_ms=args.linger_ms,
    )
    await producer.start()
    try:
        await producer.partitions_for(args.topic)
        payloads = _payloads(args.record_size)
        send, topic, n = producer.send, args.topic, args.num_records
        futures = []
        started = time.perf_counter()
        for i in range(n):
            futures.append(await send(topic, payloads[i % _PAYLOAD_POOL]))
        await producer.flush()
        elapsed = time.perf_counter() - started
        failed = [f for f in futures if not f.done() or f.exception() is not None]
        if failed:
            what = failed[0].exception() if failed[0].done() else "not done after flush"
            raise RuntimeError(f"{len(failed)} of {n} sends failed: {what!r}")
    finally:
        await producer.stop()
    return _summary(n, n * args.record_size, elapsed, "aiokafka")


async def aiokafka_consume(args: argparse.Namespace) -> dict[str, object]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap_server, group_id=None, enable_auto_commit=False
    )
    await consumer.start()
    try:
        await consumer.topics()  # metadata fetched (partitions_for_topic only reads a cache)
        count = value_bytes = 0
        idle = _Idle(args.idle_timeout_s)
        started = time.perf_counter()
        partition = TopicPartition(args.topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        while count < args.num_records:
            left = args.num_records - count
            batches = await consumer.getmany(timeout_ms=1000, max_records=min(_POLL_RECORDS, left))
            got = 0
            for records in batches.values():
                value_bytes += sum(len(r.value) for r in records)
                got += len(records)
            count += got
            idle.got(got)
        elapsed = time.perf_counter() - started
    finally:
        await consumer.stop()
    _check_consumed(args, count, value_bytes)
    return _summary(count, value_bytes, elapsed, "aiokafka")


# -- command line ------------------------------------------------------------------------------

ACTIONS = {
    "confluent-produce": confluent_produce,
    "confluent-consume": confluent_consume,
    "kafka-python-produce": kafka_python_produce,
    "kafka-python-consume": kafka_python_consume,
    "aiokafka-produce": aiokafka_produce,
    "aiokafka-consume": aiokafka_consume,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kafka_clients", description=__doc__.splitlines()[0]
    )
    parser.add_argument("action", choices=sorted(ACTIONS))
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--num-records", type=int, required=True)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--idle-timeout-s", type=float, default=30.0)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="uvloop")
    parser.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="librdkafka setting"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    func = ACTIONS[args.action]
    if asyncio.iscoroutinefunction(func):
        if args.loop == "uvloop":
            try:
                import uvloop
            except ImportError:
                args.loop = "asyncio"
        runner = uvloop.run if args.loop == "uvloop" else asyncio.run
        summary = runner(func(args))
    else:
        summary = func(args)
        args.loop = None
    summary["loop"] = args.loop
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
