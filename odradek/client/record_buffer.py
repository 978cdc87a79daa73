"""The records of one producer batch, and ``send()``'s lock-free append to a topic's tail.

Two implementations with one behaviour: ``odradek.client._record_buffer`` (C, built by ``pip
install`` where a compiler is present; loaded by :mod:`odradek.protocol.native`) and the
pure-Python classes below. :data:`RecordBuffer` and :data:`TailAppender` name the one in use;
the tests run both.

:class:`PyRecordBuffer` keeps a batch's records as columns (values, keys, timestamps, headers)
and encodes them once, in :meth:`~PyRecordBuffer.body`, into a RecordBatch v2 *records
section* (what follows the 61-byte batch header; record layout in ``odradek.protocol.records``)
with :func:`odradek.protocol.batch_builder.encode_record`. The C buffer encodes each record as
it is appended. Both keep:

- ``size_bytes``: the producer's *estimate* of the records' size, checked against
  ``batch_size`` and ``buffer_memory``: per record :func:`record_size` — key + value +
  ``RECORD_OVERHEAD_BYTES`` + an upper bound per header — never below the encoding;
- ``first_timestamp_ms`` (timestamp deltas are relative to it) and ``max_timestamp_ms``;
- ``metadata(i)``: record i's timestamp, and key and value sizes (-1 for null), for
  ``RecordMetadata``.

:class:`PyTailAppender` is ``send()``'s lock-free append of a null-key record without headers,
stamped with the wall clock, to its topic's tail batch (how a tail is owned:
:mod:`odradek.client.accumulator`). ``append(topic, value)`` returns the face's delivery object
(a ``RecordFuture`` or a ``DeliveryHandle`` of ``(batch, index)``), or ``None`` when it cannot
(no tail to take, tail full, value not ``bytes``, closed) and the caller takes the locked path.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from odradek.protocol import native
from odradek.protocol.batch_builder import encode_record

__all__ = [
    "RECORD_OVERHEAD_BYTES",
    "PyRecordBuffer",
    "PyTailAppender",
    "RecordBuffer",
    "TailAppender",
    "record_size",
]

# Upper bound of a record's bytes besides key, value and headers: length (5), attributes (1),
# timestamp delta (10), offset delta (5), key and value lengths (5 + 5), header count (5) —
# so an estimated batch is never smaller than its encoding (batches never overshoot limits).
RECORD_OVERHEAD_BYTES = 36

Headers = list[tuple[str, bytes | None]]
# An Arrow binary/string column: int32 offsets, data, validity bitmap (or None), array offset
Column = tuple[Any, Any, Any, int]


def _cell(column: Column | None, row: int) -> bytes | None:
    """Element ``row`` of an Arrow-layout column (see :data:`Column`); ``None`` when null."""
    if column is None:
        return None
    offsets, data, validity, first = column
    i = row + first
    if row < 0 or (i + 2) * 4 > memoryview(offsets).nbytes:
        raise ValueError(f"row {row} is outside the column")
    if validity is not None:
        bits = memoryview(validity).cast("B")
        if i // 8 >= len(bits):
            raise ValueError("validity bitmap too short")
        if not (bits[i // 8] >> (i % 8)) & 1:
            return None
    bounds = memoryview(offsets).cast("B").cast("i")
    begin, end = bounds[i], bounds[i + 1]
    raw = memoryview(data).cast("B")
    if begin < 0 or end < begin or end > len(raw):
        raise ValueError("column offsets outside the data buffer")
    return bytes(raw[begin:end])


def record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """The estimate a record adds to ``size_bytes`` (an upper bound of its encoding)."""
    size = RECORD_OVERHEAD_BYTES + (0 if key is None else len(key))
    size += 0 if value is None else len(value)
    if headers:
        size += sum(len(k) * 4 + (len(v) if v is not None else 0) + 10 for k, v in headers)
    return size


class PyRecordBuffer:
    """A batch's records as columns, encoded once by :meth:`body`."""

    __slots__ = ("first_timestamp_ms", "headers", "keys", "size_bytes", "timestamps", "values")

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: dict[int, Headers] = {}  # index -> headers, only for records with some
        self.size_bytes = 0
        self.first_timestamp_ms = -1

    def __len__(self) -> int:
        return len(self.values)

    @property
    def max_timestamp_ms(self) -> int:
        return max(self.timestamps) if self.timestamps else -1

    def append(
        self, value: bytes | None, key: bytes | None, timestamp_ms: int, headers: Headers | None
    ) -> int:
        """Add one record; returns its index (offset delta)."""
        for field, what in ((value, "value"), (key, "key")):
            if field is not None and not isinstance(field, bytes):
                raise TypeError(f"record {what} must be bytes or None, not {type(field).__name__}")
        headers = _checked(headers) if headers else None
        index = len(self.values)
        if not index:
            self.first_timestamp_ms = timestamp_ms
        self.values.append(value)
        self.keys.append(key)
        self.timestamps.append(timestamp_ms)
        if headers:
            self.headers[index] = headers
        self.size_bytes += record_size(key, value, headers)
        return index

    def metadata(self, index: int) -> tuple[int, int, int]:
        key = self.keys[index]
        value = self.values[index]
        key_size = -1 if key is None else len(key)
        return self.timestamps[index], key_size, -1 if value is None else len(value)

    def extend(
        self,
        values: Column | None,
        keys: Column | None,
        rows: Any,
        start: int,
        timestamp_ms: int,
        limit_bytes: int,
    ) -> int:
        """Append the records ``rows[start]``, ``rows[start + 1]``, ... (``rows``: a buffer of
        int64 row numbers) whose value and key are those rows of ``values`` and ``keys`` (each
        a :data:`Column`, or ``None``: all null). Stops before the record that would take
        ``size_bytes`` past ``limit_bytes`` (an empty buffer takes one anyway); no headers,
        every record stamped ``timestamp_ms``. Returns where it stopped."""
        numbers = memoryview(rows).cast("B").cast("q")
        start = max(start, 0)
        while start < len(numbers):
            row = numbers[start]
            value = _cell(values, row)
            key = _cell(keys, row)
            if self.values and self.size_bytes + record_size(key, value, None) > limit_bytes:
                break
            self.append(value, key, timestamp_ms, None)
            start += 1
        return start

    def body(self) -> bytes:
        """The encoded records, one at a time (the layout's one pure-Python encoder)."""
        base_ts = self.first_timestamp_ms
        headers = self.headers
        records = zip(self.keys, self.values, self.timestamps, strict=True)
        return b"".join(
            [
                encode_record(i, ts - base_ts, key, value, headers.get(i))
                for i, (key, value, ts) in enumerate(records)
            ]
        )


def _checked(headers: Sequence[tuple[str, bytes | None]]) -> Headers:
    """``headers`` as a list of (str, bytes | None) tuples, or TypeError."""
    out = []
    for pair in headers:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError("a header must be a (str, bytes | None) tuple")
        key, value = pair
        if not isinstance(key, str):
            raise TypeError(f"header key must be str, not {type(key).__name__}")
        if value is not None and not isinstance(value, bytes):
            raise TypeError(
                f"record header value must be bytes or None, not {type(value).__name__}"
            )
        out.append((key, value))
    return out


_time_ns = time.time_ns
_new_object = object.__new__


class PyTailAppender:
    """The lock-free tail append (see the module), into :class:`PyRecordBuffer` records."""

    __slots__ = ("_future_type", "_limit_bytes", "_tails", "closed")

    def __init__(self, tails: dict[str, Any], limit_bytes: int, future_type: type) -> None:
        self._tails = tails
        self._limit_bytes = limit_bytes
        self._future_type = future_type
        self.closed = False  # set when the producer closes: every send takes the locked path

    def append(self, topic: str, value: object) -> Any:
        """The delivery object of the appended record, or ``None`` (take the locked path)."""
        if self.closed or type(value) is not bytes:
            return None
        tails = self._tails
        batch = tails.pop(topic, None)  # now ours alone
        if batch is None:
            return None
        records: PyRecordBuffer = batch.records  # PyRecordBuffer.append, inlined (1.5x faster)
        size = len(value) + RECORD_OVERHEAD_BYTES
        if records.size_bytes + size > self._limit_bytes:
            tails[topic] = batch
            return None  # full: the locked path closes it
        values = records.values
        index = len(values)
        timestamp_ms = _time_ns() // 1_000_000
        if not index:
            records.first_timestamp_ms = timestamp_ms
        values.append(value)
        records.keys.append(None)
        records.timestamps.append(timestamp_ms)
        records.size_bytes += size
        future = _new_object(self._future_type)
        future._batch = batch
        future._index = index
        tails[topic] = batch
        return future


_compiled = native.load("odradek.client._record_buffer")
RecordBuffer: Any = PyRecordBuffer if _compiled is None else _compiled.RecordBuffer
TailAppender: Any = PyTailAppender if _compiled is None else _compiled.TailAppender
if _compiled is not None:
    assert _compiled.RECORD_OVERHEAD_BYTES == RECORD_OVERHEAD_BYTES
