"""Kafka's legacy message sets, magic v0 and v1: read-only decoding (odradek never writes them).

Byte layout of one shallow entry (big-endian; the 12-byte prefix is the same ``LOG_OVERHEAD``
every log entry shares, so the magic byte sits at offset 16 for v0, v1 and v2 alike)::

    offset size  field
    0      8     offset           int64   the message's offset; for a compressed wrapper the
                                          offset of its LAST inner message
    8      4     message_size     int32   bytes after this field (entry size - 12)
    12     4     crc              uint32  CRC-32 (zlib/IEEE) of bytes 16..end
    16     1     magic            int8    0 or 1
    17     1     attributes       int8    bits 0-2 codec (none/gzip/snappy/lz4), bit 3
                                          LogAppendTime (v1 only)
    18     8     timestamp        int64   v1 only; absent in v0
    18|26  4     keyLength        int32   -1 (any negative, as in Kafka) = null key
           ...   key
           4     valueLength      int32   -1 = null value
           ...   value

The minimum ``message_size`` is 14 bytes for v0 (crc, magic, attributes, two lengths) and 22 for
v1 (plus the timestamp). A compressed entry (a "wrapper") holds, as its value, a compressed
message set of uncompressed inner entries of the same magic. In a v0 wrapper the inner
offsets are absolute; in a v1 wrapper they are relative, and the absolute offset of an inner
message is ``wrapper_offset - last_inner_relative + inner_relative``. A v1 wrapper with the
LogAppendTime bit gives its own timestamp to every inner message; with CreateTime each inner
message keeps its own. v0 messages have no timestamp (reported as -1). Records decoded from
legacy entries never carry headers.

Limitation: Kafka brokers before 0.10 (and therefore v0 lz4 wrappers) wrote an LZ4 frame whose
header checksum was computed over the wrong bytes (KAFKA-3160). The lz4 codec of
:mod:`odradek.protocol.compression` checks that byte, so such a wrapper is reported as corrupt
rather than decoded. lz4 in v1 wrappers (the fixed framing) decodes normally.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from odradek.protocol import compression as _compression
from odradek.protocol.record_batch import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    Buffer,
    CorruptRecordError,
    TimestampType,
)
from odradek.protocol.records import Record

__all__ = ["LegacyEntry", "decode_legacy_records", "validate_legacy_entry"]

MAGIC_V0 = 0
MAGIC_V1 = 1
RECORD_OVERHEAD_V0 = 14  # crc 4, magic 1, attributes 1, keyLength 4, valueLength 4
RECORD_OVERHEAD_V1 = 22  # the same plus timestamp 8
NO_TIMESTAMP = -1

_ATTR_COMPRESSION_MASK = 0x07
_ATTR_LOG_APPEND_TIME = 0x08
_KEY_OFFSET = (18, 26)  # position of keyLength within an entry, by magic
_LEGACY_CODECS = (_compression.GZIP, _compression.SNAPPY, _compression.LZ4)

_PREFIX = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")


class LegacyEntry(NamedTuple):
    """The header of one v0/v1 entry, field for field (``timestamp_ms`` is -1 for v0)."""

    offset: int
    size_bytes: int
    magic: int
    crc: int
    attributes: int
    timestamp_ms: int

    @property
    def compression(self) -> int:
        """Codec id from attribute bits 0-2 (0 none, 1 gzip, 2 snappy, 3 lz4)."""
        return self.attributes & _ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType | None:
        """Attribute bit 3 for v1; ``None`` for v0, which has no timestamps."""
        if self.magic == MAGIC_V0:
            return None
        return TimestampType((self.attributes & _ATTR_LOG_APPEND_TIME) >> 3)


def validate_legacy_entry(buf: Buffer, pos: int = 0) -> LegacyEntry:
    """Check the v0/v1 entry at ``buf[pos:]``: length, magic and CRC-32. Returns its header.

    The buffer may continue past the entry; it may not end before it. Raises
    :class:`~odradek.protocol.record_batch.CorruptRecordError` naming the first rule that fails.
    """
    available = len(buf) - pos
    if available < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"legacy message truncated: {available} bytes, "
            f"at least {LOG_OVERHEAD + RECORD_OVERHEAD_V0} needed"
        )
    offset, message_size, crc, magic, attributes = _PREFIX.unpack_from(buf, pos)
    if magic == MAGIC_V0:
        minimum = RECORD_OVERHEAD_V0
    elif magic == MAGIC_V1:
        minimum = RECORD_OVERHEAD_V1
    else:
        raise CorruptRecordError(f"unsupported legacy message magic {magic} (expected 0 or 1)")
    if message_size < minimum:
        raise CorruptRecordError(
            f"legacy message size {message_size} is below the v{magic} minimum of {minimum}"
        )
    size = LOG_OVERHEAD + message_size
    if size > available:
        raise CorruptRecordError(f"legacy message of {size} bytes truncated to {available}")
    with memoryview(buf) as view:
        actual = zlib.crc32(view[pos + MAGIC_OFFSET : pos + size])
    if actual != crc:
        raise CorruptRecordError(
            f"legacy message CRC mismatch at offset {offset}: "
            f"stored {crc:#010x}, computed {actual:#010x}"
        )
    timestamp = _TIMESTAMP.unpack_from(buf, pos + 18)[0] if magic == MAGIC_V1 else NO_TIMESTAMP
    return LegacyEntry(offset, size, magic, crc, attributes & 0xFF, timestamp)


def decode_legacy_records(buf: Buffer) -> list[Record]:
    """Decode the one shallow v0/v1 entry at ``buf[0:]`` into records with absolute offsets.

    The entry is validated first (:func:`validate_legacy_entry`); bytes after it are ignored.
    An uncompressed entry gives one record; a compressed wrapper gives its inner messages,
    each of which must be a valid uncompressed entry of the wrapper's magic.
    """
    entry = validate_legacy_entry(buf)
    with memoryview(buf) as view:
        key, value = _key_value(view, entry)
    if not entry.compression:
        return [Record(entry.offset, entry.timestamp_ms, key, value)]
    return _decode_wrapper(entry, value)


def _key_value(
    view: memoryview, entry: LegacyEntry, pos: int = 0
) -> tuple[bytes | None, bytes | None]:
    """The key and value of the validated entry at ``view[pos:]``."""
    end = pos + entry.size_bytes
    key, at = _sized_bytes(view, pos + _KEY_OFFSET[entry.magic], end - 4, "key", entry)
    value, at = _sized_bytes(view, at, end, "value", entry)
    if at != end:
        raise CorruptRecordError(
            f"legacy message at offset {entry.offset}: {end - at} trailing bytes after the value"
        )
    return key, value


def _sized_bytes(
    view: memoryview, at: int, limit: int, name: str, entry: LegacyEntry
) -> tuple[bytes | None, int]:
    """An int32-length-prefixed byte string at ``view[at:]`` that must end by ``limit``."""
    (length,) = _LENGTH.unpack_from(view, at)
    at += 4
    if length < 0:
        return None, at
    if at + length > limit:
        raise CorruptRecordError(
            f"legacy message at offset {entry.offset}: {name} of {length} bytes "
            "overruns the message"
        )
    return bytes(view[at : at + length]), at + length


def _decode_wrapper(wrapper: LegacyEntry, value: bytes | None) -> list[Record]:
    codec = wrapper.compression
    if codec not in _LEGACY_CODECS:
        raise CorruptRecordError(
            f"legacy message at offset {wrapper.offset}: compression codec {codec} "
            f"is not valid for magic {wrapper.magic}"
        )
    if value is None:
        raise CorruptRecordError(
            f"compressed legacy message at offset {wrapper.offset} has a null value"
        )
    try:
        inner = _compression.decompress(codec, value)
    except _compression.CompressionError as exc:
        raise CorruptRecordError(
            f"compressed legacy message at offset {wrapper.offset}: {exc}"
        ) from None
    entries: list[tuple[LegacyEntry, bytes | None, bytes | None]] = []
    with memoryview(inner) as view:
        pos = 0
        while pos < len(inner):
            entry = validate_legacy_entry(view, pos)
            if entry.magic != wrapper.magic:
                raise CorruptRecordError(
                    f"inner message magic {entry.magic} does not match wrapper magic "
                    f"{wrapper.magic} at offset {wrapper.offset}"
                )
            if entry.compression:
                raise CorruptRecordError(
                    f"nested compression in legacy message at offset {wrapper.offset}"
                )
            key, inner_value = _key_value(view, entry, pos)
            entries.append((entry, key, inner_value))
            pos += entry.size_bytes
    if not entries:
        raise CorruptRecordError(
            f"compressed legacy message at offset {wrapper.offset} holds no inner messages"
        )
    if wrapper.magic == MAGIC_V0:
        return [Record(e.offset, NO_TIMESTAMP, k, v) for e, k, v in entries]
    shift = wrapper.offset - entries[-1][0].offset  # relative inner offsets (v1)
    if wrapper.attributes & _ATTR_LOG_APPEND_TIME:
        ts = wrapper.timestamp_ms
        return [Record(shift + e.offset, ts, k, v) for e, k, v in entries]
    return [Record(shift + e.offset, e.timestamp_ms, k, v) for e, k, v in entries]
