"""The pure-Python decoder of a RecordBatch v2 body (the records after the batch header) into
columns (:class:`Columns`), used when the C one (``odradek.client._record_decoder``) is not: runs of
same-layout records a run at a time (:func:`fast_run`), the rest a record at a time
(:func:`decode_loop`); :func:`odradek.client.records.decode_columns` drives them.

A producer's batch is mostly records of one size: then every record has the same layout
(widths of the varints, key and value lengths) except its offset delta, which grows by one
per record, and its timestamp delta (1 or 2 bytes). A run of k such records of S bytes from
``pos`` is checked with strided slices (``body[pos + j : end : S]`` is byte j of every
record, one C-level copy) against the expected bytes — the constant bytes equal the first
record's, the timestamp bytes have the right continuation bits, the offset delta bytes equal
those of ``index .. index + k - 1`` — and its keys and values are cut out by one ``struct``
pass; no Python code runs per record. A run that fails the check is shortened (binary search)
to its longest valid prefix, so the records decoded are exactly those the loop would decode.

Everything else goes through :func:`decode_loop`, one record at a time, which also checks
every rule a body must follow — the same rules as the C decoder (``client/_record_decoder.c``,
whose comment lists them): varints of at most 5 bytes / 32 bits (varlongs 10 / 64), each
record's length equal to its fields' size, key/value/header value lengths of at least -1
(-1: null, in any encoding), header counts and key lengths of at least 0, UTF-8 header keys.
A run is only taken by :func:`fast_run` if the loop would accept it (its varints are short
and canonical), so which bodies are rejected does not depend on the path.
"""

from __future__ import annotations

import struct
from itertools import repeat
from operator import add, itemgetter

from odradek.protocol.record_batch import CorruptRecordError
from odradek.protocol.varint import VarintError, decode_varint, encode_varint

__all__ = ["FAST_MIN_RECORDS", "Columns", "decode_loop", "fast_run"]

_first = itemgetter(0)
_second = itemgetter(1)


class Columns:
    """The decoded fields of a batch's records, one list per field. ``offset_deltas`` is
    only filled once a record's delta differs from its index (``sequential`` is then false);
    ``keys`` stays ``None`` while every key is null."""

    __slots__ = (
        "base_ts",
        "headers_at",
        "keys",
        "offset_deltas",
        "sequential",
        "timestamps",
        "values",
    )

    def __init__(self, base_ts: int) -> None:
        self.base_ts = base_ts
        self.offset_deltas: list[int] = []
        self.sequential = True
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] | None = None
        self.values: list[bytes | None] = []
        self.headers_at: dict[int, list[tuple[str, bytes | None]]] = {}


FAST_MIN_RECORDS = 8
_ZIGZAG_1 = [(b >> 1) ^ -(b & 1) for b in range(128)]  # one-byte varint -> value
# two-byte varint (first byte b0 >= 128, second b1 < 128) -> value, at b0 + _HIGH_7[b1]
_HIGH_7 = [(b << 7) - 128 for b in range(128)]
_ZIGZAG_2 = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]
_OFFSET_LIMITS = (64, 8192, 1 << 18)  # deltas below these take 1, 2, 3 bytes (fast path)


def _offset_columns() -> list[list[bytes]]:
    """``_OFFSET_BYTES[w - 1][j][n]``: byte j of the varint of offset delta n, for the deltas
    whose varint takes w bytes (bytes objects, sliced per run). Built from repeated patterns
    (byte j of 2n's varint cycles with period 2**(7j + 6)), not a Python loop per delta."""
    low7 = bytes(range(0, 128, 2))  # (2n) & 0x7F for n mod 64
    cont = bytes(b | 0x80 for b in low7)
    groups = [bytes([b]) * 64 for b in range(128)]  # (n >> 6) & 0x7F, each repeated 64 times
    mid_cont = b"".join(bytes([b | 0x80]) * 64 for b in range(128))
    one = [low7]
    two = [cont * 128, b"".join(groups)]
    high = _OFFSET_LIMITS[2]
    three = [
        cont * (high // 64),
        mid_cont * (high // 8192),
        b"".join(bytes([b]) * 8192 for b in range(high // 8192)),
    ]
    return [one, two, three]


_OFFSET_BYTES = _offset_columns()
_STRUCTS: dict[tuple[int, int, int, int, int], struct.Struct] = {}


def _varint_width(body: bytes, pos: int) -> int:
    width = 1
    while body[pos] >= 128:
        pos += 1
        width += 1
        if width > 3:
            raise IndexError("long varint")
    return width


def fast_run(
    body: bytes, view: memoryview, pos: int, index: int, count: int, cols: Columns
) -> tuple[int, int] | None:
    """Decode the longest run of records from ``index`` (at ``pos``) sharing the layout of
    that record; ``None`` when that record does not fit the fast path (the loop takes over:
    it also reports any corruption)."""
    try:
        width_len = _varint_width(body, pos)
        length, start = decode_varint(body, pos)
        size = width_len + length  # S: bytes of each record of the run
        p = start + 1  # attributes byte skipped (unused)
        ts_at = p - pos
        width_ts = _varint_width(body, p)  # timestamp delta: one or two bytes
        if width_ts > 2:
            return None
        p += width_ts
        width_off = _varint_width(body, p)
        if width_off > 3 or body[p : p + width_off] != encode_varint(index):
            return None
        off_at = p - pos
        p += width_off
        key_at = p - pos
        if body[p] == 1:  # null key: the marker byte
            key_len = -1
            p += 1
            key_data_at = p - pos
        else:
            _varint_width(body, p)  # a longer one goes to the loop (it may be overlong)
            key_len, p = decode_varint(body, p)
            if key_len < 0:
                return None
            key_data_at = p - pos
            p += key_len
        value_len_at = p - pos
        _varint_width(body, p)
        value_len, p = decode_varint(body, p)
        if value_len < 0:
            return None
        value_at = p - pos
        p += value_len
        if body[p] != 0 or p + 1 - pos != size:  # headers (or an inconsistent length)
            return None
    except (IndexError, VarintError):
        return None
    limit = min(count - index, _OFFSET_LIMITS[width_off - 1] - index, (len(body) - pos) // size)
    if limit <= 0:
        return None
    # bytes equal in every record of the run: the length, the key marker or key length, the
    # value length, the header count
    constant = [
        *range(width_len),
        *range(key_at, key_data_at),
        *range(value_len_at, value_at),
        size - 1,
    ]
    layout = (size, constant, ts_at, width_ts, off_at, width_off)
    run = _verified_run(body, pos, index, limit, layout)
    end = pos + run * size
    tcol = body[pos + ts_at : end : size]  # the timestamp deltas' first bytes
    base_ts = cols.base_ts
    if width_ts == 2:
        high = body[pos + ts_at + 1 : end : size]
        cols.timestamps += map(
            add,
            repeat(base_ts),
            map(_ZIGZAG_2.__getitem__, map(add, tcol, map(_HIGH_7.__getitem__, high))),
        )
    elif tcol.count(tcol[0]) == run:  # one shared int for the run
        cols.timestamps += repeat(base_ts + _ZIGZAG_1[tcol[0]], run)
    elif run >= 256:  # shared ints: one per distinct delta
        table = [base_ts + z for z in _ZIGZAG_1]
        cols.timestamps += map(table.__getitem__, tcol)
    else:
        cols.timestamps += map(add, repeat(base_ts), map(_ZIGZAG_1.__getitem__, tcol))
    if not cols.sequential:
        cols.offset_deltas += range(index, index + run)
    shape = (key_data_at, key_len, value_at, value_len, size)
    unpack = _STRUCTS.get(shape)
    if unpack is None:
        unpack = _STRUCTS[shape] = _record_struct(*shape)
    if key_len < 0:
        if cols.keys is not None:
            cols.keys += repeat(None, run)
        cols.values += map(_first, unpack.iter_unpack(view[pos:end]))
    else:
        pairs = list(unpack.iter_unpack(view[pos:end]))
        if cols.keys is None:
            cols.keys = [None] * len(cols.values)
        cols.keys += map(_first, pairs)
        cols.values += map(_second, pairs)
    return end, index + run


Layout = tuple[int, list[int], int, int, int, int]  # size, constant, ts at/width, off at/width


def _verified_run(body: bytes, pos: int, index: int, limit: int, layout: Layout) -> int:
    """How many records (1 to ``limit``) from ``pos`` have the first one's layout: the
    longest prefix passing :func:`_run_ok` (binary search; the first record passes)."""
    if _run_ok(body, pos, index, limit, layout):
        return limit
    good, bad = 1, limit  # _run_ok(good) holds, _run_ok(bad) does not
    while bad - good > 1:
        mid = (good + bad) // 2
        if _run_ok(body, pos, index, mid, layout):
            good = mid
        else:
            bad = mid
    return good


def _run_ok(body: bytes, pos: int, index: int, run: int, layout: Layout) -> bool:
    """Whether records ``index`` .. ``index + run - 1`` (from ``pos``) all have ``layout``:
    the same constant bytes, timestamp deltas of the same width, offset deltas = indexes."""
    size, constant, ts_at, width_ts, off_at, width_off = layout
    end = pos + run * size
    for j in constant:
        if body[pos + j : end : size] != body[pos + j : pos + j + 1] * run:
            return False
    first = body[pos + ts_at : end : size]
    if width_ts == 1:
        if max(first) >= 128:
            return False
    elif min(first) < 128 or max(body[pos + ts_at + 1 : end : size]) >= 128:
        return False
    expected = _OFFSET_BYTES[width_off - 1]
    for j in range(width_off):
        if body[pos + off_at + j : end : size] != expected[j][index : index + run]:
            return False
    return True


def _record_struct(
    key_at: int, key_len: int, value_at: int, value_len: int, size: int
) -> struct.Struct:
    """A struct cutting the value (and the key, if not null) out of one record."""
    if key_len < 0:
        return struct.Struct(f"{value_at}x{value_len}s{size - value_at - value_len}x")
    gap = value_at - key_at - key_len
    return struct.Struct(f"{key_at}x{key_len}s{gap}x{value_len}s{size - value_at - value_len}x")


def decode_loop(body: bytes, pos: int, first: int, count: int, cols: Columns) -> int:
    """Records ``first`` .. ``count - 1`` from ``pos``, one at a time (any layout: varints
    of one and two bytes inline, headers), checking every rule; returns the position after
    the last one. A field running past the body raises IndexError (slices clip: the caller
    checks that the body ends where the last record does)."""
    if cols.sequential:
        cols.offset_deltas = list(range(first))
        cols.sequential = False
    if cols.keys is None:
        cols.keys = [None] * first
    one = _ZIGZAG_1
    two = _ZIGZAG_2  # at b0 + high[b1]
    high = _HIGH_7
    base_ts = cols.base_ts
    headers_at = cols.headers_at
    add_offset = cols.offset_deltas.append
    add_ts = cols.timestamps.append
    add_key = cols.keys.append
    add_value = cols.values.append
    for index in range(first, count):
        b = body[pos]  # the record length; then the attributes byte, skipped
        if b < 128:
            end = pos + 1 + one[b]
            pos += 2
        elif body[pos + 1] < 128:
            end = pos + 2 + two[b + high[body[pos + 1]]]
            pos += 3
        else:
            n, pos = varint(body, pos)
            end = pos + n
            pos += 1
        b = body[pos]
        if b < 128:
            add_ts(base_ts + one[b])
            pos += 1
        elif body[pos + 1] < 128:
            add_ts(base_ts + two[b + high[body[pos + 1]]])
            pos += 2
        else:
            n, pos = varlong(body, pos)
            add_ts(base_ts + n)
        b = body[pos]
        if b < 128:
            add_offset(one[b])
            pos += 1
        elif body[pos + 1] < 128:
            add_offset(two[b + high[body[pos + 1]]])
            pos += 2
        else:
            n, pos = varint(body, pos)
            add_offset(n)
        b = body[pos]
        if b < 128:
            n = one[b]
            pos += 1
        else:
            n, pos = varint(body, pos)
        if n >= 0:
            add_key(body[pos : pos + n])
            pos += n
        elif n == -1:
            add_key(None)
        else:
            raise CorruptRecordError(f"record {index}: invalid key length {n}")
        b = body[pos]
        if b < 128:
            n = one[b]
            pos += 1
        elif body[pos + 1] < 128:
            n = two[b + high[body[pos + 1]]]
            pos += 2
        else:
            n, pos = varint(body, pos)
        if n >= 0:
            add_value(body[pos : pos + n])
            pos += n
        elif n == -1:
            add_value(None)
        else:
            raise CorruptRecordError(f"record {index}: invalid value length {n}")
        if body[pos] == 0:
            pos += 1
        else:
            headers_at[index], pos = _headers(body, pos, index)
        if pos != end:
            raise CorruptRecordError(f"record {index}: its length disagrees with its fields")
    return pos


def _headers(body: bytes, pos: int, index: int) -> tuple[list[tuple[str, bytes | None]], int]:
    count, pos = varint(body, pos)
    if count < 0 or count > len(body) - pos:
        raise CorruptRecordError(f"record {index}: invalid header count {count}")
    out = []
    for _ in range(count):
        n, pos = varint(body, pos)
        if n < 0 or pos + n > len(body):
            raise CorruptRecordError(f"record {index}: invalid header key length {n}")
        try:
            key = body[pos : pos + n].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError(f"record {index}: header key is not UTF-8") from None
        pos += n
        n, pos = varint(body, pos)
        if n >= 0:
            out.append((key, body[pos : pos + n]))
            pos += n
        elif n == -1:
            out.append((key, None))
        else:
            raise CorruptRecordError(f"record {index}: invalid header value length {n}")
    return out, pos


def varint(body: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (at most 5 bytes, 32 bits) at ``body[pos]``; ``(value, next_pos)``."""
    return _zigzag(body, pos, 28, 0x0F, "varint longer than 5 bytes or beyond 32 bits")


def varlong(body: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varlong (at most 10 bytes, 64 bits) at ``body[pos]``; ``(value, next_pos)``."""
    return _zigzag(body, pos, 63, 0x01, "varlong longer than 10 bytes or beyond 64 bits")


def _zigzag(body: bytes, pos: int, last_shift: int, last_max: int, error: str) -> tuple[int, int]:
    """A zig-zag LEB128 number whose byte at ``last_shift`` (the last one allowed) is at most
    ``last_max``: longer or bigger is corrupt."""
    raw = shift = 0
    while True:
        b = body[pos]
        pos += 1
        if shift == last_shift and b > last_max:
            raise CorruptRecordError(error)
        raw |= (b & 0x7F) << shift
        if b < 128:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
