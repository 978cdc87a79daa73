"""The producer's record accumulator: per-partition batches and their encoding.

Shared by :class:`odradek.client.producer.Producer` (a sender thread) and
:class:`odradek.client.async_producer.AsyncProducer` (a sender task); no I/O here.

A batch's records live in a :data:`odradek.client.record_buffer.RecordBuffer` (C or pure Python),
which encodes them; :func:`encode_batch` puts the 61-byte batch header in front, compressing
the records first if asked. A batch is *closed* when its estimated size reaches
``batch_size`` or when it is drained (linger expired, flush, close). Closing the batch of a
topic's sticky partition moves the sticky partition (KIP-480).

Batch lifecycle: open -> closed (ready) -> in flight -> completed once, with
``(base_offset, log_append_time_ms)`` or an error (its callbacks then run, once); a retried
batch goes back to the *front* of the ready queue (when, and the delivery deadline: the rules
of :mod:`odradek.client.producer_core`).

Lock-free tails (both producers' hot path): the open batch of a topic's sticky partition may
be a *tail*, published in :attr:`Accumulator.tails` (topic -> batch). Whoever pops it from
that dict (``dict.pop`` is atomic under the GIL) owns it exclusively: ``send()``'s tail append
takes it, appends a record without any lock and puts it back (the C append does all of it
without releasing the GIL, so it never leaves the dict); every other writer (closing it, a
locked append) must own it the same way, and waits (or skips it) while another thread holds
it — so a tail is never read while being appended to. A full tail is closed by the next
record that does not fit it (:meth:`Accumulator.retire_full_tail`), and the open batch of the
sticky partition becomes the tail whenever the topic has none (:meth:`Accumulator.add`).
``tail_of`` (guarded by the caller's lock) names each topic's live tail, so a tail held by a
sender is told apart from no tail.
Bytes appended lock-free join ``buffered_bytes`` at the batch's next locked append or when it
closes (``accounted_bytes`` says how many of a batch's bytes already have), and the lock-free
path does not wait for memory (the locked path does, before it opens a batch): the
``buffer_memory`` bound is thus exceeded by at most one open batch per topic.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from odradek.client.record_buffer import RecordBuffer
from odradek.client.types import RecordMetadata, TopicPartition
from odradek.protocol import compression as _compression
from odradek.protocol.batch_builder import batch_header
from odradek.protocol.frames import Buffer
from odradek.protocol.record_batch import Compression

__all__ = ["Accumulator", "Batch", "encode_batch"]

_LOCK = threading.Lock()  # guards batch completion vs. callback registration


class Batch:
    __slots__ = (
        "_callbacks",
        "accounted_bytes",
        "attempts",
        "base_offset",
        "created_s",
        "data",
        "deadline_s",
        "error",
        "is_done",
        "is_tail",
        "log_append_time_ms",
        "records",
        "retry_at_s",
        "tp",
    )

    def __init__(self, tp: TopicPartition, created_s: float, deadline_s: float) -> None:
        self.tp = tp
        self.records = RecordBuffer()
        self.created_s = created_s
        self.deadline_s = deadline_s
        self.retry_at_s = 0.0
        self.attempts = 0
        self.data: list[Buffer] | None = None  # the encoded batch's parts, kept for retries
        self.is_done = False
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        self._callbacks: list[Callable[[Batch], Any]] = []
        self.is_tail = False  # published in Accumulator.tails (see the module docstring)
        self.accounted_bytes = 0  # how much of size_bytes is counted in buffered_bytes

    def __len__(self) -> int:
        return len(self.records)

    @property
    def size_bytes(self) -> int:
        """The records' estimated size (see :mod:`odradek.client.record_buffer`)."""
        return self.records.size_bytes

    def add_done_callback(self, fn: Callable[[Batch], Any]) -> None:
        """Call ``fn(batch)`` once the batch completes (at once if it has)."""
        with _LOCK:
            if not self.is_done:
                self._callbacks.append(fn)
                return
        fn(self)

    def complete(
        self,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        error: BaseException | None = None,
    ) -> None:
        with _LOCK:
            if self.is_done:
                return
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self.is_done = True
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    def result(self, index: int) -> RecordMetadata:
        """The metadata of record ``index`` of the completed batch; raises its error if it
        failed."""
        if self.error is not None:
            raise self.error
        timestamp_ms, key_size, value_size = self.records.metadata(index)
        if self.log_append_time_ms >= 0:
            timestamp_ms = self.log_append_time_ms
        return RecordMetadata(
            self.tp.topic,
            self.tp.partition,
            self.base_offset + index if self.base_offset >= 0 else -1,
            timestamp_ms,
            key_size,
            value_size,
        )


class Accumulator:
    """Open and ready batches of one producer. Not thread-safe: the caller holds a lock."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_s: float,
        delivery_timeout_s: float,
        compression: Compression,
        on_batch_closed: Callable[[TopicPartition], None],
    ) -> None:
        self.batch_size = batch_size
        self.compression = compression
        self.linger_s = linger_s
        self.delivery_timeout_s = delivery_timeout_s
        self.open: dict[TopicPartition, Batch] = {}
        self.ready: deque[Batch] = deque()
        self.buffered_bytes = 0
        self._on_batch_closed = on_batch_closed  # (tp) -> sticky switch
        self.tails: dict[str, Batch] = {}  # lock-free: popped by whoever appends or closes
        self.tail_of: dict[str, Batch] = {}  # each topic's live tail (under the caller's lock)

    def _new_batch(self, topic: str, partition: int, now_s: float) -> Batch:
        """A batch for the partition, not in :attr:`open` yet: the caller registers it once
        its first record is in, so a refused record opens no empty batch (whose ``fresh``
        wake-up would be lost)."""
        return Batch(TopicPartition(topic, partition), now_s, now_s + self.delivery_timeout_s)

    def _account(self, batch: Batch) -> None:
        """Count the bytes of ``batch`` (owned, or closed) not counted yet in
        ``buffered_bytes``: those of a locked append, and those appended lock-free to a tail."""
        size = batch.records.size_bytes
        self.buffered_bytes += size - batch.accounted_bytes
        batch.accounted_bytes = size

    def add(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: list[tuple[str, bytes | None]] | None,
        size: int,
        now_s: float,
        tail: bool = False,
    ) -> tuple[Batch, int, bool] | None:
        """Append a record of estimated ``size`` to the partition's open batch, closing it and
        opening a new one when it would pass ``batch_size``: ``(batch, index, fresh)`` (fresh:
        the batch was opened for it), or ``None`` while another thread holds that batch as
        its topic's tail (try again). ``tail``: a new batch may become the topic's tail (a
        null-key record without headers for the sticky partition)."""
        batch = self.open.get((topic, partition))  # a plain tuple finds a TopicPartition
        owned = batch is not None and batch.is_tail
        if owned and not self.own_tail(batch):  # type: ignore[arg-type]
            return None
        fresh = False
        if batch is None or batch.size_bytes + size > self.batch_size:
            if batch is not None:
                self.close(batch, owned)  # a tail we own is closed: the new batch is not one
            batch = self._new_batch(topic, partition, now_s)
            fresh = True
            owned = False
        try:
            index = batch.records.append(value, key, timestamp_ms, headers)
        except BaseException:  # a bad header or timestamp: the record is refused, nothing
            if owned:  # changes (no empty batch opened, the tail published again)
                self.tails[topic] = batch
            raise
        if fresh:
            self.open[batch.tp] = batch
        if tail and not owned and value is not None and not headers:
            owned = topic not in self.tail_of  # the sticky batch becomes the topic's tail
            if owned:
                batch.is_tail = True
                self.tail_of[topic] = batch
        self._account(batch)
        if owned:
            self.tails[topic] = batch
        return batch, index, fresh

    def retire_full_tail(self, topic: str, size: int) -> bool:
        """Close ``topic``'s tail batch if a record of ``size`` no longer fits it (so the
        sticky partition moves on before the record is placed); whether it did."""
        batch = self.tail_of.get(topic)
        if batch is None or batch.size_bytes + size <= self.batch_size:
            return False
        return self.close(batch)  # False while a lock-free append holds it: found full again

    def add_columns(
        self,
        topic: str,
        partition: int,
        columns: tuple[Any, Any, Any],
        start: int,
        timestamp_ms: int,
        now_s: float,
    ) -> tuple[int, Batch, int, bool] | None:
        """Append the rows ``start``, ``start + 1``, ... of ``columns`` (``(values, keys,
        rows)``: see ``RecordBuffer.extend``; stamped ``timestamp_ms``) to the partition's open
        batch (a tail is owned and closed first: the two paths never share a batch) up to
        ``batch_size``, closing it when rows are left: ``(next row, batch, index of its first
        new record, fresh)``, or ``None`` while another thread holds the tail (try again)."""
        batch = self.open.get((topic, partition))
        if batch is not None and batch.is_tail:
            if not self.close(batch):
                return None
            batch = None
        fresh = batch is None
        if batch is None:
            batch = self._new_batch(topic, partition, now_s)
        values, keys, rows = columns
        first = len(batch.records)
        end = batch.records.extend(values, keys, rows, start, timestamp_ms, self.batch_size)
        if fresh:
            self.open[batch.tp] = batch
        self._account(batch)
        if end < len(memoryview(rows).cast("B")) // 8:
            self.close(batch)  # full: the next rows go to a new batch
        return end, batch, first, fresh

    def own_tail(self, batch: Batch) -> bool:
        """Take ownership of the tail ``batch``: pop it from :attr:`tails`, which holds it (a
        topic's one live tail) or, while another thread holds it, nothing (``False``)."""
        return self.tails.pop(batch.tp.topic, None) is batch

    def close(self, batch: Batch, owned: bool = False) -> bool:
        """Close an open batch, owning it first if it is a tail (:meth:`own_tail`) the caller
        does not own (``owned``); ``False`` (nothing done) while another thread holds it."""
        if batch.is_tail and not owned and not self.own_tail(batch):
            return False
        if self.open.get(batch.tp) is batch:
            del self.open[batch.tp]
            if batch.is_tail:
                batch.is_tail = False
                if self.tail_of.get(batch.tp.topic) is batch:
                    del self.tail_of[batch.tp.topic]
            self._account(batch)
            self.ready.append(batch)
            self._on_batch_closed(batch.tp)
        return True

    def close_expired(self, now_s: float, force: bool) -> bool:
        """Close every open batch whose linger passed (all of them when ``force``). Returns
        ``False`` when a due tail was held by another thread (call again soon)."""
        linger = self.linger_s
        closed_all = True
        for batch in list(self.open.values()):
            if (force or now_s - batch.created_s >= linger) and not self.close(batch):
                closed_all = False
        return closed_all

    def take_expired(self, now_s: float) -> list[Batch]:
        """Take the ready batches whose delivery deadline has passed, whatever they wait for
        (a retry backoff, a free request slot), and free their bytes: the caller fails them.
        (An open batch is closed when its linger ends, before its deadline: ``linger_ms`` is
        less than ``delivery_timeout_ms``, :class:`~odradek.client.config.ProducerConfig`.)"""
        if not any(batch.deadline_s <= now_s for batch in self.ready):
            return []
        expired = [batch for batch in self.ready if batch.deadline_s <= now_s]
        self.ready = deque(batch for batch in self.ready if batch.deadline_s > now_s)
        self.release(expired)
        return expired

    def next_wakeup_s(self, now_s: float) -> float | None:
        """Seconds until the next open batch's linger expires, a retry is due or a ready
        batch's delivery deadline passes."""
        times = [b.created_s + self.linger_s for b in self.open.values()]
        times += [b.retry_at_s if b.retry_at_s > now_s else b.deadline_s for b in self.ready]
        return max(0.0, min(times) - now_s) if times else None

    def take_ready(self, now_s: float, max_request_bytes: int) -> list[Batch]:
        """Batches for one Produce request: at most one per partition, in queue order, up to
        ``max_request_bytes`` (estimated record bytes; always at least one batch). A partition
        whose first ready batch waits for a retry backoff blocks its later batches (ordering).
        The caller encodes them (:meth:`encode`) outside its lock."""
        taken: list[Batch] = []
        seen: set[TopicPartition] = set()
        total = 0
        keep: deque[Batch] = deque()
        while self.ready:
            batch = self.ready.popleft()
            if batch.tp in seen or batch.retry_at_s > now_s:
                seen.add(batch.tp)
                keep.append(batch)
                continue
            seen.add(batch.tp)
            size = batch.size_bytes if batch.data is None else sum(map(len, batch.data))
            if taken and total + size > max_request_bytes:
                keep.append(batch)
                continue
            total += size
            taken.append(batch)
        self.ready = keep
        return taken

    def encode(self, batches: list[Batch]) -> None:
        """Encode batches not encoded yet (a retried batch keeps its bytes)."""
        for batch in batches:
            if batch.data is None:
                batch.data = encode_batch(batch, self.compression)

    def settle(self, retry: list[Batch], finished: list[Batch]) -> None:
        """After a Produce answer: release the bytes of the batches that completed and put
        those being retried back at the front of the ready queue, keeping their order."""
        self.release(finished)
        self.ready.extendleft(reversed(retry))

    def release(self, batches: list[Batch]) -> None:
        """Free the bytes of ``batches`` (completed, or failing): each batch's are freed once,
        whichever path frees them first (an expiry, then its request's answer)."""
        for batch in batches:
            self.buffered_bytes -= batch.accounted_bytes
            batch.accounted_bytes = 0

    def unfinished(self) -> list[Batch]:
        return [*self.open.values(), *self.ready]

    def drain(self) -> None:
        """Forget every batch not sent yet (the producer gives up on them)."""
        self.open.clear()
        self.tails.clear()
        self.tail_of.clear()
        self.ready.clear()


def encode_batch(batch: Batch, compression: Compression = Compression.NONE) -> list[Buffer]:
    """The RecordBatch v2 bytes of ``batch`` (base offset 0; the broker assigns offsets) as two
    parts, sent back to back: the 61-byte header and the records. Uncompressed records are the
    record buffer's own bytes (a view, no copy): a 1 MiB batch is never copied in Python,
    which would hold the GIL the producing threads need."""
    records = batch.records
    count = len(records)
    body = records.body()
    if compression:
        body = _compression.compress(compression, body)
    header = batch_header(
        body, count, records.first_timestamp_ms, records.max_timestamp_ms, int(compression)
    )
    return [header, body]
