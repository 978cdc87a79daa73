"""Produce: validate a request's batches, append them, and answer once they are as durable as
``acks`` asks. The shared handler of both wire protocols (the native session and
:mod:`odradek.broker.kafka.data` call it).

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
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import anyio

from odradek.broker.context import BrokerContext
from odradek.broker.errors import error_code_for
from odradek.broker.record_access import client_writable_log
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.validate import DecompressionBudget, has_compressed_batch
from odradek.storage.append import PreparedAppend
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

__all__ = ["ProduceApi", "Section"]

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


class ProduceApi:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._validators: anyio.CapacityLimiter | None = None  # made on the event loop

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
        logs = self.ctx.manager.partitions.logs
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
                log = client_writable_log(self.ctx, topic, part.partition_index)
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
