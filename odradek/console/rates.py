"""Produce and consume rates, from offsets polled over time (the rates page's chart).

A client sees no byte or request counters, but it sees offsets move:

- **produce rate** of a topic = growth of the sum of its partitions' log end offsets
  (records appended) per second;
- **consume rate** of a group = growth of the sum of its committed offsets per second
  (records the group has committed as read; a group that commits every few seconds shows
  steps, as it does in Kafka's lag exporters).

:class:`RateSampler` polls both every ``interval_ms`` (Metadata + ListOffsets through
``describe_topics``, ListGroups, OffsetFetch per group) and keeps the last
``history_samples`` samples; :meth:`RateSampler.series` turns consecutive samples into rates.
A sample that fails (the broker is down) is skipped and its error kept for the page;
the next one is tried on time. A
counter that goes down (a topic deleted and re-created, an offset reset) counts as rate 0.
The sampler runs in the console's task group for the server's lifetime (:mod:`.app`).
"""

from __future__ import annotations

import time
from collections import deque
from itertools import pairwise
from typing import Any, NamedTuple

import anyio

from odradek.client import AsyncAdmin
from odradek.client.errors import KafkaError


class Sample(NamedTuple):
    time_ms: int  # wall clock, for the chart's axis
    monotonic_ms: int  # for the rates
    log_end_offsets: dict[str, int]  # topic -> sum over its partitions
    committed_offsets: dict[str, int]  # group -> sum over its committed partitions


class RateSampler:
    def __init__(
        self, admin: AsyncAdmin, *, interval_ms: int = 2000, history_samples: int = 150
    ) -> None:
        self.admin = admin
        self.interval_ms = interval_ms
        self.samples: deque[Sample] = deque(maxlen=history_samples)
        self.last_error: str | None = None

    async def sample(self) -> Sample:
        """Take one sample now (and keep it)."""
        topics = await self.admin.describe_topics(None)
        ends = {
            t.name: sum(p.high_watermark or 0 for p in t.partitions)
            for t in topics
            if not t.internal
        }
        committed = {}
        for group in await self.admin.list_groups():
            offsets = await self.admin.list_group_offsets(group.group_id)
            committed[group.group_id] = sum(om.offset for om in offsets.values())
        taken = Sample(int(time.time() * 1000), int(time.monotonic() * 1000), ends, committed)
        self.samples.append(taken)
        return taken

    async def run(self) -> None:
        """Sample every ``interval_ms`` until cancelled (a failed sample is skipped)."""
        while True:
            try:
                await self.sample()
                self.last_error = None
            except Exception as exc:  # any failure: kept for the page, retried next time
                named = isinstance(exc, KafkaError)  # its text names its class already
                self.last_error = str(exc) if named else f"{type(exc).__name__}: {exc}"
            await anyio.sleep(self.interval_ms / 1000)

    def series(self) -> dict[str, Any]:
        """Rates between consecutive samples: ``points`` of ``{time_ms, produce: {topic:
        records/s}, consume: {group: records/s}}``, oldest first."""
        points = []
        samples = list(self.samples)
        for before, after in pairwise(samples):
            elapsed_s = max(after.monotonic_ms - before.monotonic_ms, 1) / 1000
            points.append(
                {
                    "time_ms": after.time_ms,
                    "produce": _rates(before.log_end_offsets, after.log_end_offsets, elapsed_s),
                    "consume": _rates(before.committed_offsets, after.committed_offsets, elapsed_s),
                }
            )
        return {"interval_ms": self.interval_ms, "points": points, "error": self.last_error}


def _rates(before: dict[str, int], after: dict[str, int], elapsed_s: float) -> dict[str, float]:
    return {
        name: round(max(0, count - before.get(name, count)) / elapsed_s, 1)
        for name, count in after.items()
    }
