"""The pure-Python encoding of a batch's records (the C buffer, ``odradek.client._record_buffer``,
encodes each record as it is appended): the RecordBatch v2 *records section*, what follows
the 61-byte batch header (record layout in :mod:`odradek.protocol.records`).

The commonest batch — null keys, values of one size, timestamp deltas under 64 ms — is four
table columns and one ``b"".join``, a handful of C-level operations per record
(:func:`_encode_uniform`); any other is encoded one record at a time (:func:`_encode_loop`).
The tables hold the varints of 0..32767, built once.
"""

from __future__ import annotations

from itertools import repeat
from operator import sub

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
        uniform = _encode_uniform(keys, values, timestamps)
        if uniform is not None:
            return uniform
    return _encode_loop(keys, values, timestamps, headers)


_TABLE = [encode_varint(n) for n in range(1 << 15)]
_TABLE_LIMIT = len(_TABLE)
_NULL = encode_varint(-1)
_ZERO = b"\x00"
_NO_HEADERS = encode_varint(0)
_LEN = [len(b) for b in _TABLE]
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


def _encode_uniform(
    keys: list[bytes | None], values: list[bytes | None], timestamps: list[int]
) -> bytes | None:
    """Null-key records whose values all have one size and whose timestamp deltas fit one
    byte (the commonest batch): four table columns and one join. ``None`` for any other
    batch (the loop encodes it)."""
    n = len(values)
    base_ts = timestamps[0]
    if n >= _TABLE_LIMIT or keys.count(None) != n or values.count(None):
        return None
    if min(timestamps) < base_ts or max(timestamps) - base_ts >= 64:
        return None
    size = len(values[0])  # type: ignore[arg-type]
    if size >= _UNIFORM_MAX_BYTES or list(map(len, values)).count(size) != n:  # type: ignore[arg-type]
        return None
    heads, mids = _uniform_tables(size)
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
