"""The clients ``bench/e2e.py`` times that ``odradek perf`` does not: the async faces'
throughput and the produce-to-consume latency. A standalone script, run by the interpreter of
the commit under test (this checkout's, or a baseline's: ``bench.e2e`` copies it out of the
repository so that only that commit's ``odradek`` is importable), using nothing but the public
client API that both commits have. Each command prints one JSON object on its last line.

- ``async-produce BOOTSTRAP TOPIC N SIZE``: :class:`AsyncProducer` (acks=1, asyncio+uvloop),
  ``await send(topic, value)`` per record, then ``flush``: records/s.
- ``async-consume BOOTSTRAP TOPIC N``: :class:`AsyncConsumer` over every partition from the
  log start, ``getmany`` until ``N`` records: records/s.
- ``latency BOOTSTRAP TOPIC RATE SECONDS SIZE [WARMUP_S]``: a producer process paced at
  ``RATE`` records/s (``linger_ms`` 0, acks=1) stamps each value with ``time.time_ns()``; this
  process consumes (:class:`Consumer`, ``fetch_max_wait_ms`` 100) and takes ``now - stamp``
  per record: the percentiles in ms. The first ``WARMUP_S`` seconds of records (stamp 0) are
  consumed and not counted: the producer's connection and first metadata fall in them. Each
  process runs a full garbage collection once it is set up, before the first record: the
  first one after its imports would otherwise come at some point of the run (19-37 ms here).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import struct
import sys
import time

_STAMP = struct.Struct(">q")


def async_produce(bootstrap: str, topic: str, count: int, size: int) -> dict[str, float]:
    import anyio

    from odradek.client import AsyncProducer

    payloads = [os.urandom(size) for _ in range(64)]
    values = [payloads[i % 64] for i in range(count)]

    async def main() -> float:
        async with AsyncProducer(bootstrap, acks=1) as producer:
            await (await producer.send(topic, b"warm-up"))  # the topic's metadata
            send = producer.send
            started = time.perf_counter()
            for value in values:
                await send(topic, value)
            await producer.flush()
            return time.perf_counter() - started

    seconds = anyio.run(main, backend_options={"use_uvloop": True})
    return {"records_per_s": count / seconds, "seconds": seconds}


def async_consume(bootstrap: str, topic: str, count: int) -> dict[str, float]:
    import anyio

    from odradek.client import AsyncConsumer, TopicPartition

    async def main() -> float:
        async with AsyncConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as c:
            partitions = await c.partitions_for_topic(topic)
            assigned = [TopicPartition(topic, p) for p in sorted(partitions or ())]
            c.assign(assigned)
            await c.seek_to_beginning(*assigned)
            got = 0
            started = time.perf_counter()
            while got < count:
                batch = await c.getmany(timeout_ms=10_000)
                if not batch:
                    raise RuntimeError(f"only {got} of {count} records arrived")
                got += sum(map(len, batch.values()))
            return time.perf_counter() - started

    seconds = anyio.run(main, backend_options={"use_uvloop": True})
    return {"records_per_s": count / seconds, "seconds": seconds}


def latency(
    bootstrap: str, topic: str, rate: int, seconds: float, size: int, warmup_s: float = 0.0
) -> dict[str, float]:
    from odradek.client import Admin, Consumer, NewTopic, TopicPartition

    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    total = int(rate * seconds)
    warmup = int(rate * warmup_s)
    stamp = _STAMP.unpack_from
    latencies: list[float] = []
    with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=100) as consumer:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_end(partition)
        consumer.position(partition)
        gc.collect()
        producer = multiprocessing.get_context("spawn").Process(
            target=_paced_producer, args=(bootstrap, topic, rate, warmup, total, size)
        )
        producer.start()
        try:
            deadline = time.monotonic() + (warmup_s + seconds) * 3 + 30
            while len(latencies) < total and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    now_ns = time.time_ns()
                    stamps = [stamp(r.value)[0] for r in records]
                    latencies.extend((now_ns - s) / 1e6 for s in stamps if s)
        finally:
            producer.join(30)
    if len(latencies) < total:
        raise RuntimeError(f"only {len(latencies)} of {total} latency records arrived")
    latencies.sort()
    return {f"p{p}": _percentile(latencies, p) for p in (50, 99, 99.9)}


def _paced_producer(
    bootstrap: str, topic: str, rate: int, warmup: int, total: int, size: int
) -> None:
    """Send ``warmup`` records stamped 0, then ``total`` stamped with ``time.time_ns()``, at
    ``rate``/s."""
    from odradek.client import Producer

    padding = os.urandom(max(0, size - _STAMP.size))
    with Producer(bootstrap, acks=1, linger_ms=0) as producer:
        gc.collect()
        started = time.perf_counter()
        for i in range(warmup + total):
            ahead_s = i / rate - (time.perf_counter() - started)
            if ahead_s > 0.0005:
                time.sleep(ahead_s)
            producer.send(topic, _STAMP.pack(time.time_ns() if i >= warmup else 0) + padding)
        producer.flush()


def _percentile(ordered: list[float], p: float) -> float:
    """Linear interpolation between ranks (as ``bench.common.percentile``)."""
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def main(argv: list[str]) -> None:
    command, bootstrap, topic, *rest = argv
    if command == "async-produce":
        result = async_produce(bootstrap, topic, int(rest[0]), int(rest[1]))
    elif command == "async-consume":
        result = async_consume(bootstrap, topic, int(rest[0]))
    elif command == "latency":
        warmup_s = float(rest[3]) if len(rest) > 3 else 0.0
        result = latency(bootstrap, topic, int(rest[0]), float(rest[1]), int(rest[2]), warmup_s)
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
