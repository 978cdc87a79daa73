"""Retention (``cleanup.policy=delete``): which of a log's oldest segments go, and why.

Kafka's three rules (``UnifiedLog.deleteOldSegments``), applied in this order to the oldest
segments of the log; each rule only ever deletes a prefix of the segment list:

1. **log start offset** (always, whatever the policy): a segment whose records are all below
   the log start offset (DeleteRecords moved it) goes: the next segment's base offset is at or
   below the log start offset.
2. **time** (``retention.ms`` ≥ 0, policy has ``delete``): a segment goes when
   ``now_ms - largest timestamp > retention.ms``; the largest timestamp is the max record
   timestamp of the segment, or the file's mtime if it holds none (Kafka's
   ``largestTimestamp``). The scan stops at the first segment too young to go.
3. **size** (``retention.bytes`` ≥ 0, policy has ``delete``): the oldest segments go while the
   log would still be at least ``retention.bytes`` long without them.

The active segment counts like the others: if every segment is due, the log rolls first (an
empty active segment stays, at the log end offset) and the old active segment goes too; an
empty active segment is never deleted. Deleting is :meth:`Log.remove_segments`: list first,
then the ``.deleted`` renames, files unlinked ``file.delete.delay.ms`` later; the log start
offset advances to the first remaining segment (the broker then writes the checkpoint).

Everything here is metadata only (no file is read): the broker runs it on the event-loop
thread, where appends happen, so no append can interleave with a removal.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.storage.log import Log
from odradek.storage.segment import LogSegment

__all__ = ["RetentionResult", "apply_retention", "deletable_segments"]


class RetentionResult(NamedTuple):
    """One rule's deletion from one log (the broker logs one line per result)."""

    reason: str  # "log-start-offset", "retention-ms", "retention-bytes"
    segments: int
    bytes_deleted: int
    base_offsets: tuple[int, ...]
    log_start_offset: int  # after the deletion


def _prefix_below_log_start(log: Log) -> list[LogSegment]:
    segments = log.segments
    out = []
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        if following is None or following.base_offset > log.log_start_offset:
            break
        out.append(segment)
    return out


def _prefix_expired(log: Log, now_ms: int) -> list[LogSegment]:
    retention_ms = log.config.retention_ms
    out = []
    for segment in log.segments:
        if segment.size_bytes == 0 or now_ms - segment.largest_timestamp_ms <= retention_ms:
            break
        out.append(segment)
    return out


def _prefix_over_size(log: Log) -> list[LogSegment]:
    excess = log.size_bytes - log.config.retention_bytes
    out = []
    for segment in log.segments:
        if segment.size_bytes == 0 or excess - segment.size_bytes < 0:
            break
        excess -= segment.size_bytes
        out.append(segment)
    return out


def deletable_segments(log: Log, now_ms: int) -> list[tuple[str, list[LogSegment]]]:
    """The first rule (in the module's order) that would delete something, with its prefix."""
    rules = [("log-start-offset", lambda: _prefix_below_log_start(log))]
    if log.config.delete and log.config.retention_ms >= 0:
        rules.append(("retention-ms", lambda: _prefix_expired(log, now_ms)))
    if log.config.delete and log.config.retention_bytes >= 0:
        rules.append(("retention-bytes", lambda: _prefix_over_size(log)))
    for reason, rule in rules:
        doomed = rule()
        if doomed:
            return [(reason, doomed)]
    return []


def apply_retention(log: Log, now_ms: int) -> list[RetentionResult]:
    """Apply every rule in turn to ``log``; one result per rule that deleted segments."""
    results = []
    for _ in range(3):  # each rule at most once: a later rule sees what an earlier one left
        found = deletable_segments(log, now_ms)
        if not found:
            break
        reason, doomed = found[0]
        bases = tuple(s.base_offset for s in doomed)
        size = sum(s.size_bytes for s in doomed)
        start = log.remove_segments(doomed, now_ms=now_ms)
        # No rule ever picks an empty segment, so every segment in ``doomed`` went.
        results.append(RetentionResult(reason, len(doomed), size, bases, start))
    return results
