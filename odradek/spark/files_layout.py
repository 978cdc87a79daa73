"""The driver's view of ``log.dirs``: which partitions exist, and what each one holds now.

:class:`LogDirs` answers the planning code's :class:`~odradek.spark.metadata.Cluster` questions
(topics, ListOffsets) from the files, so ``discover``/``bounds``/``resolve`` work unchanged
for a read with no broker. Everything is read-only (:mod:`odradek.storage.log_view`).

Per partition, :class:`PartitionLog` is fixed once, at planning time:

1. The segments to read (:func:`~odradek.storage.log_view.list_segments`: Kafka's recovery
   rules for ``.deleted`` / ``.cleaned`` / ``.swap`` files, applied to the listing only).
2. Each segment's readable end: from its last offset index entry that agrees with the log (or
   from position 0), every entry is read whole and its CRC checked; the first incomplete or
   invalid one ends the segment's data. A batch a running broker is still writing is thus left
   out wholly, and records appended after planning are never read (each task stops at its
   planned end position).
3. As Kafka's recovery does, a segment whose data ends before its file does (a torn tail)
   ends the log: later segments are left out, with a warning.
4. Log start offset = max(first segment's base offset, the root's
   ``log-start-offset-checkpoint`` entry); log end offset = one past the last readable offset.
5. Aborted transactions: the ``.txnindex`` entries of every segment (Kafka-written logs only).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.spark.options import EARLIEST, LATEST, OdradekOptionError, TopicPartition
from odradek.storage.checkpoints import CheckpointError, read_offset_checkpoint
from odradek.storage.log_view import (
    AbortedTransaction,
    ListedSegment,
    first_offset_at_timestamp,
    hint_position,
    list_segments,
    read_aborted_transactions,
    read_offset_index,
    readable_end,
)
from odradek.storage.topics import parse_partition_dir

__all__ = ["LogDirs", "PartitionLog", "SegmentSpan"]

log = logging.getLogger("odradek.spark")

LOG_START_CHECKPOINT = "log-start-offset-checkpoint"


@dataclass(frozen=True)
class SegmentSpan:
    """A segment's readable part: offsets ``[base_offset, next_offset)`` in bytes
    ``[0, end_position)`` of ``file``."""

    file: ListedSegment
    next_offset: int
    end_position: int
    offset_index: tuple[tuple[int, int], ...]  # entries below end_position that fit the log


@dataclass(frozen=True)
class PartitionLog:
    topic: str
    partition: int
    directory: Path
    segments: tuple[SegmentSpan, ...]
    log_start_offset: int
    log_end_offset: int
    aborted: tuple[AbortedTransaction, ...]


def _span(segment: ListedSegment) -> tuple[SegmentSpan, bool]:
    """The segment's readable span and whether its file holds bytes past it (a torn tail)."""
    index = read_offset_index(segment.sibling(".index"), segment.base_offset)
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        start = hint_position(fd, index, index[-1][0], size) if index else 0
        end, last = readable_end(fd, start, size)
        if start and last is None:  # the index does not fit the log: check all of it
            end, last = readable_end(fd, 0, size)
        next_offset = segment.base_offset if last is None else last.last_offset + 1
        kept = tuple((o, p) for o, p in index if p < end)
        return SegmentSpan(segment, max(next_offset, segment.base_offset), end, kept), end < size
    finally:
        os.close(fd)


def load_partition(topic: str, partition: int, root: Path) -> PartitionLog:
    """Read one partition directory's layout (see the module docstring)."""
    directory = root / f"{topic}-{partition}"
    spans: list[SegmentSpan] = []
    aborted: list[AbortedTransaction] = []
    segments = list_segments(directory)
    for i, segment in enumerate(segments):
        try:
            span, torn = _span(segment)
        except FileNotFoundError:  # retention deleted it since the listing
            continue
        spans.append(span)
        aborted.extend(read_aborted_transactions(segment.sibling(".txnindex")))
        if torn and i + 1 < len(segments):
            log.warning(
                "%s: invalid bytes after position %d; the %d later segment(s) are left out, "
                "as Kafka's recovery would delete them",
                segment.path,
                span.end_position,
                len(segments) - i - 1,
            )
            break
    start = spans[0].file.base_offset if spans else 0
    with contextlib.suppress(CheckpointError):
        checkpoint = read_offset_checkpoint(root / LOG_START_CHECKPOINT)
        start = max(start, checkpoint.get((topic, partition), 0))
    end = spans[-1].next_offset if spans else start
    return PartitionLog(
        topic, partition, directory, tuple(spans), min(start, end), end, tuple(aborted)
    )


class LogDirs:
    """:class:`~odradek.spark.metadata.Cluster` over the partition directories of ``roots``."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = [Path(r) for r in roots]
        self._where: dict[TopicPartition, Path] = {}
        for root in self.roots:
            if not root.is_dir():
                raise OdradekOptionError("log.dirs", f"{str(root)!r} is not a directory")
            for name in sorted(os.listdir(root)):
                tp = parse_partition_dir(name)
                if tp is None or not (root / name).is_dir():
                    continue
                if tp in self._where:
                    raise OdradekOptionError(
                        "log.dirs",
                        f"{tp[0]}-{tp[1]} is in two roots: {self._where[tp]} and {root}",
                    )
                self._where[tp] = root
        self._logs: dict[TopicPartition, PartitionLog] = {}

    def partition_log(self, tp: TopicPartition) -> PartitionLog:
        if tp not in self._logs:
            if tp not in self._where:
                raise OdradekOptionError(
                    "log.dirs",
                    f"no directory {tp[0]}-{tp[1]} under {', '.join(map(str, self.roots))}",
                )
            self._logs[tp] = load_partition(tp[0], tp[1], self._where[tp])
        return self._logs[tp]

    # -- the Cluster protocol ---------------------------------------------------------------

    def topics(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, partition in self._where:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def list_offsets(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        result: dict[TopicPartition, int | None] = {}
        for tp, what in query.items():
            if tp not in self._where:
                result[tp] = None
                continue
            plog = self.partition_log(tp)
            if what == EARLIEST:
                result[tp] = plog.log_start_offset
            elif what == LATEST:
                result[tp] = plog.log_end_offset
            else:
                result[tp] = _offset_for_time(plog, what)
        return result

    def close(self) -> None:
        """Nothing is held open between calls."""


def _offset_for_time(plog: PartitionLog, timestamp_ms: int) -> int | None:
    """The first offset ≥ the log start with a record timestamp ≥ ``timestamp_ms``."""
    for span in plog.segments:
        if span.next_offset <= plog.log_start_offset:
            continue
        fd = os.open(span.file.path, os.O_RDONLY)
        try:
            found = first_offset_at_timestamp(
                fd,
                span.file,
                timestamp_ms,
                plog.log_start_offset,
                span.end_position,
                list(span.offset_index),
            )
        finally:
            os.close(fd)
        if found is not None:
            return found
    return None
