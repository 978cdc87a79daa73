"""What a cleaning pass may touch: Kafka's ``LogCleanerManager`` rules, on metadata only.

For a log whose ``cleanup.policy`` has ``compact``, the segments split into (offsets grow →)::

    [ clean: compacted before | dirty: written since | uncleanable: too new ... | active ]
    log start       first dirty offset     first uncleanable offset       active base

- **first dirty offset**: the cleaner's checkpoint (``cleaner-offset-checkpoint``, kept as
  :attr:`Log.first_dirty_offset`), clamped to the log start offset (and reset to it when the
  checkpoint is past the log end, as after a truncation).
- **first uncleanable offset**: the smallest of the active segment's base offset (the active
  segment is never cleaned), the base of the first segment not fully below the recovery point
  (only fsynced segments are rewritten, so a cleaned segment never replaces bytes a crash could
  take back), and the base of the first dirty segment whose largest timestamp is within
  ``min.compaction.lag.ms`` of now.
- **cleanable ratio** = dirty bytes / (clean + dirty bytes). A log is cleanable when it has dirty
  bytes and either the ratio is above ``min.cleanable.dirty.ratio`` or its first dirty segment
  is older than ``max.compaction.lag.ms`` (then it must be cleaned now). Of the cleanable logs
  the cleaner takes the must-clean ones first, then the filthiest (highest ratio).

Groups (Kafka's ``groupSegmentsBySize``): the segments from the log start up to the end of the
pass are cut into runs of consecutive segments whose total size fits ``segment.bytes``, whose
indexes together fit ``segment.index.bytes`` and whose offsets fit one segment (int32 relative
offsets). Each run becomes one cleaned segment, so a compacted log converges to few, full
segments instead of many small ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from odradek.storage.log import Log
from odradek.storage.segment import INT32_MAX, LogSegment

__all__ = ["CleanableLog", "choose_log", "cleanable_log", "group_segments"]


class CleanableLog(NamedTuple):
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool  # max.compaction.lag.ms has passed for its oldest dirty segment

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def cleanable(self) -> bool:
        if self.dirty_bytes <= 0:
            return False
        return self.must_clean or self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio


def _next_base(segments: list[LogSegment], i: int, log: Log) -> int:
    return segments[i + 1].base_offset if i + 1 < len(segments) else log.next_offset


def cleanable_log(log: Log, now_ms: int) -> CleanableLog:
    """The clean and dirty sections of ``log`` (see the module docstring)."""
    segments = log.segments
    config = log.config
    first_dirty = max(log.first_dirty_offset, log.log_start_offset)
    if first_dirty > log.next_offset:
        first_dirty = log.log_start_offset
    uncleanable = segments[-1].base_offset
    for i, segment in enumerate(segments[:-1]):
        if _next_base(segments, i, log) > log.recovery_point:
            uncleanable = min(uncleanable, segment.base_offset)
            break
    if config.min_compaction_lag_ms > 0:
        for i, segment in enumerate(segments[:-1]):
            if _next_base(segments, i, log) <= first_dirty:
                continue
            if segment.largest_timestamp_ms > now_ms - config.min_compaction_lag_ms:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    clean_bytes = dirty_bytes = 0
    first_dirty_segment: LogSegment | None = None
    for i, segment in enumerate(segments[:-1]):
        if _next_base(segments, i, log) <= first_dirty:
            clean_bytes += segment.size_bytes
        elif segment.base_offset < uncleanable:
            dirty_bytes += segment.size_bytes
            if first_dirty_segment is None:
                first_dirty_segment = segment
    must_clean = False
    if first_dirty_segment is not None and config.max_compaction_lag_ms < 2**63 - 1:
        first_ts = first_dirty_segment.first_batch_timestamp()
        if first_ts < 0:
            first_ts = first_dirty_segment.largest_timestamp_ms
        must_clean = now_ms - first_ts > config.max_compaction_lag_ms
    return CleanableLog(log, first_dirty, uncleanable, clean_bytes, dirty_bytes, must_clean)


def choose_log(logs: Iterable[Log], now_ms: int) -> CleanableLog | None:
    """The log to clean next: must-clean ones first, then the highest cleanable ratio."""
    best: CleanableLog | None = None
    for log in logs:
        if not log.config.compact:
            continue
        candidate = cleanable_log(log, now_ms)
        if not candidate.cleanable:
            continue
        key = (candidate.must_clean, candidate.cleanable_ratio)
        if best is None or key > (best.must_clean, best.cleanable_ratio):
            best = candidate
    return best


def group_segments(
    segments: list[LogSegment], *, max_bytes: int, max_index_bytes: int, next_offset_after: int
) -> list[list[LogSegment]]:
    """Cut ``segments`` (consecutive, inactive) into runs that each fit one segment.

    ``next_offset_after`` is the base offset of the segment following the last one given (it
    bounds the last segment's offsets).
    """
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size_bytes
        index_bytes = _index_bytes(segments[i])
        i += 1
        while i < len(segments):
            candidate = segments[i]
            following = segments[i + 1].base_offset if i + 1 < len(segments) else next_offset_after
            if (
                size + candidate.size_bytes > max_bytes
                or index_bytes + _index_bytes(candidate) > max_index_bytes
                or following - 1 - group[0].base_offset > INT32_MAX
            ):
                break
            group.append(candidate)
            size += candidate.size_bytes
            index_bytes += _index_bytes(candidate)
            i += 1
        groups.append(group)
    return groups


def _index_bytes(segment: LogSegment) -> int:
    return max(segment.offset_index.size_bytes, segment.time_index.size_bytes)
