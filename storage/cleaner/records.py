"""Record-level surgery on v2 record batches for the cleaner: split, filter, rebuild.

A v2 batch (docs/architecture.md §4, :mod:`odradek.protocol.record_batch`) is a 61-byte header
followed by the records, compressed as a whole when the codec bits (attributes 0-2) are set. Each
record is (:mod:`odradek.protocol.records`)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    | keyLength varint | key | valueLength varint | value | headers

Its deltas are relative to the batch's baseOffset and baseTimestamp, so a record's bytes stay
valid in any batch with the same base offset and base timestamp. Filtering therefore never
re-encodes a record: :func:`rebuild_batch` concatenates the kept records' bytes unchanged,
recompresses them with the batch's own codec and writes a header with the same baseOffset,
baseTimestamp, maxTimestamp, lastOffsetDelta (Kafka keeps the original last offset, so the
producer's sequence numbers and the batch's offset range survive), producer fields and
attributes; only batchLength, recordCount and the CRC-32C change.

:func:`empty_batch` writes Kafka's empty-batch form (recordCount 0, no body, no codec) with the
original offset range: the cleaner keeps one at the end of a cleaned segment whose last batch
lost every record, so the cleaned segment covers exactly the offsets of the segments it
replaces (which the swap recovery in :mod:`odradek.storage.loader` relies on).
"""

from __future__ import annotations

from odradek.protocol import compression as _compression
from odradek.protocol.record_batch import (
    ATTR_COMPRESSION_MASK,
    HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    with_body,
)
from odradek.protocol.validate import DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES
from odradek.protocol.varint import VarintError, decode_varint

__all__ = [
    "KEY",
    "OFFSET_DELTA",
    "RawRecord",
    "batch_body",
    "empty_batch",
    "raw_records",
    "rebuild_batch",
]

# One record as :func:`raw_records` returns it (a plain tuple: it is made per record):
# (offset delta, key or None, is a tombstone (null value), start, end) where ``body[start:end]``
# is the whole record, its length prefix included.
RawRecord = tuple[int, bytes | None, bool, int, int]
OFFSET_DELTA, KEY, IS_TOMBSTONE, START, END = range(5)
_NULL_LENGTH = 0x01  # the zig-zag varint of -1, one byte


def batch_body(
    batch: bytes | memoryview,
    header: BatchHeader,
    max_bytes: int = DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """The batch's record bytes, decompressed; at most ``max_bytes`` of them
    (:func:`odradek.protocol.validate.stored_batch_bound`: a bigger body was stored before
    produce validated records, and is refused, not expanded)."""
    body = bytes(batch[HEADER_SIZE : header.size_bytes])
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec and body:
        try:
            body = _compression.decompress_bounded(codec, body, max_bytes)
        except _compression.CompressionError as exc:
            raise CorruptRecordError(f"batch at offset {header.base_offset}: {exc}") from None
    return body


def raw_records(body: bytes, count: int) -> list[RawRecord]:
    """Each record of ``body`` with its key and null-value flag (headers are not parsed).

    The hot loop of the cleaner: one- and two-byte varints (the usual case for these fields)
    are decoded inline; a record's timestamp delta is skipped, not decoded.
    """
    out: list[RawRecord] = []
    append = out.append
    pos = 0
    end = len(body)
    try:
        for _ in range(count):
            start = pos
            b = body[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                z = (b & 0x7F) | (body[pos + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                length, pos = decode_varint(body, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecordError(f"record length {length} does not fit the batch")
            pos += 1  # attributes
            while body[pos] & 0x80:  # timestamp delta
                pos += 1
            pos += 1
            b = body[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                z = (b & 0x7F) | (body[pos + 1] << 7)
                offset_delta = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                offset_delta, pos = decode_varint(body, pos)
            b = body[pos]
            if b < 0x80:
                key_len = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_len, pos = decode_varint(body, pos)
            if key_len >= 0:
                key: bytes | None = body[pos : pos + key_len]
                pos += key_len
            else:
                key = None
            append((offset_delta, key, body[pos] == _NULL_LENGTH, start, record_end))
            pos = record_end
    except (VarintError, IndexError) as exc:
        raise CorruptRecordError(f"bad record in batch: {exc}") from None
    return out


def rebuild_batch(
    batch: bytes | memoryview, header: BatchHeader, body: bytes, kept: list[RawRecord]
) -> bytes:
    """``batch`` holding only the ``kept`` records of its decompressed ``body``."""
    records = b"".join([body[r[START] : r[END]] for r in kept])
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec:
        records = _compression.compress(codec, records)
    return with_body(batch, records, record_count=len(kept))


def empty_batch(batch: bytes | memoryview, header: BatchHeader) -> bytes:
    """``batch`` with no records and no codec: only its offset range and producer fields."""
    return with_body(batch, b"", codec=0, record_count=0)
