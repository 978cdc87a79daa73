"""Fetched record batches → Arrow record batches in the Kafka source's schema, column-wise.

This is the executor's hot path. Per record, the only Python work is one step along the chain
of record lengths (a loop of a few C-level operations); every field is then decoded for all
records of a fetch at once with numpy, and keys and values never become Python objects:

1. Walk the batch headers of the fetched bytes (one ``struct`` unpack each), check each CRC-32C,
   skip control batches and batches wholly outside ``[from_offset, until_offset)``, decompress
   compressed bodies; join the bodies into one buffer (plus zero padding, so vectorized reads
   past a malformed record stay in bounds).
2. Walk the record-length varints through that buffer: each record's start and length.
3. With numpy, decode every record's varints (timestamp delta, offset delta, key length, value
   length, header count) for all records at once, check that each record ends where its
   length says, and keep the records in range.
4. Keys and values become Arrow ``binary_view`` arrays pointing into the buffer (16 bytes per
   record, no copy), cast to ``binary`` in one Arrow kernel (a memcpy per value).

Headers (``includeHeaders``) are decoded per record in Python, for the records that have
any. Legacy v0/v1 message sets go through :func:`odradek.protocol.legacy.decode_legacy_records`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from crc32c import crc32c

from odradek.protocol import compression
from odradek.protocol.legacy import decode_legacy_records
from odradek.protocol.records import CorruptRecordError, Record
from odradek.protocol.varint import VarintError, decode_varint
from odradek.spark.schema import arrow_schema

__all__ = ["CorruptRecordError", "decode_fetch"]

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_HEADER_SIZE = 61
_LOG_OVERHEAD = 12
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_CONTROL = 0x20
_PAD = bytes(64)  # > the 31 bytes a record's leading varints can span


class _Pending:
    """v2 batches collected for one columnar decode."""

    __slots__ = ("append_ts", "base_offsets", "base_ts", "bodies", "body_sizes", "counts")

    def __init__(self) -> None:
        self.bodies: list[bytes | memoryview] = []
        self.body_sizes: list[int] = []
        self.counts: list[int] = []
        self.base_offsets: list[int] = []
        self.base_ts: list[int] = []
        self.append_ts: list[int] = []  # -1: CreateTime

    def __bool__(self) -> bool:
        return bool(self.bodies)


def decode_fetch(
    raw: bytes | memoryview,
    *,
    topic: str,
    partition: int,
    from_offset: int,
    until_offset: int,
    include_headers: bool,
) -> tuple[list[pa.RecordBatch], int]:
    """Decode the complete batches in ``raw`` (one partition's fetched bytes).

    Returns the Arrow batches of the records with ``from_offset <= offset < until_offset``
    and the offset the next fetch should ask for (after the last complete batch; unchanged
    if ``raw`` holds no complete batch). Raises :class:`CorruptRecordError` on a bad batch.
    """
    view = memoryview(raw)
    size = len(view)
    pending = _Pending()
    out: list[pa.RecordBatch] = []
    next_offset = from_offset
    pos = 0
    while pos + _LOG_OVERHEAD <= size:
        base_offset, batch_length = _PREFIX.unpack_from(view, pos)
        end = pos + _LOG_OVERHEAD + batch_length
        if end > size or pos + 17 > size:
            break  # a partial batch at the end of the fetch
        if base_offset >= until_offset:
            break
        magic = view[pos + 16]
        if magic != 2:
            records = decode_legacy_records(view[pos:end])
            if records:
                next_offset = max(next_offset, records[-1].offset + 1)
            records = [r for r in records if from_offset <= r.offset < until_offset]
            if records:
                out.extend(
                    _flush(pending, topic, partition, from_offset, until_offset, include_headers)
                )
                pending = _Pending()
                out.append(_records_to_arrow(records, topic, partition, include_headers))
            pos = end
            continue
        if end - pos < _HEADER_SIZE:
            raise CorruptRecordError(f"record batch at offset {base_offset} is too short")
        (_, _, _, _, crc, attributes, last_delta, base_ts, max_ts, _, _, _, count) = (
            _HEADER.unpack_from(view, pos)
        )
        if crc32c(view[pos + 21 : end]) != crc:
            raise CorruptRecordError(f"record batch at offset {base_offset}: CRC mismatch")
        next_offset = max(next_offset, base_offset + last_delta + 1)
        if base_offset + last_delta < from_offset or attributes & _CONTROL or count <= 0:
            pos = end
            continue
        body: bytes | memoryview = view[pos + _HEADER_SIZE : end]
        codec = attributes & _CODEC_MASK
        if codec:
            try:
                body = compression.decompress(codec, bytes(body))
            except compression.CompressionError as exc:
                raise CorruptRecordError(f"record batch at offset {base_offset}: {exc}") from None
        pending.bodies.append(body)
        pending.body_sizes.append(len(body))
        pending.counts.append(count)
        pending.base_offsets.append(base_offset)
        pending.base_ts.append(base_ts)
        pending.append_ts.append(max_ts if attributes & _LOG_APPEND_TIME else -1)
        pos = end
    out.extend(_flush(pending, topic, partition, from_offset, until_offset, include_headers))
    return out, next_offset


def _chain(buf: bytes, sizes: list[int], counts: list[int]) -> list[int]:
    """Step 2: where every record begins (at its length varint).

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
            if pos != body_end:
                raise CorruptRecordError(
                    f"record lengths add up to {pos - body_end + body_size} bytes, "
                    f"the batch body holds {body_size}"
                )
    except (IndexError, VarintError):
        raise CorruptRecordError("a record runs past the end of its batch") from None
    return begins


def _varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one zig-zag varint at each position; returns the values and the next positions."""
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


def _flush(
    pending: _Pending,
    topic: str,
    partition: int,
    from_offset: int,
    until_offset: int,
    include_headers: bool,
) -> Iterator[pa.RecordBatch]:
    """Steps 2-4 for the collected v2 batches."""
    if not pending:
        return
    buf = b"".join([*pending.bodies, _PAD])
    begins = np.array(_chain(buf, pending.body_sizes, pending.counts), dtype=np.int64)
    arr = np.frombuffer(buf, dtype=np.uint8)
    # Bodies are contiguous in ``buf``: a record ends where the next begins.
    ends = np.append(begins[1:], len(buf) - len(_PAD))
    lengths, starts = _varints(arr, begins)
    if (lengths < 6).any() or (starts + lengths != ends).any():
        raise CorruptRecordError("a record's length does not match the batch's layout")
    counts = np.array(pending.counts, dtype=np.int64)
    ts_delta, pos = _varints(arr, starts + 1)  # + 1: the record's attributes byte
    offset_delta, pos = _varints(arr, pos)
    key_len, pos = _varints(arr, pos)
    key_start = pos
    pos = pos + np.maximum(key_len, 0)
    value_len, pos = _varints(arr, pos)
    value_start = pos
    pos = pos + np.maximum(value_len, 0)
    header_count, pos = _varints(arr, pos)
    bad = (pos > ends) | ((header_count == 0) & (pos != ends)) | (header_count < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CorruptRecordError(f"record {i} of the fetch does not match its declared length")
    offsets = np.repeat(np.array(pending.base_offsets, dtype=np.int64), counts) + offset_delta
    append_ts = np.repeat(np.array(pending.append_ts, dtype=np.int64), counts)
    timestamps = np.where(
        append_ts >= 0,
        append_ts,
        np.repeat(np.array(pending.base_ts, dtype=np.int64), counts) + ts_delta,
    )
    keep = (offsets >= from_offset) & (offsets < until_offset)
    if not keep.all():
        offsets, append_ts, timestamps = offsets[keep], append_ts[keep], timestamps[keep]
        key_len, key_start, value_len, value_start = (
            key_len[keep],
            key_start[keep],
            value_len[keep],
            value_start[keep],
        )
        header_count, pos, ends = header_count[keep], pos[keep], ends[keep]
    n = len(offsets)
    if n == 0:
        return
    columns: list[pa.Array] = [
        _binary(buf, arr, key_start, key_len),
        _binary(buf, arr, value_start, value_len),
        _constant_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.Array.from_buffers(
            pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(timestamps * 1000)]
        ),
        pa.array((append_ts >= 0).astype(np.int32)),
    ]
    if include_headers:
        columns.append(_headers(buf, header_count, pos, ends))
    yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _binary(buf: bytes, arr: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A ``binary`` array of ``buf[start:start+length]`` (length -1: null), built as views."""
    n = len(starts)
    valid = lengths >= 0
    if not valid.any():
        return pa.nulls(n, pa.binary())
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
    )
    return array.cast(pa.binary())


def _constant_string(text: str, n: int) -> pa.Array:
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
    )


def _headers(buf: bytes, counts: np.ndarray, positions: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The ``headers`` column: null for a record without headers (Spark's behaviour)."""
    rows: list[list[dict[str, object]] | None] = [None] * len(counts)
    for i in np.flatnonzero(counts > 0).tolist():
        pos = int(positions[i])
        items = []
        try:
            for _ in range(int(counts[i])):
                key_len, pos = decode_varint(buf, pos)
                if key_len < 0:
                    raise CorruptRecordError("negative record header key length")
                key = buf[pos : pos + key_len].decode()
                pos += key_len
                value_len, pos = decode_varint(buf, pos)
                value = None if value_len < 0 else buf[pos : pos + value_len]
                pos += max(value_len, 0)
                items.append({"key": key, "value": value})
        except (VarintError, UnicodeDecodeError) as exc:
            raise CorruptRecordError(f"bad record header: {exc}") from None
        if pos != int(ends[i]):
            raise CorruptRecordError("record headers do not match the record's length")
        rows[i] = items
    return pa.array(rows, type=arrow_schema(True).field("headers").type)


def _records_to_arrow(
    records: list[Record], topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """The slow path for decoded :class:`Record` tuples (legacy message sets)."""
    n = len(records)
    columns: list[object] = [
        [r.key for r in records],
        [r.value for r in records],
        [topic] * n,
        [partition] * n,
        [r.offset for r in records],
        [r.timestamp_ms * 1000 for r in records],
        [0] * n,
    ]
    if include_headers:
        columns.append([[{"key": k, "value": v} for k, v in r.headers] or None for r in records])
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )
