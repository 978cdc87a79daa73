"""Planning a read of log directories: offset ranges → one task per segment or byte range.

The offset ranges come from the same rules as a broker-backed read (``resolve`` on
:class:`~odradek.spark.files_layout.LogDirs`, then ``split_ranges`` for ``minPartitions``).
Each range is then cut where its partition's segments begin, and a segment part larger than
``maxPartitionBytes`` is cut again at offset index entries that agree with the log. A
:class:`FileRange` is one Spark task:

    records  from_offset <= offset < until_offset   of one topic-partition
    bytes    [start_position, end_position)         of one segment file (device, inode)

Invariants:

1. Tasks of one partition have disjoint offset ranges that together cover the planned range,
   so no record is read twice and none is missed, even if a task has to fall back to reading
   by offsets (a segment replaced by compaction, :mod:`odradek.spark.files_read`).
2. ``end_position`` never passes the segment's readable end fixed at planning
   (:mod:`odradek.spark.files_layout`), and starts and ends are entry boundaries (a task checks
   that its walk lands exactly on ``end_position``).
3. A task carries the aborted transactions that overlap its offsets, so it can skip their
   batches without reading any other file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import pairwise

from pyspark.sql.datasource import InputPartition

from odradek.spark.files_layout import PartitionLog, SegmentSpan
from odradek.spark.planning import OffsetRange
from odradek.storage.log_view import locate
from odradek.storage.scan import scan_entries

__all__ = ["DEFAULT_MAX_PARTITION_BYTES", "FileRange", "plan_file_ranges"]

DEFAULT_MAX_PARTITION_BYTES = 128 << 20  # Spark's spark.sql.files.maxPartitionBytes default


@dataclass(frozen=True)
class FileRange(InputPartition):
    """One task: records ``[from_offset, until_offset)`` found in bytes
    ``[start_position, end_position)`` of the segment file ``path``."""

    topic: str
    partition: int
    path: str
    base_offset: int  # the segment's
    device: int
    inode: int
    from_offset: int
    until_offset: int
    start_position: int
    end_position: int
    aborted: tuple[tuple[int, int, int], ...] = ()  # (producer id, first offset, last offset)

    @property
    def size_bytes(self) -> int:
        return self.end_position - self.start_position


def plan_file_ranges(
    plog: PartitionLog, offset_range: OffsetRange, max_partition_bytes: int
) -> list[FileRange]:
    """The tasks reading ``offset_range`` of ``plog`` (see the module docstring)."""
    result: list[FileRange] = []
    spans = plog.segments
    for i, span in enumerate(spans):
        low = max(offset_range.from_offset, span.file.base_offset)
        high = min(offset_range.until_offset, span.next_offset)
        if i + 1 < len(spans):
            high = min(high, spans[i + 1].file.base_offset)
        if high <= low:
            continue
        result.extend(_segment_ranges(plog, span, low, high, max_partition_bytes))
    return result


def _segment_ranges(
    plog: PartitionLog, span: SegmentSpan, low: int, high: int, max_bytes: int
) -> list[FileRange]:
    """Offsets ``[low, high)`` of one segment, cut into pieces of about ``max_bytes``."""
    fd = os.open(span.file.path, os.O_RDONLY)
    try:
        index = list(span.offset_index)
        first = locate(fd, index, low, span.end_position)
        if first is None:
            return []
        start = first.position
        if high >= span.next_offset:
            end = span.end_position
        else:
            after = locate(fd, index, high, span.end_position)
            if after is None:
                end = span.end_position
            elif after.magic != 2 or after.base_offset < high:
                # ``high`` may fall inside this entry (a legacy entry names only its last
                # offset): read it whole, the task filters by offset
                end = after.next_position
            else:
                end = after.position
        cuts = _cuts(fd, index, start, end, low, high, max_bytes)
    finally:
        os.close(fd)
    bounds = [(start, low), *cuts, (end, high)]
    return [
        FileRange(
            plog.topic,
            plog.partition,
            str(span.file.path),
            span.file.base_offset,
            span.file.device,
            span.file.inode,
            from_offset,
            until_offset,
            start_position,
            end_position,
            _aborted(plog, from_offset, until_offset),
        )
        for (start_position, from_offset), (end_position, until_offset) in pairwise(bounds)
        if until_offset > from_offset
    ]


def _cuts(
    fd: int,
    index: list[tuple[int, int]],
    start: int,
    end: int,
    low: int,
    high: int,
    max_bytes: int,
) -> list[tuple[int, int]]:
    """``(position, base offset)`` of the entries to cut ``[start, end)`` at, about every
    ``max_bytes``: index positions whose entry header agrees with the index."""
    if end - start <= max_bytes:
        return []
    pieces = -(-(end - start) // max_bytes)
    target = (end - start) / pieces
    cuts: list[tuple[int, int]] = []
    next_cut = start + target
    for offset, position in index:
        if position <= start or position >= end or position < next_cut:
            continue
        head = next(scan_entries(fd, position, end), None)
        if head is None or head.magic != 2 or head.base_offset > offset:
            continue  # an index entry that does not fit the log: no cut there
        if not low < head.base_offset < high or (cuts and head.base_offset <= cuts[-1][1]):
            continue
        cuts.append((position, head.base_offset))
        next_cut = position + target
    return cuts


def _aborted(plog: PartitionLog, low: int, high: int) -> tuple[tuple[int, int, int], ...]:
    return tuple(
        (t.producer_id, t.first_offset, t.last_offset)
        for t in plog.aborted
        if t.last_offset >= low and t.first_offset < high
    )
