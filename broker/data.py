"""Handlers for the record APIs: Produce, Fetch, ListOffsets, DeleteRecords.

Produce appends on the event loop: a page-cache write of one request's batches (``pwritev``)
costs less than handing it to a worker thread, and doing every append on the loop keeps one
writer per partition and per-partition order with no lock. Validating a large or compressed
request is not cheap (every record is walked, bodies decompressed within the request's
``message.max.decompressed.bytes`` / ``produce.request.max.decompressed.bytes`` budget,
maybe re-encoded for ``compression.type``): that step runs in a worker thread first, while
the connection's reader waits for it (so the connection's requests stay in order), and the
append that follows checks that the log and its config are still the ones it was validated
against (else it validates again, on the loop). The fsync for ``acks=all`` is the
only slow part, and it runs in the group-commit thread (:mod:`odradek.broker.durability`).

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

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

import anyio

from odradek.broker.context import BrokerContext
from odradek.broker.errors import TopicAuthorizationError, error_code_for
from odradek.broker.security.authorizer import allowed
from odradek.protocol import messages as m
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.compression import CompressionError
from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import Buffer
from odradek.protocol.record_batch import CorruptRecordError
from odradek.protocol.validate import (
    DecompressionBudget,
    has_compressed_batch,
    stored_batch_bound,
)
from odradek.storage.append import PreparedAppend
from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    InvalidTopicError,
    OffsetOutOfRangeError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.log import Log
from odradek.storage.segment_file import FileRegion
from odradek.storage.topics import is_internal, validate_topic_name

__all__ = ["DataApi", "Reply", "Section"]

HIGH_WATERMARK = -1  # DeleteRecords: delete every record below the high watermark


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


Section = tuple[str, m.ProducePartitionData, memoryview]  # topic, partition, its records
# A section prepared in a worker thread: the log and config it was validated against, and the
# result (or the exception to answer with).
_Prepared = tuple[Log, LogConfig, PreparedAppend | Exception]
_WORKER_BYTES = 64 * 1024  # uncompressed records below this are validated on the loop
# Validations running in worker threads at once, broker-wide: each may hold a batch's
# decompressed body (message.max.decompressed.bytes), and the GIL lets about one run anyway.
# Their own limiter, not anyio's default one, which the group-commit fsyncs use: a flood of
# bombs queues here, and never delays an fsync (measured: 16 connections sending bombs took
# the default pool to ~550 MiB peak RSS and an honest acks=all produce to 1.3 s).
_VALIDATION_THREADS = 2


def _needs_worker(sections: list[Section]) -> bool:
    """Whether validating ``sections`` is worth a worker thread: a compressed batch (its
    body must be decompressed, maybe re-encoded) or ``_WORKER_BYTES`` of records."""
    total = 0
    for _, _, records in sections:
        total += len(records)
        if total >= _WORKER_BYTES or has_compressed_batch(records):
            return True
    return False


async def _none(work: Awaitable[object]) -> None:
    await work  # acks=0: nothing waits in it, and no response is sent


class _Rejections:
    """A Produce request's refused partitions, logged as one line per request (a request naming
    150,000 partitions must not write 150,000 lines): the count per error code and the first
    few partitions with their reasons."""

    EXAMPLES = 3

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}  # error code -> partitions (named when logged)
        self.examples: list[dict[str, object]] = []

    def add(self, topic: str, partition: int, result: m.ProducePartitionResponse) -> None:
        code = result.error_code
        self.counts[code] = self.counts.get(code, 0) + 1
        if len(self.examples) < self.EXAMPLES:
            self.examples.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "error": ErrorCode(code).name,
                    "reason": result.error_message,
                }
            )

    def log(self, logger: Any) -> None:
        if self.counts:
            logger.info(
                "produce rejected",
                partitions=sum(self.counts.values()),
                errors={ErrorCode(code).name: n for code, n in self.counts.items()},
                examples=self.examples,
            )


class DataApi:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.max_wait_cap_ms = ctx.config.int("fetch.wait.max.ms")
        self._validators: anyio.CapacityLimiter | None = None  # made on the event loop

    def _log(self, topic: str, partition: int, operation: Operation = Operation.READ) -> Log:
        """The partition's log, if the caller may do ``operation`` on its topic (ACLs)."""
        if not allowed(operation, ResourceType.TOPIC, topic):
            raise TopicAuthorizationError(f"not authorized to {operation.name} topic {topic}")
        try:
            return self.ctx.manager.get_log(topic, partition)
        except UnknownTopicOrPartitionError:
            validate_topic_name(topic)  # an illegal name is INVALID_TOPIC_EXCEPTION
            raise

    def _client_writable_log(
        self,
        topic: str,
        partition: int,
        action: str = "append to",
        operation: Operation = Operation.WRITE,
    ) -> Log:
        """The log a client may change (produce, delete records): never an internal topic
        (Kafka's ReplicaManager answers INVALID_TOPIC_EXCEPTION); the coordinator writes those
        through Log.append."""
        if is_internal(topic):
            raise InvalidTopicError(f"Cannot {action} internal topic {topic}")
        return self._log(topic, partition, operation)

    # -- Produce ---------------------------------------------------------------------------

    async def produce(
        self, req: m.ProduceRequest, raw: memoryview
    ) -> Awaitable[m.ProduceResponse | None]:
        """Validate and append every partition's batches; the awaitable returned waits until
        they are fsynced (acks=all) and gives the response (``None`` for acks=0).

        The connection's reader awaits this call itself, request after request, so pipelined
        requests are appended in the order they were sent, whatever order the event loop
        starts the tasks that await the returned awaitables in (trio's is not first-in,
        first-out). Heavy validation (a compressed batch, or at least ``_WORKER_BYTES`` of
        records: decompression, the record walk, re-encoding) runs in a worker thread while
        the reader waits; the appends then run on the loop (module docstring).
        Per-partition failures are answered, never raised.
        """
        work = await self.produce_sections(req, list(m.record_sections(req, raw)))
        return work if req.acks != m.ACKS_NONE else _none(work)

    async def produce_sections(
        self, req: m.ProduceRequest, sections: list[Section]
    ) -> Awaitable[m.ProduceResponse]:
        """:meth:`produce` for records already cut per partition (the Kafka listener's
        request carries them inline): ``req`` gives acks, timeout and correlation id,
        ``sections`` the ``(topic, partition, records)`` to append, in order. The awaitable
        gives the response even for ``acks=0`` (the caller sends none)."""
        ctx = self.ctx
        budget = DecompressionBudget(
            ctx.config.int("message.max.decompressed.bytes"),
            ctx.config.int("produce.request.max.decompressed.bytes"),
        )
        prepared: dict[int, _Prepared] = {}
        if req.acks in m.VALID_ACKS and _needs_worker(sections):
            if self._validators is None:
                self._validators = anyio.CapacityLimiter(_VALIDATION_THREADS)
            prepared = await anyio.to_thread.run_sync(
                self._prepare, sections, budget, limiter=self._validators
            )
        return self._append(req, sections, budget, prepared)

    def _prepare(
        self, sections: list[Section], budget: DecompressionBudget
    ) -> dict[int, _Prepared]:
        """Step 1 of each section's append (:func:`odradek.storage.append.prepare_append`), in a
        worker thread: it reads only the request and each log's config."""
        logs = self.ctx.manager.logs
        prepared: dict[int, _Prepared] = {}
        for i, (topic, part, records) in enumerate(sections):
            log = logs.get((topic, part.partition_index))
            if log is None:
                continue
            config = log.config
            try:
                prepared[i] = (log, config, log.prepare_append(records, budget))
            except Exception as exc:  # answered on the loop, as an append's failure
                prepared[i] = (log, config, exc)
        return prepared

    def _append(
        self,
        req: m.ProduceRequest,
        sections: list[Section],
        budget: DecompressionBudget,
        prepared: dict[int, _Prepared],
    ) -> Awaitable[m.ProduceResponse]:
        ctx = self.ctx
        metrics = ctx.metrics
        now_ms = ctx.manager.clock_ms()
        by_topic: dict[str, list[m.ProducePartitionResponse]] = {}
        durable: list[tuple[Log, int, m.ProducePartitionResponse]] = []
        acks_ok = req.acks in m.VALID_ACKS
        rejections = _Rejections()
        for i, (topic, part, records) in enumerate(sections):
            result = m.ProducePartitionResponse(partition_index=part.partition_index)
            by_topic.setdefault(topic, []).append(result)
            if not acks_ok:
                result.error_code = ErrorCode.INVALID_REQUIRED_ACKS
                continue
            log = None
            try:
                log = self._client_writable_log(topic, part.partition_index)
                ready = prepared.get(i)
                if ready is None or ready[0] is not log or ready[1] is not log.config:
                    info = log.append(records, now_ms=now_ms, budget=budget)  # (again) here
                elif isinstance(ready[2], Exception):
                    raise ready[2]
                else:
                    info = log.append(records, now_ms=now_ms, prepared=ready[2])
            except OSError as exc:
                if log is not None:
                    ctx.storage_failed(log, exc)
                self._fail(result, exc)
                continue
            except Exception as exc:  # CorruptRecordError, RecordTooLargeError, ...
                self._fail(result, exc)
                rejections.add(topic, part.partition_index, result)
                continue
            ctx.notify_data(topic, part.partition_index)
            if metrics is not None and not info.duplicate:
                metrics.appended(topic, info.record_count, info.size_bytes)
            if info.rolled:  # Kafka flushes a rolled segment soon after the roll
                ctx.group_commit.flush_soon(log)
            result.base_offset = info.first_offset
            result.log_append_time_ms = info.log_append_time_ms
            result.log_start_offset = log.log_start_offset
            if req.acks == m.ACKS_ALL:
                durable.append((log, info.last_offset, result))
        rejections.log(ctx.log)
        return self._produce_response(req, by_topic, durable, acks_ok)

    async def _produce_response(
        self,
        req: m.ProduceRequest,
        by_topic: dict[str, list[m.ProducePartitionResponse]],
        durable: list[tuple[Log, int, m.ProducePartitionResponse]],
        acks_ok: bool,
    ) -> m.ProduceResponse:
        if durable:
            await self._wait_durable(durable, req.timeout_ms)
        response = m.ProduceResponse(
            correlation_id=req.correlation_id,
            topics=[m.ProduceTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        if not acks_ok:  # the whole request fails (docs/protocol.md, Produce)
            response.error_code = ErrorCode.INVALID_REQUIRED_ACKS
            response.error_message = f"acks must be 0, 1 or -1 (all), got {req.acks}"
            self.ctx.log.info("produce rejected", error="INVALID_REQUIRED_ACKS", acks=req.acks)
        return response

    async def _wait_durable(
        self, durable: list[tuple[Log, int, m.ProducePartitionResponse]], timeout_ms: int
    ) -> None:
        async def wait_one(log: Log, offset: int, result: m.ProducePartitionResponse) -> None:
            try:
                await self.ctx.group_commit.wait_durable(log, offset)
            except OSError as exc:
                self._fail(result, exc)

        with anyio.move_on_after(max(timeout_ms, 1) / 1000) as scope:
            async with anyio.create_task_group() as tg:
                for log, offset, result in durable:
                    tg.start_soon(wait_one, log, offset, result)
        if scope.cancelled_caught:
            for log, offset, result in durable:
                if log.recovery_point <= offset and not result.error_code:
                    result.error_code = ErrorCode.REQUEST_TIMED_OUT
                    result.error_message = f"not fsynced within {timeout_ms} ms"

    @staticmethod
    def _fail(result: m.ProducePartitionResponse, exc: BaseException) -> None:
        result.error_code = error_code_for(exc)
        result.error_message = str(exc)
        result.base_offset = -1

    # -- Fetch -----------------------------------------------------------------------------

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
            fetched = self._log(topic, fp.partition_index).read(
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

    # -- ListOffsets / DeleteRecords -------------------------------------------------------

    async def list_offsets(self, req: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        max_body_bytes = stored_batch_bound(self.ctx.config.int("message.max.decompressed.bytes"))
        topics = []
        for topic in req.topics:
            parts = []
            for lp in topic.partitions:
                result = m.ListOffsetsPartitionResponse(partition_index=lp.partition_index)
                parts.append(result)
                if lp.timestamp < 0 and lp.timestamp not in (
                    m.LATEST_TIMESTAMP,
                    m.EARLIEST_TIMESTAMP,
                ):
                    result.error_code = ErrorCode.INVALID_REQUEST
                    continue
                try:
                    log = self._log(topic.name, lp.partition_index, Operation.DESCRIBE)
                    found = log.offset_for_timestamp(lp.timestamp, max_body_bytes)
                    if found is not None:
                        result.offset, result.timestamp = found
                except (StorageError, OSError) as exc:
                    result.error_code = error_code_for(exc)
                except (CorruptRecordError, CompressionError) as exc:  # a batch stored damaged
                    result.error_code = error_code_for(exc)
                    self.ctx.log.warning(
                        "unreadable batch",
                        topic=topic.name,
                        partition=lp.partition_index,
                        reason=str(exc),
                    )
            topics.append(m.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
        return m.ListOffsetsResponse(correlation_id=req.correlation_id, topics=topics)

    async def delete_records(self, req: m.DeleteRecordsRequest) -> m.DeleteRecordsResponse:
        topics = []
        for topic in req.topics:
            parts = []
            for dp in topic.partitions:
                result = m.DeleteRecordsPartitionResult(partition_index=dp.partition_index)
                try:
                    log = self._client_writable_log(
                        topic.name, dp.partition_index, "delete records of", Operation.DELETE
                    )
                    offset = log.high_watermark if dp.offset == HIGH_WATERMARK else dp.offset
                    if offset < 0:  # Kafka: of the negative offsets only -1 has a meaning
                        raise OffsetOutOfRangeError(
                            offset, log.log_start_offset, log.high_watermark
                        )
                    result.low_watermark = log.advance_log_start_offset(offset)
                except (StorageError, OSError) as exc:
                    result.error_code = error_code_for(exc)
                parts.append(result)
            topics.append(m.DeleteRecordsTopicResult(name=topic.name, partitions=parts))
        await self.ctx.checkpoint()  # a DeleteRecords must survive a crash
        return m.DeleteRecordsResponse(correlation_id=req.correlation_id, topics=topics)
