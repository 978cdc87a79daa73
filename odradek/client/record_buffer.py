"""The records of one producer batch, and ``send()``'s lock-free append to a topic's tail.

Two implementations with one behaviour: ``odradek.client._record_buffer`` (C, built by ``pip
install`` where a compiler is present; see :mod:`odradek.client.native`) and the pure-Python classes
below. :data:`RecordBuffer` and :data:`TailAppender` name the one in use; the tests run both.

:class:`PyRecordBuffer` keeps a batch's records as columns (values, keys, timestamps, headers)
and encodes them once, in :meth:`~PyRecordBuffer.body`, into a RecordBatch v2 *records
section* (what follows the 61-byte batch header; record layout in ``odradek.protocol.records``): the
commonest batch — null keys, values of one size, timestamp deltas under 64 ms — as four table
columns and one ``b"".join`` (:func:`_encode_uniform`); other header-less batches as whole
columns (:func:`_encode_columns`); the rest one record at a time (:func:`_encode_loop`). The C
buffer encodes each record as it is appended. Both keep:

- ``size_bytes``: the producer's *estimate* of the records' size, checked against
  ``batch_size`` and ``buffer_memory``: per record :func:`record_size` — key + value +
  ``RECORD_OVERHEAD_BYTES`` + an upper bound per header — never below the encoding;
- ``first_timestamp_ms`` (timestamp deltas are relative to it) and ``max_timestamp_ms``;
- ``sizes(i)``: record i's key and value sizes (-1 for null), for ``RecordMetadata``.

:class:`PyTailAppender` is the lock-free fast path of ``Producer.send()`` for a null-key record
without headers: ``append(topic, value)`` takes the topic's tail batch out of ``tails``
(whoever removed it owns it: see :mod:`odradek.client.accumulator`), appends the record stamped with
the wall clock, puts the batch back and returns ``RecordFuture(batch, index)``; ``None`` when
it cannot (no tail to take, tail full, value not ``bytes``, closed) and the caller takes the
locked path.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import repeat
from operator import add, sub
from typing import Any

from odradek.client import native
from odradek.protocol.varint import encode_varint

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

    def sizes(self, index: int) -> tuple[int, int]:
        key = self.keys[index]
        value = self.values[index]
        return (-1 if key is None else len(key), -1 if value is None else len(value))

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
        int64 row numbers) whose value and key are those rows of ``values`` and ``keys``: each
        ``None`` (all null) or an Arrow binary/string column as ``(offsets, data, validity or
        None, array offset)``. Stops before the record that would take ``size_bytes`` past
        ``limit_bytes`` (an empty buffer takes one anyway); no headers, every record stamped
        ``timestamp_ms``. Returns where it stopped."""
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
        """The encoded records."""
        if not self.values:
            return b""
        if not self.headers:
            columns = _encode_columns(self.keys, self.values, self.timestamps)
            if columns is not None:
                return columns
        return _encode_loop(self.keys, self.values, self.timestamps, self.headers)


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
    """``Producer.send()``'s lock-free append of a null-key record to a topic's tail batch
    (whose records are a :class:`PyRecordBuffer`)."""

    __slots__ = ("_future_type", "_limit_bytes", "_tails", "closed")

    def __init__(self, tails: dict[str, Any], limit_bytes: int, future_type: type) -> None:
        self._tails = tails
        self._limit_bytes = limit_bytes
        self._future_type = future_type
        self.closed = False  # set when the producer closes: every send takes the locked path

    def append(self, topic: str, value: object) -> Any:
        """A ``RecordFuture`` for the appended record, or ``None`` (take the locked path)."""
        if self.closed or type(value) is not bytes:
            return None
        tails = self._tails
        batch = tails.pop(topic, None)  # now ours alone
        if batch is None:
            return None
        records: PyRecordBuffer = batch.records  # PyRecordBuffer.append, inlined
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


_compiled = native.load("_record_buffer")
RecordBuffer: Any = PyRecordBuffer if _compiled is None else _compiled.RecordBuffer
TailAppender: Any = PyTailAppender if _compiled is None else _compiled.TailAppender
if _compiled is not None:
    assert _compiled.RECORD_OVERHEAD_BYTES == RECORD_OVERHEAD_BYTES


# -- encoding the columns -------------------------------------------------------------------

_TABLE = [encode_varint(n) for n in range(1 << 15)]
_TABLE_LIMIT = len(_TABLE)
_NULL = encode_varint(-1)
_ZERO = b"\x00"
_NO_HEADERS = encode_varint(0)
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
