"""Kafka RecordBatch v2, the envelope: the 61-byte header's layout, the checks a batch must
pass, and the in-place changes the broker makes to a batch without re-encoding its records.

Byte layout of one batch (big-endian; the 12-byte prefix is Kafka's ``LOG_OVERHEAD``)::

    offset size  field
    0      8     baseOffset            int64   patched by the broker; not under the CRC
    8      4     batchLength           int32   bytes after this field (total size - 12)
    12     4     partitionLeaderEpoch  int32   not under the CRC
    16     1     magic                 int8    2
    17     4     crc                   uint32  CRC-32C (Castagnoli) of bytes 21..end
    21     2     attributes            int16   bits 0-2 codec, 3 LogAppendTime, 4 transactional,
                                               5 control, 6 delete horizon set (KIP-534)
    23     4     lastOffsetDelta       int32
    27     8     baseTimestamp         int64   (the delete horizon when bit 6 is set)
    35     8     maxTimestamp          int64
    43     8     producerId            int64
    51     2     producerEpoch         int16
    53     4     baseSequence          int32
    57     4     recordCount           int32
    61     ...   records               compressed as a whole when the codec is not "none"

The records themselves are :mod:`odradek.protocol.records` (layout and decoding) and
:mod:`odradek.protocol.batch_builder` (encoding).

Invariants a valid batch satisfies: ``batchLength + 12 >= 61``, ``magic == 2``, the CRC matches.
A batch from a client also has ``recordCount > 0`` and ``lastOffsetDelta == recordCount - 1``
(a compacted batch on disk may hold fewer records than its offset range).
Because the CRC starts at byte 21, assigning offsets (bytes 0..7) never re-encodes a batch.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from crc32c import crc32c

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "CRC_START",
    "HEADER_PREFIX",
    "HEADER_SIZE",
    "HEADER_TAIL",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_V2",
    "BatchHeader",
    "Buffer",
    "Compression",
    "CorruptRecordError",
    "InvalidRecordError",
    "TimestampType",
    "parse_batch_header",
    "patch_base_offset",
    "recompute_crc",
    "validate_batch",
    "validate_client_batch",
    "with_body",
]

LOG_OVERHEAD = 12  # baseOffset + batchLength: the prefix every log entry (any magic) shares
HEADER_SIZE = 61
MAGIC_OFFSET = 16  # position of the magic byte, the same for v0, v1 and v2
CRC_START = 21
MAGIC_V2 = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# The header in two parts, as a builder packs it: the CRC covers the tail, not the prefix.
HEADER_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, leaderEpoch, magic, crc
HEADER_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordCount (bytes 21..61)
_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_CRC_FIELD = struct.Struct(">I")
_BATCH_LENGTH = struct.Struct(">i")  # also recordCount's layout
_ATTRIBUTES = struct.Struct(">h")
_MAX_CODEC = 4  # zstd; ids 5-7 are unassigned


class CorruptRecordError(ValueError):
    """A batch or record whose bytes do not satisfy the format (Kafka's CORRUPT_MESSAGE)."""


class InvalidRecordError(CorruptRecordError):
    """A batch whose envelope is sound (size, magic, CRC) but whose contents break the rules
    Kafka's ``LogValidator`` enforces: the offset range against the count, the records present,
    control batches from a client, keyless records on a compacted topic (INVALID_RECORD)."""


class Compression(IntEnum):
    """Codec ids in attribute bits 0-2 (Kafka's ``CompressionType``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_bytes(self) -> int:
        """Bytes the whole batch occupies in the log."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & ATTR_LOG_APPEND_TIME) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


Buffer = bytes | bytearray | memoryview


def parse_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Unpack the header at ``buf[pos:pos + 61]`` without validating anything but its length."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} available"
        )
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def validate_batch(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Check the v2 batch at ``buf[pos:]``: length, magic and CRC. Returns its header.

    The buffer may continue past the batch (several batches back to back); it may not end
    before it. Raises :class:`CorruptRecordError` naming the first rule that fails.
    """
    available = len(buf) - pos
    if available < LOG_OVERHEAD + 5:
        raise CorruptRecordError(f"record batch truncated: {available} bytes")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported record batch magic {magic} (expected 2)")
    header = parse_batch_header(buf, pos)
    size = header.size_bytes
    if size < HEADER_SIZE:
        raise CorruptRecordError(f"record batch length {header.batch_length} is below the minimum")
    if size > available:
        raise CorruptRecordError(f"record batch of {size} bytes truncated to {available}")
    with memoryview(buf) as view:
        actual = crc32c(view[pos + CRC_START : pos + size])
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch at offset {header.base_offset}: "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError(
            f"negative record count {header.record_count} or last offset delta "
            f"{header.last_offset_delta}"
        )
    if header.attributes & ATTR_COMPRESSION_MASK > _MAX_CODEC:
        raise CorruptRecordError(
            f"unknown compression codec id {header.attributes & ATTR_COMPRESSION_MASK} "
            f"in record batch at offset {header.base_offset}"
        )
    return header


def validate_client_batch(buf: Buffer, pos: int = 0) -> BatchHeader:
    """:func:`validate_batch` plus the rules Kafka applies to batches a client produces."""
    header = validate_batch(buf, pos)
    if header.record_count <= 0:
        raise InvalidRecordError(f"invalid record count {header.record_count} in produced batch")
    if header.last_offset_delta != header.record_count - 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range: lastOffsetDelta {header.last_offset_delta}, "
            f"recordCount {header.record_count}"
        )
    if header.is_control:
        raise InvalidRecordError("clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in a batch of producer id "
            f"{header.producer_id}"
        )
    return header


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Overwrite the baseOffset of the batch at ``buf[pos]`` in place (the CRC stays valid)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def with_body(
    batch: Buffer, body: Buffer, *, codec: int | None = None, record_count: int | None = None
) -> bytes:
    """``batch``'s header with ``body`` (its records, compressed as the batch says) instead of
    its own: a new batchLength and CRC; new codec bits and recordCount if given. Every other
    header field (offset range, timestamps, producer fields) is kept."""
    out = bytearray(batch[:HEADER_SIZE])
    out += body
    _BATCH_LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    if codec is not None:
        (attributes,) = _ATTRIBUTES.unpack_from(out, 21)
        _ATTRIBUTES.pack_into(out, 21, (attributes & ~ATTR_COMPRESSION_MASK) | codec)
    if record_count is not None:
        _BATCH_LENGTH.pack_into(out, 57, record_count)
    _CRC_FIELD.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def recompute_crc(buf: bytearray, pos: int = 0) -> None:
    """Rewrite the CRC of the batch at ``buf[pos]`` after a change to bytes 21..end."""
    header = parse_batch_header(buf, pos)
    with memoryview(buf) as view:
        crc = crc32c(view[pos + CRC_START : pos + header.size_bytes])
    _CRC_FIELD.pack_into(buf, pos + 17, crc)
