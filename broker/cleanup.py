"""Background log cleanup: retention (``cleanup.policy=delete``) and compaction (``compact``).

Task tree (started by :class:`odradek.broker.server.Server` in its background task group)::

    run_cleanup(ctx)
    ├── retention loop        every log.retention.check.interval.ms, on the event loop
    └── cleaner loops, log.cleaner.threads of them (if log.cleaner.enable)

**Retention** (:mod:`odradek.storage.retention`) is metadata work plus a few renames, so it runs on
the event-loop thread, where appends run: nothing can append between choosing segments and
removing them. Each deletion is logged (one line per rule per partition); afterwards the offset
checkpoints are written (the log start offset moved). Segments whose
``file.delete.delay.ms`` has passed are then closed and unlinked in a worker thread, except
those of a log the cleaner is reading right now (their fds must stay open until it is done).

**Compaction** (:mod:`odradek.storage.cleaner`): a cleaner loop picks the filthiest cleanable log no
other cleaner holds (or sleeps ``log.cleaner.backoff.ms`` when there is none), then:

1. builds the offset map in a worker thread (``anyio.to_thread.run_sync``);
2. plans the groups on the event loop;
3. per group: writes the ``.cleaned`` segment in a worker thread, then swaps it in on the event
   loop (:meth:`odradek.storage.log.Log.replace_segments`: a few renames, one directory fsync), so
   the segment list only ever changes on the thread that appends and reads.

A pass that fails on a log's contents (a batch stored damaged: unreadable records, a codec
error, a body over ``message.max.decompressed.bytes``) marks that log **uncleanable** (Kafka's
``LogCleanerManager.markPartitionUncleanable``): one warning names the partition and the reason,
the cleaners skip it from then on (until the broker restarts or the topic is re-created), and
every other compacted partition keeps being cleaned. An ``OSError`` takes the log dir offline
instead.

The worker threads read only inactive (immutable) segments. Every batch read or written passes
through ``throttle``: Kafka's :class:`~odradek.storage.cleaner.throttle.Throttler` at
``log.cleaner.io.max.bytes.per.second`` (shared by the cleaner threads), plus
``anyio.from_thread.check_cancelled()``, so a shutdown abandons a pass within one batch (its
``.cleaned`` files are deleted; the loader deletes any a crash leaves), plus a ``time.sleep(0)``
that releases the GIL: the cleaner is pure-Python CPU work, and without it the event loop waits
up to the interpreter's switch interval (5 ms) for the GIL each time it wakes up (measured:
produce p99 went from ~1 ms to ~8 ms during a pass; with it, produce latency stays at its idle
level and the cleaner slows down while the loop is busy). One line is logged per pass:
segments and bytes before and after, records, duration.
"""

from __future__ import annotations

import functools
import time
import weakref
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from odradek.broker.context import BrokerContext
from odradek.protocol.compression import CompressionError
from odradek.protocol.record_batch import CorruptRecordError
from odradek.protocol.validate import stored_batch_bound
from odradek.storage.cleaner.clean import (
    CleaningStats,
    build_offset_map,
    clean_group,
    commit_group,
    finish_pass,
    plan_groups,
)
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.plan import CleanableLog, choose_log
from odradek.storage.cleaner.throttle import Throttler
from odradek.storage.log import Log
from odradek.storage.retention import apply_retention
from odradek.storage.segment import LogSegment

__all__ = ["run_cleaner", "run_cleanup", "run_retention"]


class _Busy:
    """Logs a cleaner is working on (by identity)."""

    def __init__(self) -> None:
        self.ids: set[int] = set()

    def __contains__(self, log: Log) -> bool:
        return id(log) in self.ids


async def run_cleanup(ctx: BrokerContext) -> None:
    """Run retention and the cleaner threads until cancelled."""
    busy = _Busy()
    uncleanable: weakref.WeakSet[Log] = weakref.WeakSet()
    config = ctx.config
    async with anyio.create_task_group() as group:
        group.start_soon(run_retention, ctx, busy)
        if config["log.cleaner.enable"]:
            threads = config.int("log.cleaner.threads")
            rate = float(config["log.cleaner.io.max.bytes.per.second"])  # type: ignore[arg-type]
            throttler = Throttler(rate)
            for n in range(threads):
                group.start_soon(run_cleaner, ctx, busy, n, threads, throttler, uncleanable)


# -- retention -----------------------------------------------------------------------------


async def run_retention(ctx: BrokerContext, busy: _Busy) -> None:
    interval_s = ctx.config.int("log.retention.check.interval.ms") / 1000
    while True:
        await anyio.sleep(interval_s)
        await retention_pass(ctx, busy)


async def retention_pass(ctx: BrokerContext, busy: _Busy) -> None:
    """Apply retention to every log and delete the files whose delay has passed."""
    manager = ctx.manager
    now_ms = manager.clock_ms()
    deleted_any = False
    due: list[tuple[Log, LogSegment]] = []
    for log in list(manager.partitions.logs.values()):
        try:
            results = apply_retention(log, now_ms)
        except OSError as exc:
            ctx.storage_failed(log, exc)
            continue
        for result in results:
            deleted_any = True
            if ctx.metrics is not None:
                ctx.metrics.retention_segments_deleted += result.segments
                ctx.metrics.retention_bytes_deleted += result.bytes_deleted
            ctx.log.info(
                "log segments deleted",
                topic=log.topic,
                partition=log.partition,
                reason=result.reason,
                segments=result.segments,
                bytes=result.bytes_deleted,
                base_offsets=list(result.base_offsets),
                log_start_offset=result.log_start_offset,
            )
        if log not in busy:
            due.extend((log, segment) for segment in log.take_due_deletions(now_ms))
    if deleted_any:
        ctx.notify_all()  # long polls re-read: their offset may now be out of range
        await ctx.checkpoint()
    if due:
        failures = await anyio.to_thread.run_sync(_delete_files, due)
        for log, segment, error in failures:
            ctx.log.warning(
                "cannot delete segment files",
                topic=log.topic,
                partition=log.partition,
                file=str(segment.log_path),
                error=str(error),
            )


def _delete_files(due: list[tuple[Log, LogSegment]]) -> list[tuple[Log, LogSegment, OSError]]:
    failures = []
    for log, segment in due:
        try:
            segment.delete_files()
        except OSError as exc:
            failures.append((log, segment, exc))
    return failures


# -- compaction ----------------------------------------------------------------------------


async def run_cleaner(
    ctx: BrokerContext,
    busy: _Busy,
    number: int,
    threads: int,
    throttler: Throttler,
    uncleanable: weakref.WeakSet[Log] | None = None,
) -> None:
    """One cleaner thread's loop (Kafka's ``CleanerThread``); logs whose cleaning failed on
    their contents go into ``uncleanable`` and are skipped (see the module docstring)."""
    uncleanable = weakref.WeakSet() if uncleanable is None else uncleanable
    config = ctx.config
    backoff_s = config.int("log.cleaner.backoff.ms") / 1000
    offset_map = OffsetMap.for_buffer(config.int("log.cleaner.dedupe.buffer.size"), threads)

    def throttle(n_bytes: int) -> None:
        anyio.from_thread.check_cancelled()
        throttler(n_bytes)
        time.sleep(0)  # release the GIL: the event loop waits less for it (see the docstring)

    while True:
        now_ms = ctx.manager.clock_ms()
        candidates = [
            log
            for log in ctx.manager.partitions.logs.values()
            if log not in busy and log not in uncleanable
        ]
        chosen = choose_log(candidates, now_ms)
        if chosen is None:
            await anyio.sleep(backoff_s)
            continue
        log = chosen.log
        busy.ids.add(id(log))
        try:
            await clean_log(ctx, chosen, offset_map, throttle, cleaner=number)
        except (CorruptRecordError, CompressionError) as exc:  # the log's contents
            if _is_live(ctx, log):
                uncleanable.add(log)
                ctx.log.warning(
                    "partition marked uncleanable",
                    topic=log.topic,
                    partition=log.partition,
                    cleaner=number,
                    reason=str(exc),
                )
        except Exception as exc:
            if _is_live(ctx, log):
                ctx.log.exception(
                    "log cleaning failed", topic=log.topic, partition=log.partition, cleaner=number
                )
                if isinstance(exc, OSError):
                    ctx.storage_failed(log, exc)
            await anyio.sleep(backoff_s)  # never spin on a persistent failure
        finally:
            busy.ids.discard(id(log))
            offset_map.clear()


def _is_live(ctx: BrokerContext, log: Log) -> bool:
    return ctx.manager.partitions.logs.get((log.topic, log.partition)) is log


async def clean_log(
    ctx: BrokerContext,
    chosen: CleanableLog,
    offset_map: OffsetMap,
    throttle: Any,
    *,
    cleaner: int = 0,
) -> CleaningStats:
    """One cleaning pass over ``chosen.log`` (see the module docstring); logs one line."""
    log = chosen.log
    started = time.perf_counter()
    now_ms = ctx.manager.clock_ms()
    stats = CleaningStats()
    max_body_bytes = stored_batch_bound(ctx.config.int("message.max.decompressed.bytes"))
    end_offset = await anyio.to_thread.run_sync(
        build_offset_map, chosen, offset_map, stats, throttle, max_body_bytes
    )
    for group in plan_groups(log, end_offset):
        if not _is_live(ctx, log):
            stats.aborted = True
            break
        cleaned = await anyio.to_thread.run_sync(
            functools.partial(
                clean_group,
                log,
                group,
                offset_map,
                stats,
                now_ms=now_ms,
                throttle=throttle,
                max_body_bytes=max_body_bytes,
            )
        )
        if not _is_live(ctx, log):
            cleaned.delete_files()
            stats.aborted = True
            break
        if not commit_group(log, cleaned, group, stats, now_ms=ctx.manager.clock_ms()):
            break
    finish_pass(log, stats)
    if ctx.metrics is not None:
        ctx.metrics.cleaner_passes += 1
        ctx.metrics.cleaner_bytes_read += stats.bytes_read
        ctx.metrics.cleaner_bytes_removed += max(stats.bytes_before - stats.bytes_after, 0)
    await ctx.checkpoint()  # cleaner-offset-checkpoint (and the others)
    ctx.log.info(
        "log cleaned",
        topic=log.topic,
        partition=log.partition,
        cleaner=cleaner,
        first_dirty_offset=chosen.first_dirty_offset,
        end_offset=stats.end_offset,
        cleanable_ratio=round(chosen.cleanable_ratio, 3),
        segments_before=stats.segments_before,
        segments_after=stats.segments_after,
        bytes_before=stats.bytes_before,
        bytes_after=stats.bytes_after,
        bytes_read=stats.bytes_read,
        records_before=stats.records_before,
        records_after=stats.records_after,
        keys=stats.keys_mapped,
        tombstones_removed=stats.tombstones_removed,
        keyless_removed=stats.keyless_removed,
        aborted=stats.aborted,
        duration_ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return stats
