"""Step 1 of an append: validate a produce request's batches for one partition, re-encode them
if the topic's ``compression.type`` says so, and check the sizes (:meth:`Log.append
<odradek.storage.log.Log.append>` does steps 2-4: offsets, roll, write, publish).

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
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.protocol.recompress import recompress_batch, target_codec
from odradek.protocol.records import (
    HEADER_SIZE,
    MAGIC_OFFSET,
    MAGIC_V2,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    parse_batch_header,
)
from odradek.protocol.validate import DecompressionBudget, validate_produced_batch
from odradek.storage.config import LogConfig
from odradek.storage.errors import RecordTooLargeError
from odradek.storage.segment import INT32_MAX

__all__ = ["PreparedAppend", "prepare_append"]


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
