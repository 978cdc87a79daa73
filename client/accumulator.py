"""The producer's record accumulator: per-partition batches, delivery futures, batch encoding.

Shared by :class:`client.producer.Producer` (a sender thread) and
:class:`client.async_producer.AsyncProducer` (a sender task); no I/O here.

Per record, :meth:`Accumulator.append` does a few list appends into the partition's open
:class:`Batch` (keys, values, timestamps; headers in a side dict) and returns the record's
index; nothing is encoded until the batch is drained. A batch is *closed* when its estimated
size reaches ``batch_size`` or when it is drained (linger expired, flush, close). Closing the
batch of a topic's sticky partition moves the sticky partition (KIP-480).

Batch lifecycle: open -> closed (ready) -> in flight -> completed once with
``(base_offset, log_append_time_ms)`` or an error; a retriable failure puts it back at the
*front* of the ready queue (ahead of later batches of its partition) until its delivery
deadline. Completion runs the batch's callbacks exactly once; record futures derive their
:class:`RecordMetadata` from the batch (one shared result per batch, like Kafka's
``FutureRecordMetadata``).

Lock-free tails (the blocking producer's hot path): the open batch of a topic's sticky
partition may be a *tail*, published in :attr:`Accumulator.tails` (topic -> batch). Whoever
pops it from that dict (``dict.pop`` is atomic under the GIL) owns it exclusively: ``send()``
pops it, appends a record without any lock and puts it back; every other writer (closing it,
a locked append) must own it the same way, and waits (or skips it) while another thread holds
it — so a tail is never read while being appended to. ``tail_of`` (guarded by the caller's
lock) names each topic's live tail, so a tail held by a sender is told apart from no tail.
Bytes appended lock-free are counted in the batch (``unaccounted_bytes``) and join
``buffered_bytes`` when the batch closes; the ``buffer_memory`` bound is thus exceeded by at
most one open batch per topic.

Encoding (:func:`encode_batch`): one RecordBatch v2 per batch, records laid out with
precomputed varint tables and joined once, CRC-32C over the header tail and body. The
commonest batch — null keys, values of one size, timestamps within 64 ms — takes four columns
of per-size tables (:func:`_encode_uniform`, about twice as fast as the general columns).
"""

from __future__ import annotations

import logging
import struct
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from itertools import repeat
from operator import add, sub
from typing import Any

from crc32c import crc32c

from client.types import RecordMetadata, TopicPartition
from protocol import compression as _compression
from protocol.records import Compression
from protocol.varint import encode_varint

__all__ = ["Accumulator", "Batch", "RecordFuture", "encode_batch", "record_future"]

_TABLE = [encode_varint(n) for n in range(1 << 15)]
_TABLE_LIMIT = len(_TABLE)
_NULL = encode_varint(-1)
_ZERO = b"\x00"
_NO_HEADERS = encode_varint(0)
_PREFIX = struct.Struct(">qiibI")
_TAIL = struct.Struct(">hiqqqhii")
BATCH_HEADER_BYTES = 61
# Upper bound of a record's bytes besides key, value and headers: length (5), attributes (1),
# timestamp delta (10), offset delta (5), key and value lengths (5 + 5), header count (5) —
# so an estimated batch is never smaller than its encoding (batches never overshoot limits).
RECORD_OVERHEAD_BYTES = 36


def headers_size(headers: Sequence[tuple[str, bytes | None]]) -> int:
    """Upper bound of the encoded size of a record's headers (besides the count)."""
    return sum(len(k) * 4 + (len(v) if v is not None else 0) + 10 for k, v in headers)


_LOCK = threading.Lock()  # guards batch completion vs. callback registration


class Batch:
    __slots__ = (
        "_callbacks",
        "attempts",
        "base_offset",
        "created_s",
        "data",
        "deadline_s",
        "error",
        "headers",
        "is_done",
        "is_tail",
        "keys",
        "log_append_time_ms",
        "retry_at_s",
        "size_bytes",
        "timestamps",
        "tp",
        "unaccounted_bytes",
        "values",
    )

    def __init__(self, tp: TopicPartition, created_s: float, deadline_s: float) -> None:
        self.tp = tp
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: dict[int, list[tuple[str, bytes | None]]] = {}
        self.size_bytes = 0
        self.created_s = created_s
        self.deadline_s = deadline_s
        self.retry_at_s = 0.0
        self.attempts = 0
        self.data: bytes | None = None  # the encoded batch, kept for retries
        self.is_done = False
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        self._callbacks: list[Callable[[Batch], Any]] = []
        self.is_tail = False  # published in Accumulator.tails (see the module docstring)
        self.unaccounted_bytes = 0  # appended lock-free, not yet in buffered_bytes

    def __len__(self) -> int:
        return len(self.values)

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

    def metadata(self, index: int) -> RecordMetadata:
        key = self.keys[index]
        value = self.values[index]
        return RecordMetadata(
            self.tp.topic,
            self.tp.partition,
            self.base_offset + index if self.base_offset >= 0 else -1,
            self.log_append_time_ms,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )


class RecordFuture(Future):  # type: ignore[type-arg]
    """A ``concurrent.futures.Future[RecordMetadata]`` that costs nothing until used.

    Creating a real Future per record costs ~2 µs (a Condition and an RLock); this one stores
    ``(batch, index)`` in slots. Its public methods (``done``, ``result``, ``exception``,
    ``add_done_callback``, ...) read the batch's shared result directly; it becomes a real
    Future (settled from the batch) only the first time other Future machinery
    (``concurrent.futures.wait``, ``as_completed``) reads one of its (still empty) fields.
    Create one with :func:`record_future` (no ``__init__`` call: ~100 ns cheaper)."""

    __slots__ = (
        "_batch",
        "_condition",
        "_done_callbacks",
        "_exception",
        "_index",
        "_result",
        "_state",
        "_waiters",
    )

    def __init__(self, batch: Batch, index: int) -> None:  # no super().__init__: lazy
        self._batch = batch
        self._index = index

    def __getattr__(self, name: str) -> Any:  # only called for an empty slot
        if name in _LAZY_FIELDS:
            self._materialize()
            return object.__getattribute__(self, name)
        raise AttributeError(name)

    def _materialize(self) -> None:
        with _MATERIALIZE_LOCK:
            try:
                object.__getattribute__(self, "_condition")
                return
            except AttributeError:
                Future.__init__(self)
        self._batch.add_done_callback(self._settle)

    def _settle(self, batch: Batch) -> None:
        if batch.error is not None:
            self.set_exception(batch.error)
        else:
            self.set_result(batch.metadata(self._index))

    # -- the Future API, straight from the batch (delivery cannot be cancelled) -------------
    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._batch.is_done

    def done(self) -> bool:
        return self._batch.is_done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        if not batch.is_done:
            _wait_for(batch, timeout)
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        batch = self._batch
        if not batch.is_done:
            _wait_for(batch, timeout)
        return batch.error

    def add_done_callback(self, fn: Callable[[Future[Any]], object]) -> None:
        """Call ``fn(future)`` once the record is delivered or failed (at once if it is);
        an exception it raises is logged, as ``concurrent.futures`` does."""

        def call(_: Batch) -> None:
            try:
                fn(self)
            except Exception:
                _LOGGER.exception("exception calling callback for %r", self)

        self._batch.add_done_callback(call)


def record_future(batch: Batch, index: int) -> RecordFuture:
    future = _new_object(RecordFuture)
    future._batch = batch
    future._index = index
    return future


def _wait_for(batch: Batch, timeout: float | None) -> None:
    done = threading.Event()
    batch.add_done_callback(lambda _: done.set())
    if not done.wait(timeout):
        raise TimeoutError(f"record not delivered within {timeout} s")


_new_object = object.__new__
_LOGGER = logging.getLogger("client.producer")
_LAZY_FIELDS = frozenset(
    ("_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks")
)
_MATERIALIZE_LOCK = threading.Lock()


class FailedFuture(Future):  # type: ignore[type-arg]
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.set_exception(error)


class Accumulator:
    """Open and ready batches of one producer. Not thread-safe: the caller holds a lock."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_s: float,
        delivery_timeout_s: float,
        on_batch_closed: Callable[[TopicPartition, int], None],
    ) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_s
        self.delivery_timeout_s = delivery_timeout_s
        self.open: dict[TopicPartition, Batch] = {}
        self.ready: deque[Batch] = deque()
        self.buffered_bytes = 0
        self._on_batch_closed = on_batch_closed  # (tp, num records) -> sticky switch
        self.tails: dict[str, Batch] = {}  # lock-free: popped by whoever appends or closes
        self.tail_of: dict[str, Batch] = {}  # each topic's live tail (under the caller's lock)

    def new_batch(self, tp: TopicPartition, now_s: float) -> Batch:
        batch = self.open[tp] = Batch(tp, now_s, now_s + self.delivery_timeout_s)
        return batch

    def make_tail(self, batch: Batch) -> None:
        """Mark the (owned, open) ``batch`` as its topic's tail; the caller publishes it in
        :attr:`tails` when done with it. Only when the topic has no live tail."""
        assert batch.tp.topic not in self.tail_of
        batch.is_tail = True
        self.tail_of[batch.tp.topic] = batch

    def own_tail(self, batch: Batch) -> bool:
        """Take ownership of the tail ``batch`` (pop it from :attr:`tails`); ``False`` while
        another thread holds it."""
        got = self.tails.pop(batch.tp.topic, None)
        if got is batch:
            return True
        if got is not None:  # not ours: put it back (cannot happen while tail_of is kept)
            self.tails[batch.tp.topic] = got
        return False

    def close(self, batch: Batch) -> None:
        """Close an open batch (a tail must be owned: see :meth:`own_tail`)."""
        if self.open.get(batch.tp) is batch:
            del self.open[batch.tp]
            if batch.is_tail:
                batch.is_tail = False
                if self.tail_of.get(batch.tp.topic) is batch:
                    del self.tail_of[batch.tp.topic]
            self.buffered_bytes += batch.unaccounted_bytes
            batch.unaccounted_bytes = 0
            self.ready.append(batch)
            self._on_batch_closed(batch.tp, len(batch))

    def close_expired(self, now_s: float, force: bool) -> bool:
        """Close every open batch whose linger passed (all of them when ``force``). Returns
        ``False`` when a due tail was held by another thread (call again soon)."""
        linger = self.linger_s
        closed_all = True
        for batch in list(self.open.values()):
            if force or now_s - batch.created_s >= linger:
                if batch.is_tail and not self.own_tail(batch):
                    closed_all = False
                    continue
                self.close(batch)
        return closed_all

    def next_wakeup_s(self, now_s: float) -> float | None:
        """Seconds until the next open batch's linger expires or a retry is due."""
        times = [b.created_s + self.linger_s for b in self.open.values()]
        times += [b.retry_at_s for b in self.ready if b.retry_at_s > now_s]
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
            size = len(batch.data) if batch.data is not None else batch.size_bytes
            if taken and total + size > max_request_bytes:
                keep.append(batch)
                continue
            total += size
            taken.append(batch)
        self.ready = keep
        return taken

    compression: Compression = Compression.NONE

    def encode(self, batches: list[Batch]) -> None:
        """Encode batches not encoded yet (a retried batch keeps its bytes)."""
        for batch in batches:
            if batch.data is None:
                batch.data = encode_batch(batch, self.compression)

    def requeue(self, batches: list[Batch]) -> None:
        """Put batches being retried back at the front, keeping their order."""
        self.ready.extendleft(reversed(batches))

    def unfinished(self) -> list[Batch]:
        return [*self.open.values(), *self.ready]


def encode_batch(batch: Batch, compression: Compression = Compression.NONE) -> bytes:
    """The RecordBatch v2 bytes of ``batch`` (base offset 0; the broker assigns offsets)."""
    timestamps = batch.timestamps
    count = len(timestamps)
    base_ts = timestamps[0]
    body = _encode_columns(batch.keys, batch.values, timestamps) if not batch.headers else None
    if body is None:
        body = _encode_loop(batch.keys, batch.values, timestamps, batch.headers)
    attributes = int(compression)
    if compression:
        body = _compression.compress(compression, body)
    tail = _TAIL.pack(attributes, count - 1, base_ts, max(timestamps), -1, -1, -1, count)
    crc = crc32c(body, crc32c(tail))
    prefix = _PREFIX.pack(0, 49 + len(body), -1, 2, crc)
    return b"".join((prefix, tail, body))


# Column tables for the fast path: each record is a few table entries and its key/value.
_LEN = [len(b) for b in _TABLE]
_H0_LEN = [_ZERO + b for b in _TABLE]  # previous record's header count (0) + this length
_ATTR_TS = [_ZERO + b for b in _TABLE]  # record attributes (0) + timestamp delta
_OFF_NULLKEY = [b + _NULL for b in _TABLE]  # offset delta + null key
_OFF_NULLKEY_LEN = [len(b) for b in _OFF_NULLKEY]


def _encode_columns(
    keys: list[bytes | None], values: list[bytes | None], timestamps: list[int]
) -> bytes | None:
    """Records without headers, as whole columns with C-level ``map``s and one join.

    Returns ``None`` when the batch does not fit the tables (then the loop encodes it)."""
    n = len(values)
    limit = _TABLE_LIMIT
    base_ts = timestamps[0]
    if n >= limit or values.count(None) or min(timestamps) < base_ts:
        return None
    if max(timestamps) - base_ts >= limit:
        return None
    null_keys = keys.count(None)
    if null_keys not in (0, n):
        return None
    if null_keys and max(timestamps) - base_ts < 64:
        size = len(values[0])
        if size < _UNIFORM_MAX_BYTES:
            uniform = _encode_uniform(values, timestamps, size)
            if uniform is not None:
                return uniform
    value_lens = list(map(len, values))
    if max(value_lens) >= limit:
        return None
    if timestamps.count(base_ts) == n:
        attr_ts = [_ATTR_TS[0]] * n
        lengths = list(map(add, map(_LEN.__getitem__, value_lens), value_lens))
        const = 3  # attributes + 1-byte timestamp delta + header count
    else:
        attr_ts = list(map(_ATTR_TS.__getitem__, map(sub, timestamps, repeat(base_ts, n))))
        lengths = list(
            map(add, map(len, attr_ts), map(add, map(_LEN.__getitem__, value_lens), value_lens))
        )
        const = 1  # header count
    value_varints = list(map(_TABLE.__getitem__, value_lens))
    if null_keys:
        lengths = list(map(add, lengths, _OFF_NULLKEY_LEN[:n]))
        columns = [None, attr_ts, _OFF_NULLKEY[:n], value_varints, values]
    else:
        key_lens = list(map(len, keys))  # type: ignore[arg-type]
        if max(key_lens) >= limit:
            return None
        lengths = list(map(add, lengths, map(add, map(_LEN.__getitem__, key_lens), key_lens)))
        lengths = list(map(add, lengths, _LEN[:n]))
        columns = [
            None,
            attr_ts,
            _TABLE[:n],
            list(map(_TABLE.__getitem__, key_lens)),
            keys,
            value_varints,
            values,
        ]
    lengths = list(map(add, lengths, repeat(const, n)))
    if max(lengths) >= limit:
        return None
    length_varints = list(map(_H0_LEN.__getitem__, lengths))
    length_varints[0] = _TABLE[lengths[0]]
    columns[0] = length_varints
    width = len(columns)
    parts: list[bytes | None] = [None] * (width * n + 1)
    for j, column in enumerate(columns):
        parts[j : width * n : width] = column
    parts[-1] = _NO_HEADERS  # the last record's header count
    return b"".join(parts)  # type: ignore[arg-type]


_UNIFORM_MAX_BYTES = _TABLE_LIMIT - 16  # record length varints stay in the tables
_UNIFORM: dict[int, tuple[list[bytes], list[bytes]]] = {}  # value size -> (heads, mids)


def _uniform_tables(size: int) -> tuple[list[bytes], list[bytes]]:
    """For null-key records of ``size``-byte values with 1-byte timestamp deltas, per offset
    delta i: ``heads[i]`` = previous record's header count (0) + this record's length +
    attributes (0); ``mids[i]`` = offset delta + null key + value length. Built once per size
    (a few sizes are kept)."""
    tables = _UNIFORM.get(size)
    if tables is None:
        value_len = _TABLE[size]
        const = 4 + len(value_len) + size  # attrs, ts delta, null key, headers + value
        heads = [_ZERO + _TABLE[const + n] + _ZERO for n in _LEN]
        mids = [b + b"\x01" + value_len for b in _TABLE]
        if len(_UNIFORM) >= 4:
            _UNIFORM.clear()
        tables = _UNIFORM[size] = (heads, mids)
    return tables


def _encode_uniform(values: list[bytes], timestamps: list[int], size: int) -> bytes | None:
    """Null-key records whose values all have ``size`` bytes and whose timestamp deltas fit
    one byte (the caller checked those and the batch size): four table columns and one join.
    ``None`` when a value has another size."""
    n = len(values)
    if list(map(len, values)).count(size) != n:
        return None
    heads, mids = _uniform_tables(size)
    base_ts = timestamps[0]
    if timestamps.count(base_ts) == n:
        ts_column = [_TABLE[0]] * n
    else:
        ts_column = list(map(_TABLE.__getitem__, map(sub, timestamps, repeat(base_ts, n))))
    parts: list[bytes | None] = [None] * (4 * n + 1)
    parts[0 : 4 * n : 4] = heads[:n]
    parts[0] = heads[0][1:]  # the first record has no previous header count
    parts[1 : 4 * n : 4] = ts_column
    parts[2 : 4 * n : 4] = mids[:n]
    parts[3 : 4 * n : 4] = values
    parts[-1] = _NO_HEADERS  # the last record's header count
    return b"".join(parts)  # type: ignore[arg-type]


def _encode_loop(
    keys: list[bytes | None],
    values: list[bytes | None],
    timestamps: list[int],
    headers: dict[int, list[tuple[str, bytes | None]]],
) -> bytes:
    """Any batch (headers, null values, huge fields), one record at a time."""
    base_ts = timestamps[0]
    table = _TABLE
    limit = _TABLE_LIMIT
    null = _NULL
    zero = _ZERO
    no_headers = _NO_HEADERS
    parts: list[bytes] = []
    extend = parts.extend
    for i in range(len(values)):
        key = keys[i]
        value = values[i]
        delta = timestamps[i] - base_ts
        ts_b = table[delta] if 0 <= delta < limit else encode_varint(delta)
        off_b = table[i] if i < limit else encode_varint(i)
        if key is None:
            key_b = null
            key = b""
        else:
            n = len(key)
            key_b = table[n] if n < limit else encode_varint(n)
        if value is None:
            value_b = null
            value = b""
        else:
            n = len(value)
            value_b = table[n] if n < limit else encode_varint(n)
        h = no_headers if i not in headers else _encode_headers(headers[i])
        length = (
            1 + len(ts_b) + len(off_b) + len(key_b) + len(key) + len(value_b) + len(value) + len(h)
        )
        extend(
            (
                table[length] if length < limit else encode_varint(length),
                zero,
                ts_b,
                off_b,
                key_b,
                key,
                value_b,
                value,
                h,
            )
        )
    return b"".join(parts)


def _encode_headers(headers: list[tuple[str, bytes | None]]) -> bytes:
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        key_bytes = key.encode()
        parts += (encode_varint(len(key_bytes)), key_bytes)
        if value is None:
            parts.append(_NULL)
        else:
            parts += (encode_varint(len(value)), value)
    return b"".join(parts)
