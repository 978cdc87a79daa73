"""Fetch: read each requested partition's batches as file regions, waiting for appends when
there are fewer than ``min_bytes``. The shared handler of both wire protocols.

Fetch builds its response header from segment positions alone (:class:`FileRegion`), and the
connection sends the bytes with ``os.sendfile``: records never pass through Python objects.
Each region *holds* its segment file (:meth:`SegmentFile.hold`) from the moment it is read
until :meth:`Reply.release` (after the send, or when the request ends otherwise), so a segment
deleted meanwhile (DeleteTopics, retention) stays open for this send and its descriptor number
cannot be reused by another file under it. A fetch that finds fewer than ``min_bytes`` waits
for appends to the partitions it reads (not to any other) up to ``max_wait_ms``, capped by
``fetch.wait.max.ms``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from odradek.broker.context import BrokerContext
from odradek.broker.errors import error_code_for
from odradek.broker.record_access import partition_log
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import Buffer
from odradek.storage.errors import (
    OffsetOutOfRangeError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.segment_file import FileRegion

__all__ = ["FetchApi", "Reply"]


@dataclass
class Reply:
    """A response and what follows its header: buffers, then file regions (sendfile)."""

    response: m.Response
    buffers: list[Buffer] = field(default_factory=list)
    regions: list[FileRegion] = field(default_factory=list)

    @property
    def raw_bytes(self) -> int:
        return sum(len(b) for b in self.buffers) + sum(r.length for r in self.regions)

    def release(self) -> None:
        """Let go of the regions' segment files (idempotent): call once the reply is sent or
        will never be."""
        regions, self.regions = self.regions, []
        for region in regions:
            region.file.release()


class FetchApi:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.max_wait_cap_ms = ctx.config.int("fetch.wait.max.ms")

    async def fetch(self, req: m.FetchRequest) -> Reply:
        """Collect regions; if fewer than ``min_bytes``, wait for appends to the requested
        partitions up to ``max_wait_ms`` (at most ``fetch.wait.max.ms``; a graceful shutdown
        ends the wait at once). The reply holds its regions' files: the caller releases it."""
        max_wait_ms = min(max(req.max_wait_ms, 0), self.max_wait_cap_ms)
        deadline = anyio.current_time() + max_wait_ms / 1000
        while True:
            reply, total, errors = self._collect(req)
            remaining = deadline - anyio.current_time()
            if total >= req.min_bytes or errors or remaining <= 0 or self.ctx.stopping:
                if total and (metrics := self.ctx.metrics) is not None:
                    for topic in reply.response.topics:
                        for p in topic.partitions:
                            if p.records_bytes:
                                metrics.fetched(topic.name, p.records_bytes)
                return reply
            reply.release()  # collected again once woken
            # Registered in the same event-loop turn as the read: appends run on this loop,
            # so none can slip in between and its wake-up cannot be lost.
            waiter = self.ctx.wait_for_data(
                (t.name, p.partition_index) for t in req.topics for p in t.partitions
            )
            try:
                with anyio.move_on_after(remaining):
                    await waiter.wait()
            finally:
                self.ctx.forget(waiter)

    def _collect(self, req: m.FetchRequest) -> tuple[Reply, int, bool]:
        """Read every requested partition; the regions returned hold their files."""
        response = m.FetchResponse(correlation_id=req.correlation_id)
        reply = Reply(response)
        budget = req.max_bytes
        errors = False
        try:
            for topic in req.topics:
                parts = []
                for fp in topic.partitions:
                    result = m.FetchPartitionResponse(partition_index=fp.partition_index)
                    parts.append(result)
                    region = self._read(topic.name, fp, budget, reply.regions, result)
                    errors = errors or result.error_code != ErrorCode.NONE
                    if region is not None:
                        reply.regions.append(region)
                        result.records_bytes = region.length
                        budget -= region.length
                response.topics.append(m.FetchTopicResponse(name=topic.name, partitions=parts))
        except BaseException:
            reply.release()
            raise
        return reply, sum(r.length for r in reply.regions), errors

    def _read(
        self,
        topic: str,
        fp: m.FetchPartition,
        budget: int,
        regions: list[FileRegion],
        result: m.FetchPartitionResponse,
    ) -> FileRegion | None:
        """One partition's region (held), or None; fills ``result``'s offsets or error."""
        try:
            fetched = partition_log(self.ctx, topic, fp.partition_index).read(
                fp.fetch_offset,
                min(fp.partition_max_bytes, budget),
                # KIP-74: the first batch is returned whole even if over the limits.
                min_one_message=not regions,
            )
            region = fetched.region
            if region is None or budget <= 0 or fp.partition_max_bytes <= 0:
                region = None
            else:  # held until the reply is released; raises if the segment was closed
                region.file.hold()
        except (OffsetOutOfRangeError, UnknownTopicOrPartitionError, StorageError) as exc:
            result.error_code = error_code_for(exc)
            if isinstance(exc, OffsetOutOfRangeError):
                result.high_watermark = exc.log_end_offset
                result.log_start_offset = exc.log_start_offset
            return None
        result.high_watermark = fetched.high_watermark
        result.last_stable_offset = fetched.high_watermark
        result.log_start_offset = fetched.log_start_offset
        return region
