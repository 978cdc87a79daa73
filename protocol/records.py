"""The records inside a Kafka RecordBatch v2: their byte layout and their decoding.

Each record (zig-zag varints, see :mod:`odradek.protocol.varint`)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
    headerCount varint | (keyLength varint | key utf-8 | valueLength varint | value) * count

Offsets and timestamps are deltas from the batch header's baseOffset and baseTimestamp
(:mod:`odradek.protocol.record_batch` has the header; :mod:`odradek.protocol.batch_builder`
encodes).

Rules, Kafka's, and the same as the consumer's C decoder's (``tests/client/test_record_decoder.py``
runs the two side by side: they accept and reject the same bodies) and the broker's produce
validation's (:mod:`odradek.protocol.validate`): varints of at most 5 bytes / 32 bits,
varlongs of at most 10 bytes / 64 bits (non-minimal encodings accepted, as Kafka does); each
record's length equal to its fields' size; key, value and header value lengths of at least -1
(-1: null, in any encoding); header counts and header key lengths of at least 0; UTF-8 header
keys; no bytes after the records. A broken rule raises CorruptRecordError (naming the record,
but for an over-long varint); a field running past the body, IndexError.

:func:`record_columns` is the one pure-Python record loop: :func:`decode_records` (the broker's
reads) and the client's pure-Python decoder (:mod:`odradek.client.record_decoder`) are built
on it. It decodes one record at a time into columns, reading varints of one and two bytes
inline from tables and the rest with :func:`varint` and :func:`varlong`.
"""

from __future__ import annotations

from itertools import repeat
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

__all__ = [
    "Headers",
    "Record",
    "RecordColumns",
    "decode_records",
    "record_columns",
    "varint",
    "varlong",
]

Headers = list[tuple[str, bytes | None]]

_ZIGZAG_1 = [(b >> 1) ^ -(b & 1) for b in range(128)]  # one-byte varint -> value
# two-byte varint (first byte b0 >= 128, second b1 < 128) -> value, at b0 + _HIGH_7[b1]
_HIGH_7 = [(b << 7) - 128 for b in range(128)]
_ZIGZAG_2 = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]


class Record(NamedTuple):
    """One decoded record. ``headers`` is a tuple of ``(str, bytes | None)`` pairs."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class RecordColumns(NamedTuple):
    """A records section decoded into columns (absolute offsets and CreateTime timestamps);
    ``headers`` maps the index of each record that has headers to them."""

    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: dict[int, Headers]


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
    count = header.record_count
    try:
        columns = record_columns(body, count, header.base_offset, header.base_timestamp)
    except IndexError:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset}: a record runs past the batch"
        ) from None
    log_append = header.attributes & ATTR_LOG_APPEND_TIME
    found = columns.headers
    return list(
        map(
            Record,
            columns.offsets,
            repeat(header.max_timestamp) if log_append else columns.timestamps,
            columns.keys,
            columns.values,
            [tuple(found.get(i, ())) for i in range(count)] if found else repeat(()),
        )
    )


def record_columns(body: bytes, count: int, base_offset: int, base_ts: int) -> RecordColumns:
    """The ``count`` records of a (decompressed) records section, checked and decoded into
    columns. Raises CorruptRecordError for a broken rule, IndexError for a field running past
    the body (both a corrupt batch)."""
    if count < 0:
        raise CorruptRecordError(f"invalid record count {count}")
    one = _ZIGZAG_1
    two = _ZIGZAG_2  # at b0 + high[b1]
    high = _HIGH_7
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers_at: dict[int, Headers] = {}
    add_offset = offsets.append
    add_ts = timestamps.append
    add_key = keys.append
    add_value = values.append
    pos = 0
    for index in range(count):
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
            add_offset(base_offset + one[b])
            pos += 1
        elif body[pos + 1] < 128:
            add_offset(base_offset + two[b + high[body[pos + 1]]])
            pos += 2
        else:
            n, pos = varint(body, pos)
            add_offset(base_offset + n)
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
        if pos != end:  # also a field that overran the record (slices clip)
            raise CorruptRecordError(f"record {index}: its length disagrees with its fields")
    if pos != len(body):
        raise CorruptRecordError(f"{len(body) - pos} bytes left after {count} records")
    return RecordColumns(offsets, timestamps, keys, values, headers_at)


def _headers(body: bytes, pos: int, index: int) -> tuple[Headers, int]:
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
