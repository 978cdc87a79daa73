"""The pure-Python encoding of a batch's records (the C buffer, ``odradek.client._record_buffer``,
encodes each record as it is appended): the RecordBatch v2 *records section*, what follows
the 61-byte batch header (record layout in :mod:`odradek.protocol.records`).

Per record Python does a handful of C-level operations (docs/architecture.md §11): the
commonest batch — null keys, values of one size, timestamp deltas under 64 ms — is four table
columns and one ``b"".join`` (:func:`_encode_uniform`); other header-less batches are whole
columns built with ``map`` (:func:`_encode_columns`); the rest is encoded one record at a time
(:func:`_encode_loop`). The tables hold the varints of 0..32767, built once.
"""

from __future__ import annotations

from itertools import repeat
from operator import add, sub

from odradek.protocol.varint import encode_varint

__all__ = ["encode_records"]


def encode_records(
    keys: list[bytes | None],
    values: list[bytes | None],
    timestamps: list[int],
    headers: dict[int, list[tuple[str, bytes | None]]],
) -> bytes:
    """The records section of records given as columns (``headers``: index -> headers, for
    the records that have some)."""
    if not values:
        return b""
    if not headers:
        columns = _encode_columns(keys, values, timestamps)
        if columns is not None:
            return columns
    return _encode_loop(keys, values, timestamps, headers)


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
