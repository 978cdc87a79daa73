"""The peer workloads of ``bench.peers``, one per process: ``python -m bench.peer_clients ...``.

Each action connects to a peer server on 127.0.0.1, prepares (connect, create the stream),
then times only the workload and prints one JSON line on stdout::

    {"records": N, "seconds": S, "records_per_s": R, "mb_per_s": M}

(MB = 10**6 bytes of values.) Values are ``--record-size`` random bytes from a pool of 64
distinct payloads reused in turn, as ``odradek perf produce`` does.

* ``redis-produce``: ``XADD key * v <value>`` through a redis-py pipeline (no MULTI),
  executed every ``--pipeline`` commands; timed until the last reply.
* ``redis-consume``: ``XRANGE key (last + COUNT --page`` until ``--num-records`` entries
  have been decoded (redis-py with hiredis builds ``(id, {b"v": value})`` per entry).
* ``nats-produce``: JetStream ``publish_async`` with at most ``--window`` unacknowledged
  publishes (nats-py's own semaphore), timed until every PubAck has arrived; the stream
  (file storage, one subject) is created first.
* ``nats-consume``: a pull consumer with ``AckPolicy.NONE`` (nothing to acknowledge, like
  reading a Redis stream or an odradek partition), ``fetch(--batch)`` until
  ``--num-records`` messages have arrived.

``--cleanup`` deletes the key / stream after the timing (not timed), so the next round
starts from an empty server. nats-py runs on uvloop when it is installed (``--loop``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence

__all__ = ["main"]

_PAYLOAD_POOL = 64
_FIELD = b"v"


def _payloads(size: int) -> list[bytes]:
    return [os.urandom(size) for _ in range(_PAYLOAD_POOL)]


def _summary(records: int, value_bytes: int, seconds: float) -> dict[str, object]:
    return {
        "records": records,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "mb_per_s": value_bytes / seconds / 1e6,
    }


# -- Redis Streams -----------------------------------------------------------------------------


def _redis(port: int):
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    client.ping()
    return client


def redis_produce(args: argparse.Namespace) -> dict[str, object]:
    client = _redis(args.port)
    payloads = _payloads(args.record_size)
    n, window = args.num_records, args.pipeline
    pipe = client.pipeline(transaction=False)
    started = time.perf_counter()
    for i in range(n):
        pipe.xadd(args.key, {_FIELD: payloads[i % _PAYLOAD_POOL]})
        if (i + 1) % window == 0:
            pipe.execute()
    pipe.execute()
    elapsed = time.perf_counter() - started
    length = client.xlen(args.key)
    if length != n:
        raise RuntimeError(f"stream {args.key} holds {length} entries, expected {n}")
    if args.cleanup:
        client.delete(args.key)
    return _summary(n, n * args.record_size, elapsed)


def redis_consume(args: argparse.Namespace) -> dict[str, object]:
    client = _redis(args.port)
    n, page = args.num_records, args.page
    count = value_bytes = 0
    start = "-"
    started = time.perf_counter()
    while count < n:
        entries = client.xrange(args.key, start, "+", count=min(page, n - count))
        if not entries:
            break
        for _entry_id, fields in entries:
            value_bytes += len(fields[_FIELD])
        count += len(entries)
        start = b"(" + entries[-1][0]
    elapsed = time.perf_counter() - started
    if count < n:
        raise RuntimeError(f"stream {args.key} ended after {count} of {n} entries")
    if args.cleanup:
        client.delete(args.key)
    return _summary(count, value_bytes, elapsed)


# -- NATS JetStream ----------------------------------------------------------------------------


async def _nats(port: int, window: int = 4000):
    import nats

    connection = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
    return connection, connection.jetstream(publish_async_max_pending=window)


async def _stream_ready(js, name: str, subject: str) -> None:
    """Create the stream, retrying while JetStream is still starting (no fixed sleep: each
    try waits for the server's answer; the loop gives up after a deadline)."""
    from nats.js.api import StorageType
    from nats.js.errors import ServiceUnavailableError

    deadline = time.monotonic() + 20
    while True:
        try:
            await js.add_stream(name=name, subjects=[subject], storage=StorageType.FILE)
            return
        except (TimeoutError, ServiceUnavailableError):
            if time.monotonic() > deadline:
                raise


async def nats_produce(args: argparse.Namespace) -> dict[str, object]:
    connection, js = await _nats(args.port, args.window)
    try:
        await _stream_ready(js, args.stream, args.subject)
        payloads = _payloads(args.record_size)
        n, subject = args.num_records, args.subject
        publish = js.publish_async
        futures = []
        started = time.perf_counter()
        for i in range(n):
            futures.append(await publish(subject, payloads[i % _PAYLOAD_POOL]))
        await js.publish_async_completed()
        elapsed = time.perf_counter() - started
        failed = [f for f in futures if f.exception() is not None]
        if failed:
            raise RuntimeError(f"{len(failed)} publishes failed: {failed[0].exception()!r}")
        info = await js.stream_info(args.stream)
        if info.state.messages != n:
            raise RuntimeError(f"stream {args.stream} holds {info.state.messages}, expected {n}")
        if args.cleanup:
            await js.delete_stream(args.stream)
        return _summary(n, n * args.record_size, elapsed)
    finally:
        await connection.close()


async def nats_consume(args: argparse.Namespace) -> dict[str, object]:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    connection, js = await _nats(args.port)
    try:
        config = ConsumerConfig(
            ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.ALL,
        )
        subscription = await js.pull_subscribe(
            args.subject, durable="bench", stream=args.stream, config=config
        )
        n, batch = args.num_records, args.batch
        count = value_bytes = 0
        started = time.perf_counter()
        while count < n:
            messages = await subscription.fetch(batch=min(batch, n - count), timeout=10)
            for message in messages:
                value_bytes += len(message.data)
            count += len(messages)
        elapsed = time.perf_counter() - started
        if args.cleanup:
            await js.delete_stream(args.stream)
        return _summary(count, value_bytes, elapsed)
    finally:
        await connection.close()


# -- command line ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.peer_clients", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True)
    specs = {
        "redis-produce": redis_produce,
        "redis-consume": redis_consume,
        "nats-produce": nats_produce,
        "nats-consume": nats_consume,
    }
    for name, func in specs.items():
        sub = actions.add_parser(name)
        sub.set_defaults(func=func)
        sub.add_argument("--port", type=int, required=True)
        sub.add_argument("--num-records", type=int, required=True)
        sub.add_argument("--cleanup", action="store_true")
        if name.startswith("redis"):
            sub.add_argument("--key", required=True)
        else:
            sub.add_argument("--stream", required=True)
            sub.add_argument("--subject", required=True)
            sub.add_argument("--loop", choices=["asyncio", "uvloop"], default="uvloop")
        if name.endswith("produce"):
            sub.add_argument("--record-size", type=int, default=100)
        if name == "redis-produce":
            sub.add_argument("--pipeline", type=int, default=1000)
        if name == "redis-consume":
            sub.add_argument("--page", type=int, default=10_000)
        if name == "nats-produce":
            sub.add_argument("--window", type=int, default=1000)
        if name == "nats-consume":
            sub.add_argument("--batch", type=int, default=1000)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if asyncio.iscoroutinefunction(args.func):
        if args.loop == "uvloop":
            try:
                import uvloop
            except ImportError:
                args.loop = "asyncio"
            else:
                summary = uvloop.run(args.func(args))
        if args.loop == "asyncio":
            summary = asyncio.run(args.func(args))
    else:
        summary = args.func(args)
    summary["loop"] = getattr(args, "loop", None)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
