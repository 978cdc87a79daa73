"""RecordBatch v2 record sections → Arrow column buffers, in Python with numpy.

The pure-Python twin of the compiled ``odradek.spark._arrow_records`` (``_arrow_records.c``):
same function, same arguments, same result, and it accepts and rejects exactly the same
bodies (the rules are stated once, at the top of the C file; tests/spark/test_arrow_records.py
checks both against each other with hypothesis). :mod:`odradek.spark.decode` picks the compiled
one when it is built and ``NO_ODRADEK_EXTENSIONS`` is unset.

How, for all the bodies of one fetch at once:

1. Join the bodies into one buffer (plus zero padding, so vectorized reads past a malformed
   record stay in bounds) and walk the record-length varints: each record's start (a loop of a
   few C-level operations per record, the only per-record Python work).
2. With numpy, decode every record's varints (timestamp delta, offset delta, key length,
   value length, header count) for all records at once and check the rules.
3. Keys and values become Arrow ``binary_view`` arrays pointing into the buffer (16 bytes per
   record, no copy), cast to ``binary`` in one Arrow kernel; their buffers are returned.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from odradek.protocol.record_batch import CorruptRecordError
from odradek.protocol.varint import VarintError, decode_varint

__all__ = ["records_to_columns"]

_PAD = bytes(64)  # > the 31 bytes a record's leading varints can span
_MIN_RECORD_BYTES = 6  # attributes, timestamp delta, offset delta, key, value, header count

Binary = tuple[object, object, object | None] | None


def records_to_columns(
    bodies: list[bytes | memoryview],
    counts: list[int],
    base_offsets: list[int],
    base_timestamps: list[int],
    append_timestamps: list[int],
    from_offset: int,
    until_offset: int,
    want_key: bool,
    want_value: bool,
    want_headers: bool,
) -> tuple[int, Binary, Binary, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """``(n, key, value, offsets, timestamps_us, timestamp_types, header_spans)``: see the
    C module's header for each item's layout."""
    sizes = [len(b) for b in bodies]
    buf = b"".join([*bodies, _PAD])
    begins = np.array(_chain(buf, sizes, counts), dtype=np.int64)
    arr = np.frombuffer(buf, dtype=np.uint8)
    # Bodies are contiguous in ``buf``: a record ends where the next begins.
    ends = np.append(begins[1:], len(buf) - len(_PAD))
    lengths, starts = _varints(arr, begins)
    if (lengths < _MIN_RECORD_BYTES).any() or (starts + lengths != ends).any():
        raise CorruptRecordError("a record's length does not match the batch's layout")
    ts_delta, pos = _varints(arr, starts + 1)  # + 1: the record's attributes byte
    offset_delta, pos = _varints(arr, pos)
    key_len, key_start = _varints(arr, pos)
    _check_length(key_len, key_start, ends, "key")
    pos = key_start + np.maximum(key_len, 0)
    value_len, value_start = _varints(arr, pos)
    _check_length(value_len, value_start, ends, "value")
    pos = value_start + np.maximum(value_len, 0)
    header_count, pos = _varints(arr, pos)
    bad = (pos > ends) | ((header_count == 0) & (pos != ends)) | (header_count < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CorruptRecordError(f"record {i} of the fetch does not match its declared length")
    per_record = np.array(counts, dtype=np.int64)
    with np.errstate(over="ignore"):
        offsets = np.repeat(np.array(base_offsets, dtype=np.int64), per_record) + offset_delta
        append_ts = np.repeat(np.array(append_timestamps, dtype=np.int64), per_record)
        created = np.repeat(np.array(base_timestamps, dtype=np.int64), per_record) + ts_delta
        timestamps_us = np.where(append_ts >= 0, append_ts, created) * 1000
    keep = np.flatnonzero((offsets >= from_offset) & (offsets < until_offset))
    n = len(keep)
    spans = None
    if want_headers:
        rows = np.flatnonzero(header_count[keep] > 0)
        kept = keep[rows]
        body_starts = np.cumsum([0, *sizes])
        body = np.searchsorted(body_starts, begins[kept], side="right") - 1
        spans = np.stack(
            [
                rows,
                body,
                pos[kept] - body_starts[body],
                ends[kept] - body_starts[body],
                header_count[kept],
            ],
            axis=1,
        ).astype(np.int64)
    return (
        n,
        _binary(buf, arr, key_start[keep], key_len[keep]) if want_key else None,
        _binary(buf, arr, value_start[keep], value_len[keep]) if want_value else None,
        offsets[keep],
        timestamps_us[keep],
        (append_ts[keep] >= 0).astype(np.int32),
        spans,
    )


def _check_length(lengths: np.ndarray, starts: np.ndarray, ends: np.ndarray, what: str) -> None:
    """Rule 2: a field length is -1 or fits in what is left of its record."""
    bad = (starts > ends) | (lengths < -1) | (lengths > ends - starts)
    if bad.any():
        raise CorruptRecordError(f"record {int(np.flatnonzero(bad)[0])}: bad {what} length")


def _chain(buf: bytes, sizes: list[int], counts: list[int]) -> list[int]:
    """Step 1: where every record begins (at its length varint).

    The loop only follows the lengths; lengths are validated afterwards, vectorized (a bad
    one shows as a record that does not end where the next begins).
    """
    begins: list[int] = []
    add = begins.append
    pos = 0
    try:
        for body_size, count in zip(sizes, counts, strict=True):
            body_end = pos + body_size
            for _ in range(count):
                add(pos)
                b = buf[pos]
                if b < 0x80:
                    pos += 1 + (b >> 1)
                else:
                    b2 = buf[pos + 1]
                    if b2 < 0x80:
                        pos += 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                    else:
                        length, pos = decode_varint(buf, pos)
                        pos += max(length, 0)
                if pos > body_end:
                    raise CorruptRecordError("a record runs past the end of its batch")
            if pos != body_end:
                raise CorruptRecordError(
                    f"record lengths add up to {pos - body_end + body_size} bytes, "
                    f"the batch body holds {body_size}"
                )
    except (IndexError, VarintError):
        raise CorruptRecordError("a record runs past the end of its batch") from None
    return begins


def _varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one zig-zag varint (at most 10 bytes, bits past 64 dropped) at each position;
    returns the values and the next positions."""
    last = len(arr) - 1
    pos = np.minimum(pos, last)
    first = arr[pos]
    unsigned = (first & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), dtype=np.int64)
    idx = np.flatnonzero(first >= 0x80)
    shift = 7
    while idx.size:
        if shift > 63:
            raise CorruptRecordError("a varint is longer than 10 bytes")
        byte = arr[np.minimum(pos[idx] + size[idx], last)]
        unsigned[idx] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[idx] += 1
        idx = idx[byte >= 0x80]
        shift += 7
    values = (unsigned >> np.uint64(1)).astype(np.int64) ^ -(unsigned & np.uint64(1)).astype(
        np.int64
    )
    return values, pos + size


def _binary(
    buf: bytes, arr: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> tuple[object, object, object | None]:
    """The ``binary`` buffers of ``buf[start:start+length]`` (length -1: null), built as views
    and cast: (offsets, data, validity or None)."""
    n = len(starts)
    valid = lengths >= 0
    lens = np.where(valid, lengths, 0).astype(np.int32)
    views = np.zeros((n, 4), dtype=np.int32)
    views[:, 0] = lens
    long = lens > 12
    if long.any():
        li = np.flatnonzero(long)
        s = starts[li]
        prefix = arr[s[:, None] + np.arange(4)]
        views[li, 1] = prefix.copy().view("<i4")[:, 0]
        views[li, 3] = s.astype(np.int32)  # buffer index (column 2) stays 0
    short = valid & ~long & (lens > 0)
    if short.any():
        si = np.flatnonzero(short)
        inline = arr[starts[si, None] + np.arange(12)]
        inline[np.arange(12)[None, :] >= lens[si, None]] = 0
        views.view(np.uint8).reshape(n, 16)[si, 4:] = inline
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), pa.py_buffer(buf)]
    ).cast(pa.binary())
    validity_out, offsets, data = array.buffers()
    return offsets, data if data is not None else b"", validity_out
