"""What ``dump-log`` prints: the :class:`Line` and its status, Kafka's text for a log entry and
for each record in it (``DumpLogSegments.printBatchLevel`` / deep iteration).

Every printed line is a :class:`Line`, whose ``status`` says what it reports:

1. ``0`` (``STATUS_OK``): nothing wrong.
2. ``1`` (``STATUS_INVALID``): invalid data (an entry that fails validation, index entries that
   do not match the log, records that do not decode; :mod:`odradek.storage.dump` lists them).
3. ``2`` (``STATUS_UNUSABLE``): the file, or an entry's records, could not be dumped.

An entry line is built from the bytes of one entry (v2 batch or legacy v0/v1 message) as read
from the ``.log`` (:mod:`odradek.storage.scan` gives the layout); record lines decode its
records, a v2 body decompressed within a ceiling (:mod:`odradek.storage.dump_decompress`).
Keys and payloads print as UTF-8 with invalid bytes replaced and control characters (newlines
included) escaped as ``\\xNN``, so that each record stays on one line. Reading only: nothing
here writes a file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from odradek.protocol.compression import CompressionError
from odradek.protocol.legacy import decode_legacy_records
from odradek.protocol.record_batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_DELETE_HORIZON,
    ATTR_LOG_APPEND_TIME,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    CorruptRecordError,
    parse_batch_header,
)
from odradek.protocol.records import Record, decode_records
from odradek.storage.dump_decompress import BoundedDecompressor, DecompressedTooLarge
from odradek.storage.scan import EntryInfo

__all__ = [
    "INT32_MAX",
    "STATUS_INVALID",
    "STATUS_OK",
    "STATUS_UNUSABLE",
    "Line",
    "batch_line",
    "record_lines",
]

STATUS_OK = 0
STATUS_INVALID = 1
STATUS_UNUSABLE = 2
INT32_MAX = 0x7FFF_FFFF

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_LEGACY_PREFIX = struct.Struct(">qiIbb")  # offset, message size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
# C0, DEL and C1 control characters (newlines included) print as \xNN.
_CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


class Line(NamedTuple):
    """One line of output; ``stderr`` lines are diagnostics (Kafka prints them there too)."""

    text: str
    status: int = STATUS_OK
    stderr: bool = False


def batch_line(data: bytes, position: int, *, valid: bool) -> str:
    """Kafka's ``printBatchLevel`` line for the entry held by ``data``."""
    if data[MAGIC_OFFSET] == 2:
        h = parse_batch_header(data)
        codec = _codec_name(h.attributes)
        horizon = (
            f"OptionalLong[{h.base_timestamp}]"
            if h.attributes & ATTR_DELETE_HORIZON
            else "OptionalLong.empty"
        )
        return (
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
            f"baseSequence: {h.base_sequence} "
            f"lastSequence: {_sequence(h.base_sequence, h.last_offset_delta)} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
            f"deleteHorizonMs: {horizon} position: {position} "
            f"{_timestamp_type(2, h.attributes)}: {h.max_timestamp} size: {h.size_bytes} "
            f"magic: 2 compresscodec: {codec} crc: {h.crc} isvalid: {_bool(valid)}"
        )
    offset, message_size, crc, magic, attributes = _LEGACY_PREFIX.unpack_from(data)
    timestamp = _I64.unpack_from(data, 18)[0] if magic == 1 else -1
    return (
        f"offset: {offset} position: {position} {_timestamp_type(magic, attributes)}: "
        f"{timestamp} size: {message_size + LOG_OVERHEAD} magic: {magic} "
        f"compresscodec: {_codec_name(attributes)} crc: {crc} isvalid: {_bool(valid)}"
    )


def record_lines(
    data: bytes,
    entry: EntryInfo,
    print_data: bool,
    previous: list[int],
    gaps: list[tuple[int, int]],
    decompressor: BoundedDecompressor,
) -> Iterator[Line]:
    """One ``| offset: ..`` line per record of a validated entry (Kafka's deep iteration)."""
    v2 = entry.magic == 2
    try:
        if v2:
            data = _inflated(data, decompressor)
        records = decode_records(data) if v2 else decode_legacy_records(data)
    except DecompressedTooLarge as exc:
        yield Line(
            f"| records of the entry at position {entry.position} not printed: its body {exc} "
            "(--max-decompressed-bytes)",
            STATUS_UNUSABLE,
            stderr=True,
        )
        return
    except (CorruptRecordError, CompressionError) as exc:
        yield Line(
            f"| cannot decode the records of the entry at position {entry.position}: {exc}",
            STATUS_INVALID,
        )
        return
    header = parse_batch_header(data) if v2 else None
    attributes = header.attributes if header else data[MAGIC_OFFSET + 1]
    timestamp_type = _timestamp_type(entry.magic, attributes)
    control = bool(header and header.is_control)
    for record in records:
        if previous and record.offset != previous[0] + 1:
            gaps.append((previous[0], record.offset))
        previous[:] = [record.offset]
        parts = [
            f"| offset: {record.offset} {timestamp_type}: {record.timestamp_ms} "
            f"keySize: {_size(record.key)} valueSize: {_size(record.value)}"
        ]
        if header is not None:
            sequence = _sequence(header.base_sequence, record.offset - header.base_offset)
            keys = ",".join(key for key, _ in record.headers)
            parts.append(f"sequence: {sequence} headerKeys: [{keys}]")
        if control:
            parts.append(_control_description(record))
        elif print_data:
            if record.key is not None:
                parts.append(f"key: {_text(record.key)}")
            if record.value is not None:
                parts.append(f"payload: {_text(record.value)}")
        yield Line(" ".join(parts))


def _inflated(batch: bytes, decompressor: BoundedDecompressor) -> bytes:
    """A v2 ``batch`` with its body decompressed (bounded) and its codec bits cleared, so that
    ``decode_records`` reads the records without decompressing anything itself."""
    header = parse_batch_header(batch)
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if not codec:
        return batch
    body = decompressor.decompress(codec, bytes(batch[HEADER_SIZE : header.size_bytes]))
    head = bytearray(batch[:HEADER_SIZE])
    _I32.pack_into(head, 8, HEADER_SIZE - LOG_OVERHEAD + len(body))  # batchLength
    _I16.pack_into(head, CRC_START, header.attributes & ~ATTR_COMPRESSION_MASK)  # attributes
    return bytes(head) + body


def _control_description(record: Record) -> str:
    """Kafka's description of a control record, from its key (version, type) and value."""
    key, value = record.key, record.value
    if key is None or len(key) < _CONTROL_KEY.size:
        return "controlType: UNKNOWN(-1) (control record key is missing or too short)"
    _, type_id = _CONTROL_KEY.unpack_from(key)
    name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id in (0, 1) and value is not None and len(value) >= _END_TXN_VALUE.size:
        _, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        return f"endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    return f"controlType: {name}({type_id})"


def _sequence(base_sequence: int, delta: int) -> int:
    """Kafka's ``incrementSequence``: -1 stays -1; sequences wrap from int32 max to 0."""
    if base_sequence < 0:
        return base_sequence
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


def _timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if attributes & ATTR_LOG_APPEND_TIME else "CreateTime"


def _codec_name(attributes: int) -> str:
    codec = attributes & ATTR_COMPRESSION_MASK
    return _CODECS.get(codec, f"unknown({codec})")


def _size(value: bytes | None) -> int:
    return -1 if value is None else len(value)


def _text(value: bytes) -> str:
    """UTF-8 with invalid bytes replaced, control characters escaped: one line per record."""
    return value.decode("utf-8", "replace").translate(_CONTROL_ESCAPES)


def _bool(value: bool) -> str:
    return "true" if value else "false"
