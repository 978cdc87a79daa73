"""The records inside a Kafka RecordBatch v2: their byte layout and their decoding.

Each record (zig-zag varints, see :mod:`odradek.protocol.varint`)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
    headerCount varint | (keyLength varint | key utf-8 | valueLength varint | value) * count

Offsets and timestamps are deltas from the batch header's baseOffset and baseTimestamp
(:mod:`odradek.protocol.record_batch` has the header; :mod:`odradek.protocol.batch_builder`
encodes). A record must end exactly where its length says, and the records exactly where the
(decompressed) body ends.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.protocol import compression as _compression
from odradek.protocol.record_batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_LOG_APPEND_TIME,
    HEADER_SIZE,
    Buffer,
    CorruptRecordError,
    parse_batch_header,
)
from odradek.protocol.varint import VarintError, decode_varint

__all__ = ["Record", "decode_records"]


class Record(NamedTuple):
    """One decoded record. ``headers`` is a tuple of ``(str, bytes | None)`` pairs."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


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
