"""ListOffsets by time: the first record at or after a timestamp (Kafka's
``fetchOffsetByTimestamp``).

:func:`offset_for_timestamp` answers for one partition's log:

- ``-2`` (earliest): the log start offset, and ``-1`` (latest): the log end offset, both with
  timestamp -1 (ListOffsets' special timestamps);
- ``-3`` (max timestamp, KIP-734): ``(offset, timestamp)`` of the first record in offset order
  with the largest timestamp of the log, found in the first segment whose max timestamp is
  the log's; None for a log without records. As in Kafka (``UnifiedLog``), the log start
  offset is not looked at: after DeleteRecords the answer may lie below it;
- any other target: ``(offset, timestamp)`` of the first record in offset order, at or after
  the log start offset, whose timestamp is at least the target; None if no record is that
  recent.

The walk: segments in offset order, skipping each whose max timestamp is below the target (it
is derived data, :mod:`odradek.storage.segment`); in a segment
(:func:`segment_offset_for_timestamp`), the time index gives the offset of its last entry at
or below the target, the offset index the position to scan batch headers from, and every batch
that may hold a match (max timestamp and last offset high enough) is read and decoded record by
record. Timestamps need not grow with offsets (CreateTime), so the first match in offset order
is found only by decoding.

A stored batch that does not decode, or whose v2 body decompresses to more than
``max_body_bytes`` (a bomb stored before produce validated records: refused, not expanded),
raises :class:`CorruptRecordError` naming its file and position.

Reads only: the walk takes one snapshot of the segment list
(:mod:`odradek.storage.segment_list`) and reads with ``pread``.
"""

from __future__ import annotations

import os

from odradek.protocol.compression import CompressionError
from odradek.protocol.legacy import decode_legacy_records
from odradek.protocol.record_batch import CorruptRecordError
from odradek.protocol.records import Record, decode_records
from odradek.protocol.validate import DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES
from odradek.storage.log import Log
from odradek.storage.scan import scan_entries
from odradek.storage.segment import LogSegment

__all__ = ["MAX_TIMESTAMP", "offset_for_timestamp", "segment_offset_for_timestamp"]

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


def offset_for_timestamp(
    log: Log, timestamp_ms: int, max_body_bytes: int = DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES
) -> tuple[int, int] | None:
    """ListOffsets for ``log``: ``(offset, timestamp)`` (see the module docstring)."""
    if timestamp_ms == EARLIEST_TIMESTAMP:
        return log.log_start_offset, -1
    if timestamp_ms == LATEST_TIMESTAMP:
        return log.next_offset, -1
    segments = list(log.segments)
    if timestamp_ms == MAX_TIMESTAMP:
        latest = max(segments, key=lambda segment: segment.max_timestamp, default=None)
        if latest is None or latest.max_timestamp < 0:
            return None
        target = latest.max_timestamp
        return segment_offset_for_timestamp(latest, target, latest.base_offset, max_body_bytes)
    for segment in segments:
        if segment.max_timestamp < timestamp_ms:
            continue
        found = segment_offset_for_timestamp(
            segment, timestamp_ms, log.log_start_offset, max_body_bytes
        )
        if found is not None:
            return found
    return None


def segment_offset_for_timestamp(
    segment: LogSegment,
    timestamp_ms: int,
    start_offset: int,
    max_body_bytes: int = DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES,
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record in ``segment`` with timestamp at least
    ``timestamp_ms`` and offset at least ``start_offset``, or None if it has none."""
    _, index_offset = segment.time_index.lookup(timestamp_ms)
    _, position = segment.offset_index.lookup(max(index_offset, start_offset))
    for entry in scan_entries(segment.file.fileno(), position, segment.size_bytes):
        if entry.max_timestamp < timestamp_ms or entry.last_offset < start_offset:
            continue
        data = os.pread(segment.file.fileno(), entry.size_bytes, entry.position)
        try:
            records = _decode_entry(data, entry.magic, max_body_bytes)
        except (CorruptRecordError, CompressionError) as exc:  # a batch stored damaged
            raise CorruptRecordError(
                f"{segment.log_path} position {entry.position}: unreadable batch: {exc}"
            ) from None
        for record in records:
            if record.timestamp_ms >= timestamp_ms and record.offset >= start_offset:
                return record.offset, record.timestamp_ms
    return None


def _decode_entry(data: bytes, magic: int, max_body_bytes: int) -> list[Record]:
    """The records of one stored entry; a v2 body over ``max_body_bytes`` decompressed is
    refused, not expanded."""
    if magic == 2:
        return decode_records(data, max_decompressed_bytes=max_body_bytes)
    return decode_legacy_records(data)
