"""Fetch positions and buffered fetched data for the consumers (no I/O: the blocking and async
consumers drive it).

State per assigned partition: ``position`` (next offset to hand out, ``None`` until reset),
a pending reset (``"earliest"``/``"latest"``, or ``"committed"``: a partition the application
assigned to a consumer with a ``group_id`` starts at the group's committed offset, as in
kafka-python and aiokafka, and by ``auto_offset_reset`` only without one), and at most one
:class:`BatchCursor` over the bytes of the last Fetch response. Invariants:

1. A Fetch is built only for partitions with a position, no pending reset, and nothing left
   to decode (no buffer, or a buffer without a whole batch left: then the fetch starts where
   that buffer ends, while its decoded records are still handed out — the prefetch). At most
   one prefetched buffer waits behind the current one (``next_buffers``), and at most one
   Fetch is in flight per partition (``in_flight``: a face may have several Fetches in
   flight, for different partitions, so that partitions drained early are fetched again
   while the others are still being handed out).
2. A response is applied only to partitions still assigned whose fetch offset (rule 1) equals
   the offset the request asked for (a ``seek`` or reassignment while the fetch was in flight
   makes the data stale: it is dropped).
3. Records are handed out in offset order and the position moves past each record handed
   out (and past skipped control batches), so ``position()`` is the next offset to consume.
4. A paused partition (:meth:`Fetcher.pause`) is neither fetched nor drained: what was
   fetched for it stays buffered, and its position where it is, until it is resumed. A new
   assignment keeps the pause of the partitions it keeps (an eager rebalance assigns nothing
   first: it keeps none).

Errors: ``OFFSET_OUT_OF_RANGE`` schedules a reset by ``auto_offset_reset`` (``"none"``: the
error is raised by the next poll); other retriable errors just fetch again after a backoff;
non-retriable errors (and corrupt batches) are raised by the next poll. An error is queued
with its partition (``None``: the consumer's, as a failed request or a group error), and a
poll of some partitions only raises theirs and the consumer's (aiokafka's ``getmany``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from odradek.client.config import ConsumerConfig
from odradek.client.errors import KafkaError, OffsetOutOfRangeError  # type: ignore[attr-defined]
from odradek.client.group_ops import fetch_offsets_op
from odradek.client.ops import Op, list_offsets_op
from odradek.client.records import BatchCursor, LazyRecords
from odradek.client.types import (
    ConsumerRecord,
    FetchedPartition,
    TopicPartition,
)
from odradek.protocol import messages as m

__all__ = ["Fetcher"]

_RESET_TIMESTAMPS = {"earliest": m.EARLIEST_TIMESTAMP, "latest": m.LATEST_TIMESTAMP}


class Fetcher:
    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.auto_offset_reset = config.auto_offset_reset
        self.group_id = config.group_id
        # the keyword arguments of ops.fetch_op
        self.fetch_options = {
            "max_wait_ms": config.fetch_max_wait_ms,
            "min_bytes": config.fetch_min_bytes,
            "max_bytes": config.fetch_max_bytes,
            "partition_max_bytes": config.max_partition_fetch_bytes,
        }
        self.positions: dict[TopicPartition, int | None] = {}
        self.resets: dict[TopicPartition, str] = {}
        self.buffers: dict[TopicPartition, BatchCursor] = {}
        self.next_buffers: dict[TopicPartition, BatchCursor] = {}  # prefetched, after buffers
        # decoded, not handed out yet: a batch's columns, or records given back by unread()
        self.pending_records: dict[TopicPartition, list[ConsumerRecord] | LazyRecords] = {}
        # queued for the next poll: (the partition it is about, or None, the error)
        self.errors: list[tuple[TopicPartition | None, KafkaError]] = []
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()  # invariant 4
        # partition -> the offsets of the Fetch in flight for it (see fetch_started)
        self.in_flight: dict[TopicPartition, dict[TopicPartition, int]] = {}
        self._failures = 0  # fetches failed in a row (the backoff doubles)

    # -- assignment and positions ------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition], committed: bool = False) -> None:
        """Read exactly ``partitions``: the kept ones where they are, the new ones from the
        group's committed offset if ``committed`` (and a ``group_id``), else by
        ``auto_offset_reset``."""
        new = {TopicPartition(*tp) for tp in partitions}
        self.paused &= new
        for tp in list(self.positions):
            if tp not in new:
                self._drop(tp)
                del self.positions[tp]
        start = "committed" if committed and self.group_id is not None else None
        if start is None and self.auto_offset_reset != "none":
            start = self.auto_offset_reset
        for tp in new:
            if tp not in self.positions:
                self.positions[tp] = None
                if start is not None:
                    self.resets[tp] = start

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def _check(self, tp: TopicPartition) -> TopicPartition:
        tp = TopicPartition(*tp)
        if tp not in self.positions:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return tp

    def _drop(self, tp: TopicPartition) -> None:
        self.in_flight.pop(tp, None)  # its answer, if any, will be stale (invariant 2)
        self.buffers.pop(tp, None)
        self.next_buffers.pop(tp, None)
        self.pending_records.pop(tp, None)
        self.resets.pop(tp, None)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.paused.update([self._check(tp) for tp in partitions])

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.paused.difference_update([self._check(tp) for tp in partitions])

    def seek(self, tp: TopicPartition, offset: int) -> None:
        tp = self._check(tp)
        if not isinstance(offset, int):  # a float would go out in the next Fetch
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._drop(tp)
        self.positions[tp] = offset
        self.errors.clear()  # raised for the old position: the application moved on

    def request_reset(self, tp: TopicPartition, policy: str) -> None:
        tp = self._check(tp)
        self._drop(tp)
        self.resets[tp] = policy
        self.errors.clear()

    def positions_unknown(self) -> bool:
        """Whether a partition waits for a reset or has no position (then the consumers run
        :meth:`resolve_positions_op` before fetching)."""
        return bool(self.resets) or None in self.positions.values()

    def resolve_positions_op(self) -> Op[None]:
        """Look up the committed offsets of the partitions waiting for them (those without
        one go on by ``auto_offset_reset``), then the offsets of the partitions waiting for a
        reset (``earliest``/``latest``). Raises :class:`OffsetOutOfRangeError` for a partition
        without a position under ``auto_offset_reset="none"``."""
        asked = [tp for tp, policy in self.resets.items() if policy == "committed"]
        if asked:
            assert self.group_id is not None
            found = yield from fetch_offsets_op(self.group_id, asked)
            for tp in asked:
                if self.resets.get(tp) != "committed":
                    continue  # a seek or a new assignment meanwhile
                hit = found.get(tp)
                if hit is not None:
                    del self.resets[tp]
                    self.positions[tp] = hit.offset
                elif self.auto_offset_reset == "none":
                    del self.resets[tp]
                else:
                    self.resets[tp] = self.auto_offset_reset
        missing = [
            tp for tp, pos in self.positions.items() if pos is None and tp not in self.resets
        ]
        if missing:
            raise OffsetOutOfRangeError(
                f"no position for {missing} and auto_offset_reset='none' (seek first)"
            )
        wanted = {
            tp: _RESET_TIMESTAMPS[policy]
            for tp, policy in self.resets.items()
            if policy in _RESET_TIMESTAMPS  # (not one assigned while the lookup above waited)
        }
        if not wanted:
            return
        for tp, hit in (yield from list_offsets_op(wanted)).items():
            if tp in self.resets and hit is not None:
                del self.resets[tp]
                self.positions[tp] = hit.offset

    def position_op(self, tp: TopicPartition) -> Op[int]:
        """The operation of :meth:`odradek.client.consumer_core.ConsumerCore.position`."""
        tp = self._check(tp)
        yield from self.resolve_positions_op()
        return self.positions[tp]  # type: ignore[return-value]

    # -- fetching ----------------------------------------------------------------------------
    def fetchable(self) -> dict[TopicPartition, int]:
        """``{tp: fetch offset}`` for the partitions that need data now (invariants 1 and 4)."""
        out = {}
        in_flight, paused = self.in_flight, self.paused
        for tp, pos in self.positions.items():
            if pos is None or tp in self.resets or tp in self.next_buffers or tp in in_flight:
                continue
            if tp in paused:
                continue
            offset = self._fetch_offset(tp, pos)
            if offset is not None:
                out[tp] = offset
        return out

    def _fetch_offset(self, tp: TopicPartition, position: int) -> int | None:
        cursor = self.buffers.get(tp)
        if cursor is not None:
            return cursor.position if cursor.exhausted else None
        return None if tp in self.pending_records else position

    def fetch_started(self, offsets: dict[TopicPartition, int]) -> None:
        """A Fetch for ``offsets`` (from :meth:`fetchable`) was sent: its partitions are not
        fetchable until :meth:`fetch_ended` with the same dict."""
        self.in_flight.update(dict.fromkeys(offsets, offsets))

    def fetch_ended(self, offsets: dict[TopicPartition, int]) -> None:
        """The Fetch for ``offsets`` was answered (and applied) or failed."""
        in_flight = self.in_flight
        for tp in offsets:
            if in_flight.get(tp) is offsets:
                del in_flight[tp]

    def on_fetch(
        self, requested: dict[TopicPartition, int], fetched: dict[TopicPartition, FetchedPartition]
    ) -> float:
        """Apply a Fetch response; returns the backoff before fetching again (:meth:`_backoff_s`:
        a partition answered a retriable error)."""
        backoff = False
        for tp, part in fetched.items():
            position = self.positions.get(tp)
            if position is None or tp in self.next_buffers:
                continue
            if requested.get(tp) is None or self._fetch_offset(tp, position) != requested[tp]:
                continue  # invariant 2: stale
            if part.error is not None:
                if isinstance(part.error, OffsetOutOfRangeError):
                    self._drop(tp)
                    if self.auto_offset_reset == "none":
                        self.errors.append((tp, part.error))
                    else:
                        self.resets[tp] = self.auto_offset_reset
                elif part.error.retriable:
                    backoff = True
                else:
                    self.errors.append((tp, part.error))
                continue
            self.high_watermarks[tp] = part.high_watermark
            if len(part.records):
                cursor = BatchCursor(tp.topic, tp.partition, part.records, requested[tp])
                if tp in self.buffers:
                    self.next_buffers[tp] = cursor
                else:
                    self.buffers[tp] = cursor
        return self._backoff_s(backoff)

    def on_error(self, error: KafkaError) -> float:
        """A Fetch (or what it needed: a connection, positions) failed with ``error``: a
        non-retriable one is raised by the next poll. Returns the backoff before fetching again."""
        if not error.retriable:
            self.report(error)
        return self._backoff_s(True)

    def _backoff_s(self, failed: bool) -> float:
        """Seconds to wait before the next Fetch: 0 after a success, else ``retry_backoff_ms``
        doubling with each failure in a row up to ``retry_backoff_max_ms``."""
        if not failed:
            self._failures = 0
            return 0.0
        self._failures += 1
        return self.config.backoff_s(self._failures - 1)

    def raise_errors(self, partitions: Collection[TopicPartition] = ()) -> None:
        """Raise the first queued error (of ``partitions`` or the consumer's, if given)."""
        for i, (tp, _) in enumerate(self.errors):
            if tp is None or not partitions or tp in partitions:
                raise self.errors.pop(i)[1]

    def report(self, error: KafkaError) -> None:
        """Queue ``error`` for the next poll, once: a background loop that keeps failing the
        same way (no position, out of range with reset "none") must not pile up copies."""
        if not any(type(e) is type(error) and str(e) == str(error) for _, e in self.errors):
            self.errors.append((None, error))

    def unread(self, records: list[ConsumerRecord]) -> None:
        """Put records handed out by :meth:`drain` back (in order, ahead of what is pending)
        and move each partition's position back to its first one."""
        by_tp: dict[TopicPartition, list[ConsumerRecord]] = {}
        for record in records:
            by_tp.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        for tp, taken in by_tp.items():
            if tp not in self.positions:
                continue
            pending = self.pending_records.get(tp, [])
            if type(pending) is not list:  # a decoded batch: build what is left of it
                pending = pending.take(len(pending))
            self.pending_records[tp] = taken + pending
            self.positions[tp] = taken[0].offset

    def drain(
        self, max_records: int, partitions: Collection[TopicPartition] = ()
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` buffered records, decoding batches lazily (invariant 3): of
        ``partitions`` only if given (those not assigned have none; the others' records stay
        buffered and their positions where they are), and none of a paused partition."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        budget = max_records
        wanted = list(self.positions)
        if partitions:
            wanted = [tp for tp in wanted if tp in partitions]
        if self.paused:
            wanted = [tp for tp in wanted if tp not in self.paused]
        for tp in wanted:
            if budget <= 0:
                break
            taken = self._take(tp, budget)
            if taken:
                out[tp] = taken
                budget -= len(taken)
        return out

    def _take(self, tp: TopicPartition, budget: int) -> list[ConsumerRecord]:
        taken: list[ConsumerRecord] = []
        while budget > 0:
            pending = self.pending_records.get(tp)
            if pending:
                if type(pending) is list:  # records given back by unread()
                    chunk = pending[:budget]
                    rest: list[ConsumerRecord] | LazyRecords = pending[budget:]
                else:  # a decoded batch: its records are built as they are taken
                    chunk = pending.take(budget)
                    rest = pending
                if rest:
                    self.pending_records[tp] = rest
                else:
                    del self.pending_records[tp]
                taken += chunk
                budget -= len(chunk)
                self.positions[tp] = chunk[-1].offset + 1
                continue
            self.pending_records.pop(tp, None)
            cursor = self.buffers.get(tp)
            if cursor is None:
                break
            try:
                records = cursor.next_batch()
            except KafkaError as exc:
                del self.buffers[tp]
                if taken:
                    self.errors.append((tp, exc))
                    break
                raise
            if records is None:  # no whole batch left (a partial tail): fetch from here
                del self.buffers[tp]
                self.positions[tp] = cursor.position
                following = self.next_buffers.pop(tp, None)
                if following is None:
                    break
                self.buffers[tp] = following
                continue
            if records:
                self.pending_records[tp] = records
            else:  # control batch or below the position: just move the position
                self.positions[tp] = max(self.positions[tp] or 0, cursor.position)
        return taken
