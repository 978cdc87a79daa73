"""Broker-side validation of a produced v2 batch: every record, as Kafka's ``LogValidator``.

The batch header alone proves nothing about the records: its ``recordCount`` and
``lastOffsetDelta`` may agree with each other and the CRC may be valid while the body holds one
record, or bytes that are no record at all. Appending such a batch would let the log's offsets
jump past what a segment can index and plant a batch no consumer can read. So before a batch
is appended, :func:`validate_produced_batch`:

1. checks the envelope (:func:`~odradek.protocol.record_batch.validate_client_batch`: size, magic 2,
   CRC-32C, ``recordCount > 0``, ``lastOffsetDelta == recordCount - 1``, not a control batch,
   a sequence number if it has a producer id);
2. decompresses the body within a :class:`DecompressionBudget`
   (:func:`~odradek.protocol.compression.decompress_bounded`: never more than the budget's
   limit in memory; a bomb is refused, not expanded);
3. walks every record (layout in :mod:`odradek.protocol.records`): each varint well formed,
   as Kafka reads them (an int32 field in at most 5 bytes, the int64 timestamp delta in at
   most 10: what the consumers and the broker's own reads accept, no more);
   ``length`` at least 6 and within the body; offset deltas ``0, 1, ..., recordCount - 1``;
   key, value and header lengths ``>= -1`` (header keys ``>= 0``) and within the record; the
   fields ending exactly at ``length``; exactly ``recordCount`` records, then no byte more;
   the largest ``baseTimestamp + timestampDelta`` an int64 (it becomes the batch's
   maxTimestamp).

Errors, as Kafka chooses them: a sound envelope whose contents break a rule raises
:class:`~odradek.protocol.record_batch.InvalidRecordError` (INVALID_RECORD); a bad envelope or a
body its codec cannot decode raises :class:`~odradek.protocol.record_batch.CorruptRecordError` or
:class:`~odradek.protocol.compression.CompressionError` (CORRUPT_MESSAGE); over the budget,
:class:`~odradek.protocol.compression.DecompressionLimitError`.

The walk returns what the append needs without a second pass: the decompressed body (for a
re-encode under ``compression.type``), whether a record has no key (compacted topics refuse
it) and the largest record timestamp (the batch's true ``maxTimestamp``).
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.protocol import native
from odradek.protocol.compression import DecompressionLimitError, decompress_bounded
from odradek.protocol.record_batch import (
    ATTR_COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    InvalidRecordError,
    validate_client_batch,
)
from odradek.protocol.records import varint, varlong
from odradek.protocol.varint import VARINT_TRUNCATED

__all__ = [
    "DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_REQUEST_MAX_DECOMPRESSED_BYTES",
    "DecompressionBudget",
    "ValidatedBatch",
    "check_records",
    "has_compressed_batch",
    "stored_batch_bound",
    "validate_produced_batch",
    "walk_records",
]

# Kafka has no such bound (it streams records out of a compressed batch, so its memory is
# bounded, but not its CPU). Ours: 32x message.max.bytes' default per batch, 4 batches' worth
# per request (the broker keys message.max.decompressed.bytes and
# produce.request.max.decompressed.bytes).
DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES = 32 * 1024 * 1024
DEFAULT_REQUEST_MAX_DECOMPRESSED_BYTES = 128 * 1024 * 1024

_MIN_RECORD_BYTES = 6  # attributes, then five one-byte varints (Kafka's minimum record size)
_INT64_MAX = 2**63 - 1


def stored_batch_bound(produce_bound_bytes: int) -> int:
    """What a *stored* batch may decompress to when read back (ListOffsets, the cleaner): never
    less than what produce accepts now (``message.max.decompressed.bytes``), nor less than the
    default (a batch accepted under it before the key was lowered stays readable). A bigger
    body was stored before produce validated records: refused, never expanded."""
    return max(produce_bound_bytes, DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES)


class DecompressionBudget:
    """How many decompressed bytes one request may still produce, and one batch at most.

    One instance per request: each batch may decompress to ``min(per_batch_bytes,
    what the request has left)``; what a batch decompresses to is charged to the request.
    """

    __slots__ = ("per_batch_bytes", "remaining_bytes")

    def __init__(self, per_batch_bytes: int, per_request_bytes: int) -> None:
        self.per_batch_bytes = per_batch_bytes
        self.remaining_bytes = per_request_bytes

    @classmethod
    def default(cls) -> DecompressionBudget:
        return cls(DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES, DEFAULT_REQUEST_MAX_DECOMPRESSED_BYTES)

    def limit(self) -> int:
        return max(0, min(self.per_batch_bytes, self.remaining_bytes))

    def spend(self, n_bytes: int) -> None:
        self.remaining_bytes -= n_bytes


class ValidatedBatch(NamedTuple):
    header: BatchHeader
    body: Buffer  # the records, decompressed (a view into the request when not compressed)
    has_keyless_record: bool
    max_record_timestamp: int  # -1 (Kafka's NO_TIMESTAMP) if every record has a lower one


def validate_produced_batch(buf: Buffer, pos: int, budget: DecompressionBudget) -> ValidatedBatch:
    """Validate the batch at ``buf[pos:]`` (see the module docstring); the buffer may continue
    past it."""
    header = validate_client_batch(buf, pos)
    view = memoryview(buf)[pos + HEADER_SIZE : pos + header.size_bytes]
    codec = header.attributes & ATTR_COMPRESSION_MASK
    body: Buffer = view
    if codec:
        limit = budget.limit()
        try:
            body = decompress_bounded(codec, view, limit)
        except DecompressionLimitError:
            budget.spend(limit)
            bound = (
                "message.max.decompressed.bytes"
                if limit == budget.per_batch_bytes
                else "what is left of produce.request.max.decompressed.bytes"
            )
            raise DecompressionLimitError(codec, limit, bound) from None
        budget.spend(len(body))
    keyless, max_timestamp = check_records(body, header)
    return ValidatedBatch(header, body, keyless, max_timestamp)


def check_records(body: Buffer, header: BatchHeader) -> tuple[bool, int]:
    """Walk the decompressed ``body`` of a batch with ``header`` (rules in the module
    docstring); returns (a record has a null key, the largest record timestamp).

    The C walk (``odradek.protocol._validate``, loaded by :mod:`odradek.protocol.native`)
    when it is built and not disabled, else its pure-Python twin :func:`walk_records`.
    """
    return _walk(body, header.record_count, header.base_timestamp, header.last_offset_delta)


def walk_records(
    body: Buffer, count: int, base_ts: int, last_offset_delta: int
) -> tuple[bool, int]:
    """The pure-Python record walk (rules in the module docstring; layout and the rules' order
    in protocol/_validate.c, its C twin, which accepts and refuses exactly the same bodies with
    the same messages); ``count``, ``base_ts`` and ``last_offset_delta`` are the header's.

    A one-byte varint (almost every length and delta) is decoded inline, longer ones by
    :func:`~odradek.protocol.records.varint` and :func:`~odradek.protocol.records.varlong`.
    """
    data = bytes(body)  # indexing bytes is faster than indexing a memoryview
    end = len(data)
    pos = 0
    keyless = False
    max_ts = -1
    delta = 0
    try:
        for delta in range(count):
            if pos >= end:
                raise InvalidRecordError(
                    f"batch declares {count} records but holds {delta} "
                    f"(recordCount {count}, lastOffsetDelta {last_offset_delta})"
                )
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = varint(data, pos)
            record_end = pos + length
            if length < _MIN_RECORD_BYTES or record_end > end:
                raise InvalidRecordError(
                    f"record {delta}: length {length} does not fit the {end}-byte batch body"
                )
            pos += 1  # attributes: unused in v2
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                ts_delta, pos = varlong(data, pos)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = varint(data, pos)
            if offset_delta != delta:
                raise InvalidRecordError(
                    f"record {delta}: offset delta {offset_delta} (deltas must run 0, 1, ...)"
                )
            b = data[pos]
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_length, pos = varint(data, pos)
            if key_length < 0:
                keyless = True
                if key_length < -1:
                    raise InvalidRecordError(f"record {delta}: key length {key_length}")
            else:
                pos += key_length
            value_length, pos = varint(data, pos)
            if value_length >= 0:
                pos += value_length
            elif value_length < -1:
                raise InvalidRecordError(f"record {delta}: value length {value_length}")
            if pos >= record_end:
                raise InvalidRecordError(f"record {delta}: key or value overruns the record")
            b = data[pos]
            if b == 0:  # no headers: the usual case
                pos += 1
            else:
                pos = _skip_headers(data, pos, record_end, delta)
            if pos != record_end:
                raise InvalidRecordError(
                    f"record {delta}: declares {length} bytes, its fields take "
                    f"{length + pos - record_end}"
                )
            timestamp = base_ts + ts_delta
            if timestamp > max_ts:
                max_ts = timestamp
    except InvalidRecordError:
        raise
    except CorruptRecordError as exc:  # a varint too long (protocol.records.varint)
        raise InvalidRecordError(f"record {delta}: {exc}") from None
    except IndexError:  # an inline varint's first byte, past the end
        raise InvalidRecordError(f"record {delta}: {VARINT_TRUNCATED}") from None
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes after the batch's {count} records")
    if max_ts > _INT64_MAX:  # it becomes the batch's maxTimestamp, an int64
        raise InvalidRecordError(f"record timestamp {max_ts} is not an int64")
    return keyless, max_ts


def _skip_headers(data: bytes, pos: int, record_end: int, delta: int) -> int:
    """The position after a record's headers (count, then key and value per header)."""
    header_count, pos = varint(data, pos)
    if header_count < 0 or header_count > record_end - pos:
        raise InvalidRecordError(f"record {delta}: invalid header count {header_count}")
    for _ in range(header_count):
        name_length, pos = varint(data, pos)
        if name_length < 0 or pos + name_length > record_end:
            raise InvalidRecordError(f"record {delta}: header key length {name_length}")
        pos += name_length
        value_length, pos = varint(data, pos)
        if value_length < -1 or pos + value_length > record_end:
            raise InvalidRecordError(f"record {delta}: header value length {value_length}")
        pos += max(value_length, 0)
    return pos


_native = native.load("odradek.protocol._validate")  # None: not built, or disabled
_walk = walk_records if _native is None else _native.walk_records


def has_compressed_batch(buf: Buffer) -> bool:
    """Whether a batch of the back-to-back batches in ``buf`` has a codec (only the headers
    are read; a malformed length ends the walk: validation will say what is wrong)."""
    pos = 0
    end = len(buf) - HEADER_SIZE
    while pos <= end:
        if buf[pos + 22] & ATTR_COMPRESSION_MASK:  # the low byte of the int16 attributes
            return True
        batch_length = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
        if batch_length <= 0:
            return False
        pos += LOG_OVERHEAD + batch_length
    return False
