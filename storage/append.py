"""Steps 1 and 2 of an append: validate a produce request's batches for one partition, re-encode
them if the topic's ``compression.type`` says so, and check the sizes (:func:`prepare_append`);
then place them at their offsets (:func:`place_batches`). :meth:`Log.append
<odradek.storage.log.Log.append>` checks the producer state and does steps 3-4: roll, write,
publish.

Pure CPU work on the request's bytes and the log's config: no file, no log state. So the
broker may run it in a worker thread while the log is appended to; :class:`PreparedAppend`
records the config it was made under, and the append makes it again if that changed.

Rules (before any byte is written, so a bad request writes nothing):
- every batch passes :func:`odradek.protocol.validate.validate_produced_batch` (every record,
  compressed bodies within the request's decompression budget);
- a compacted topic refuses a record without a key (INVALID_RECORD, as Kafka);
- a batch is at most ``max.message.bytes``, checked first (as Kafka: an oversized batch costs
  no decompression) and again after re-encoding; the whole append at most
  ``segment.bytes`` and at most 2^31 offsets, what one segment can index (its offsets are
  stored relative to its base as int32): MESSAGE_TOO_LARGE.

Placement (:func:`place_batches`, on the appending thread): each batch goes out as a new
16-byte prefix — baseOffset int64 (bytes 0..7), batchLength int32 (8..11, unchanged),
partitionLeaderEpoch int32 (12..15) — then the client's bytes 16..end, untouched. The CRC
covers bytes 21..end only, so neither stamp costs a copy or a CRC. Only LogAppendTime, or a
maxTimestamp that is not the largest record timestamp (Kafka overwrites it too), copies the
batch once to stamp the timestamp, which is under the CRC. Legacy v0/v1 entries never get here:
validation accepts magic 2 only.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.protocol.recompress import recompress_batch, target_codec
from odradek.protocol.record_batch import (
    ATTR_LOG_APPEND_TIME,
    HEADER_SIZE,
    MAGIC_OFFSET,
    MAGIC_V2,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    parse_batch_header,
    recompute_crc,
)
from odradek.protocol.validate import DecompressionBudget, validate_produced_batch
from odradek.storage.config import LogConfig
from odradek.storage.errors import RecordTooLargeError
from odradek.storage.segment import INT32_MAX

__all__ = ["PlacedAppend", "PreparedAppend", "place_batches", "prepare_append"]

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")


class PreparedAppend(NamedTuple):
    """Validated (and possibly re-encoded) batches, ready to be given offsets and written."""

    config: LogConfig  # the config they were validated under
    batches: list[tuple[memoryview, BatchHeader, int]]  # with each batch's true maxTimestamp
    record_count: int
    size_bytes: int


def prepare_append(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    name: str,
    budget: DecompressionBudget | None = None,
) -> PreparedAppend:
    """Validate ``records`` for the partition ``name`` under ``config`` (module docstring).

    ``budget``: what compressed batches may decompress to (the request's, shared by its
    partitions); None: :meth:`DecompressionBudget.default`.
    """
    view = memoryview(records).cast("B")
    budget = budget if budget is not None else DecompressionBudget.default()
    batches: list[tuple[memoryview, BatchHeader, int]] = []
    position = 0
    record_count = 0
    size = 0
    codec = target_codec(config.compression_type)
    while position < len(view):
        _check_size_first(view, position, config, name)
        checked = validate_produced_batch(view, position, budget)
        header = checked.header
        batch = view[position : position + header.size_bytes]
        position += header.size_bytes
        if config.compact and checked.has_keyless_record:
            raise InvalidRecordError(f"Compacted topic cannot accept message without key in {name}")
        if codec is not None and header.compression != codec:
            batch = memoryview(recompress_batch(batch, codec, checked.body))
            header = parse_batch_header(batch)
            _check_size(header.size_bytes, config, name)
        batches.append((batch, header, checked.max_record_timestamp))
        record_count += header.record_count
        size += header.size_bytes
    if not batches:
        raise CorruptRecordError("produce request holds no record batch")
    if size > config.segment_bytes:
        raise RecordTooLargeError(
            f"{size} bytes in one append exceed segment.bytes {config.segment_bytes}"
        )
    if record_count - 1 > INT32_MAX:
        raise RecordTooLargeError(
            f"{record_count} records in one append exceed the {INT32_MAX + 1} offsets "
            "a segment can index"
        )
    return PreparedAppend(config, batches, record_count, size)


def _check_size_first(view: memoryview, position: int, config: LogConfig, name: str) -> None:
    """As Kafka: a whole v2 batch's size is checked before anything else about it (an
    oversized bomb costs no decompression). A header that is no batch's (another magic, a
    length past the request) is left to validation: CORRUPT_MESSAGE, not a size error."""
    available = len(view) - position
    if available < HEADER_SIZE or view[position + MAGIC_OFFSET] != MAGIC_V2:
        return
    size_bytes = parse_batch_header(view, position).size_bytes
    if size_bytes <= available:
        _check_size(size_bytes, config, name)


def _check_size(size_bytes: int, config: LogConfig, name: str) -> None:
    if size_bytes > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {size_bytes} bytes exceeds max.message.bytes "
            f"{config.max_message_bytes} of {name}"
        )


# What :func:`place_batches` returns (a plain tuple: it is built on every append):
# (buffers for one pwritev, (size, last offset, max timestamp) per batch, the next offset,
#  the largest max timestamp, (header, assigned base offset, stored maxTimestamp) of each batch
#  with a producer id or None if there is none)
PlacedAppend = tuple[
    list[bytes | bytearray | memoryview],
    list[tuple[int, int, int]],
    int,
    int,
    list[tuple[BatchHeader, int, int]] | None,
]


def place_batches(
    prepared: PreparedAppend, first_offset: int, leader_epoch: int, append_time_ms: int
) -> PlacedAppend:
    """Assign offsets from ``first_offset`` and stamp ``leader_epoch`` (module docstring).

    ``append_time_ms``: the LogAppendTime to stamp, or -1 under CreateTime.
    """
    offset = first_offset
    buffers: list[bytes | bytearray | memoryview] = []
    entries: list[tuple[int, int, int]] = []
    producer_batches: list[tuple[BatchHeader, int, int]] | None = None
    max_timestamp = -1
    pack = _PREFIX.pack
    for batch, header, record_max_ts in prepared.batches:
        body = batch
        last = offset + header.last_offset_delta
        if append_time_ms >= 0:
            body = _stamp(batch, append_time_ms, log_append_time=True)
            batch_max_ts = append_time_ms
        elif header.max_timestamp != record_max_ts:  # Kafka sets it from the records too
            body = _stamp(batch, record_max_ts, log_append_time=False)
            batch_max_ts = record_max_ts
        else:
            batch_max_ts = header.max_timestamp
        buffers.append(pack(offset, header.batch_length, leader_epoch))
        buffers.append(body[16:])
        entries.append((header.size_bytes, last, batch_max_ts))
        if header.producer_id >= 0:
            if producer_batches is None:
                producer_batches = []
            producer_batches.append((header, offset, batch_max_ts))
        if batch_max_ts > max_timestamp:
            max_timestamp = batch_max_ts
        offset = last + 1
    return buffers, entries, offset, max_timestamp, producer_batches


def _stamp(batch: memoryview, max_timestamp: int, *, log_append_time: bool) -> memoryview:
    """A copy of ``batch`` with maxTimestamp set (and LogAppendTime if asked), CRC
    recomputed."""
    copy = bytearray(batch)
    if log_append_time:
        (attributes,) = _ATTRIBUTES.unpack_from(copy, 21)
        _ATTRIBUTES.pack_into(copy, 21, attributes | ATTR_LOG_APPEND_TIME)
    _MAX_TIMESTAMP.pack_into(copy, 35, max_timestamp)
    recompute_crc(copy)
    return memoryview(copy)
