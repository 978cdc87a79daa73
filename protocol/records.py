"""Kafka RecordBatch v2: header parsing, validation, encoding and decoding.

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

Each record (zig-zag varints, see :mod:`odradek.protocol.varint`)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
    headerCount varint | (keyLength varint | key utf-8 | valueLength varint | value) * count

Invariants a valid batch satisfies: ``batchLength + 12 >= 61``, ``magic == 2``, the CRC matches.
A batch from a client also has ``recordCount > 0`` and ``lastOffsetDelta == recordCount - 1``
(a compacted batch on disk may hold fewer records than its offset range).
Because the CRC starts at byte 21, assigning offsets (bytes 0..7) never re-encodes a batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import NamedTuple

from crc32c import crc32c

from odradek.protocol import compression as _compression
from odradek.protocol.varint import VarintError, decode_varint, encode_varint

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "BatchBuilder",
    "BatchHeader",
    "Compression",
    "CorruptRecordError",
    "InvalidRecordError",
    "Record",
    "TimestampType",
    "decode_records",
    "encode_batch",
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

_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, leaderEpoch, magic, crc
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordCount (bytes 21..61)
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


class Record(NamedTuple):
    """One decoded record. ``headers`` is a tuple of ``(str, bytes | None)`` pairs."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


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


def decode_records(batch: Buffer, *, max_decompressed_bytes: int | None = None) -> list[Record]:
    """Decode every record of one validated v2 batch (decompressing its body if needed).

    Offsets and timestamps are absolute. Under LogAppendTime every record carries the batch's
    maxTimestamp, as Kafka reports it. ``max_decompressed_bytes``: refuse a body that
    decompresses to more (:class:`~odradek.protocol.compression.DecompressionLimitError`),
    without expanding it; None: no bound (a trusted batch).
    """
    header = parse_batch_header(batch)
    body = bytes(batch[HEADER_SIZE : header.size_bytes])
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec:
        try:
            if max_decompressed_bytes is None:
                body = _compression.decompress(codec, body)
            else:
                body = _compression.decompress_bounded(codec, body, max_decompressed_bytes)
        except _compression.DecompressionLimitError:
            raise
        except _compression.CompressionError as exc:
            raise CorruptRecordError(
                f"record batch at offset {header.base_offset}: {exc}"
            ) from None
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append_ts = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else None
    records: list[Record] = []
    append = records.append
    pos = 0
    end = len(body)
    try:
        for _ in range(header.record_count):
            length, pos = decode_varint(body, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecordError(f"record length {length} does not fit the batch")
            pos += 1  # record attributes: unused
            ts_delta, pos = decode_varint(body, pos)
            offset_delta, pos = decode_varint(body, pos)
            key_len, pos = decode_varint(body, pos)
            if key_len >= 0:
                key = body[pos : pos + key_len]
                pos += key_len
            else:
                key = None
            value_len, pos = decode_varint(body, pos)
            if value_len >= 0:
                value = body[pos : pos + value_len]
                pos += value_len
            else:
                value = None
            header_count, pos = decode_varint(body, pos)
            headers: tuple[tuple[str, bytes | None], ...] = ()
            if header_count:
                headers, pos = _decode_headers(body, pos, header_count)
            if pos != record_end:
                raise CorruptRecordError(
                    f"record at offset delta {offset_delta} declares {length} bytes "
                    f"but holds {length + pos - record_end}"
                )
            append(
                Record(
                    base_offset + offset_delta,
                    log_append_ts if log_append_ts is not None else base_ts + ts_delta,
                    key,
                    value,
                    headers,
                )
            )
    except VarintError as exc:
        raise CorruptRecordError(f"bad varint in record batch: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} trailing bytes after {header.record_count} records")
    return records


def _decode_headers(
    body: bytes, pos: int, count: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if count < 0 or count > len(body) - pos:
        raise CorruptRecordError(f"invalid record header count {count}")
    headers = []
    for _ in range(count):
        key_len, pos = decode_varint(body, pos)
        if key_len < 0 or pos + key_len > len(body):
            raise CorruptRecordError(f"invalid record header key length {key_len}")
        try:
            key = body[pos : pos + key_len].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("record header key is not valid UTF-8") from None
        pos += key_len
        value_len, pos = decode_varint(body, pos)
        if value_len >= 0:
            value: bytes | None = body[pos : pos + value_len]
            pos += value_len
        else:
            value = None
        headers.append((key, value))
    return tuple(headers), pos


_ZERO = b"\x00"
_NULL = encode_varint(-1)
_NO_HEADERS = encode_varint(0)


class BatchBuilder:
    """Accumulates records into one v2 batch; :meth:`build` returns its bytes.

    Records are encoded as they are appended, into a list of byte strings joined once by
    :meth:`build`: per record, a handful of table lookups and one ``list.extend``.
    """

    __slots__ = ("_base_ts", "_body_bytes", "_compression", "_count", "_max_ts", "_parts")

    def __init__(self, compression: Compression = Compression.NONE) -> None:
        self._compression = Compression(compression)
        self._parts: list[bytes] = []
        self._count = 0
        self._body_bytes = 0
        self._base_ts: int | None = None
        self._max_ts = -1

    def __len__(self) -> int:
        return self._count

    @property
    def size_bytes(self) -> int:
        """The uncompressed size the batch would have if built now."""
        return HEADER_SIZE + self._body_bytes

    def append(
        self,
        value: bytes | None,
        key: bytes | None = None,
        timestamp_ms: int = 0,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> int:
        """Add one record; returns its offset delta within the batch."""
        base_ts = self._base_ts
        if base_ts is None:
            base_ts = self._base_ts = timestamp_ms
        if timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        delta = self._count
        ts_delta = encode_varint(timestamp_ms - base_ts)
        offset_delta = encode_varint(delta)
        if key is None:
            key_len, key = _NULL, b""
        else:
            key_len = encode_varint(len(key))
        if value is None:
            value_len, value = _NULL, b""
        else:
            value_len = encode_varint(len(value))
        header_bytes = _encode_headers(headers) if headers else _NO_HEADERS
        length = (
            1
            + len(ts_delta)
            + len(offset_delta)
            + len(key_len)
            + len(key)
            + len(value_len)
            + len(value)
            + len(header_bytes)
        )
        prefix = encode_varint(length)
        self._parts.extend(
            (prefix, _ZERO, ts_delta, offset_delta, key_len, key, value_len, value, header_bytes)
        )
        self._body_bytes += len(prefix) + length
        self._count = delta + 1
        return delta

    def build(
        self,
        base_offset: int = 0,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        transactional: bool = False,
        log_append_time: bool = False,
    ) -> bytes:
        """The batch's bytes. An empty builder cannot be built (Kafka has no empty batches)."""
        if not self._count:
            raise ValueError("a record batch needs at least one record")
        body = b"".join(self._parts)
        attributes = int(self._compression)
        if self._compression:
            body = _compression.compress(self._compression, body)
        if transactional:
            attributes |= ATTR_TRANSACTIONAL
        if log_append_time:
            attributes |= ATTR_LOG_APPEND_TIME
        tail = _TAIL.pack(
            attributes,
            self._count - 1,
            self._base_ts,
            self._max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            self._count,
        )
        crc = crc32c(body, crc32c(tail))
        prefix = _PREFIX.pack(
            base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), partition_leader_epoch, 2, crc
        )
        return b"".join((prefix, tail, body))


def _encode_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        key_bytes = key.encode()
        parts.append(encode_varint(len(key_bytes)))
        parts.append(key_bytes)
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_batch(
    records: Iterable[tuple[bytes | None, bytes | None]]
    | Iterable[tuple[bytes | None, bytes | None, int]]
    | Iterable[tuple[bytes | None, bytes | None, int, Sequence[tuple[str, bytes | None]]]],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    **build_options: int | bool,
) -> bytes:
    """Encode ``(key, value[, timestamp_ms[, headers]])`` tuples as one batch."""
    builder = BatchBuilder(compression)
    for record in records:
        key, value, *rest = record
        builder.append(value, key, *rest)  # type: ignore[arg-type]
    return builder.build(base_offset, **build_options)  # type: ignore[arg-type]


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
