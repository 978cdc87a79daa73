"""Page-view event generator: JSON records on ``page-views`` for the streaming job.

One record per view, keyed by user id (so one user's views stay in order on one partition)::

    {"ts": 1700000000123, "user": "u17", "page": "/products/3", "referrer": "/home"}

``ts`` is the event time in ms. Events are drawn from a seeded generator (reproducible), with
event times spread over ``--duration-s`` from ``--start-ms`` (default: now), in time order but
with up to ``--jitter-ms`` of disorder, as real clickstreams arrive. ``--count`` events are
produced as fast as the producer allows.

    python -m odradek.pipelines.generate --bootstrap-server 127.0.0.1:9092 --count 10000
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.client import Producer

__all__ = ["PAGES", "PageView", "generate_events", "produce_events"]

PAGES = (
    "/home",
    "/search",
    "/products/1",
    "/products/2",
    "/products/3",
    "/cart",
    "/checkout",
    "/about",
)
_WEIGHTS = (30, 15, 12, 10, 8, 6, 3, 1)


@dataclass(frozen=True)
class PageView:
    ts_ms: int
    user: str
    page: str
    referrer: str | None

    def to_json(self) -> bytes:
        return json.dumps(
            {"ts": self.ts_ms, "user": self.user, "page": self.page, "referrer": self.referrer},
            separators=(",", ":"),
        ).encode()


def generate_events(
    count: int,
    *,
    start_ms: int,
    duration_ms: int,
    jitter_ms: int = 0,
    users: int = 100,
    seed: int = 0,
) -> list[PageView]:
    """``count`` page views with event times in ``[start_ms, start_ms + duration_ms)``."""
    rng = random.Random(seed)
    last_page: dict[str, str] = {}
    events = []
    for i in range(count):
        base = start_ms + (i * duration_ms) // max(count, 1)
        ts = min(
            max(base + rng.randint(-jitter_ms, jitter_ms), start_ms), start_ms + duration_ms - 1
        )
        user = f"u{rng.randrange(users)}"
        page = rng.choices(PAGES, _WEIGHTS)[0]
        events.append(PageView(ts, user, page, last_page.get(user)))
        last_page[user] = page
    return events


def produce_events(
    bootstrap_servers: str, topic: str, events: Sequence[PageView], *, acks: int | str = 1
) -> int:
    """Send ``events`` (record timestamp = event time); returns how many were acknowledged."""
    producer = Producer(bootstrap_servers, acks=acks, linger_ms=5)
    try:
        futures = [
            producer.send(topic, value=e.to_json(), key=e.user.encode(), timestamp_ms=e.ts_ms)
            for e in events
        ]
        producer.flush()
    finally:
        producer.close()
    for future in futures:
        future.result()
    return len(futures)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odradek.pipelines.generate", description=__doc__
    )
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="page-views")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--start-ms", type=int, default=None, help="default: now - duration")
    parser.add_argument("--duration-s", type=float, default=300.0)
    parser.add_argument("--jitter-ms", type=int, default=2_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    duration_ms = int(args.duration_s * 1000)
    start_ms = args.start_ms if args.start_ms is not None else int(time.time() * 1000) - duration_ms
    events = generate_events(
        args.count,
        start_ms=start_ms,
        duration_ms=duration_ms,
        jitter_ms=args.jitter_ms,
        users=args.users,
        seed=args.seed,
    )
    began = time.perf_counter()
    sent = produce_events(args.bootstrap_server, args.topic, events)
    elapsed = time.perf_counter() - began
    print(f"produced {sent} page views to {args.topic} in {elapsed:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
