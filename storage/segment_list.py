"""A log's segments: which of them a read or a flush walks, and every
change to the list but a roll (retention's removal of the oldest segments, the cleaner's swap,
and the delayed deletion of the files they leave).

Kafka's ``LogSegments`` with the segment-walking and segment-replacing half of ``LocalLog``. The
:class:`~odradek.storage.log.Log` keeps the offsets (log start, end, recovery point) and decides
*what* goes (retention, :mod:`odradek.storage.retention`; compaction,
:mod:`odradek.storage.cleaner`); this module changes the list and the files.

Invariants:

- ``segments`` is ordered by base offset, ``base_offsets`` lists the same base offsets, and the
  last segment is the active one; the active segment is never removed or replaced here.
- Every change but a roll (:meth:`SegmentList.add`) builds a new list and assigns it (with
  ``base_offsets``) in one go, on the event-loop thread that appends and reads: a reader on the
  loop sees the old list or the new one. Code in other threads holding the old list or an old
  segment (the group-commit flush, the cleaner) keeps working.
- A segment that leaves the list has its files renamed to ``.deleted``; they stay open (and
  readable) and are closed and unlinked only ``file.delete.delay.ms`` later
  (:meth:`SegmentList.take_due_deletions`); a closed segment's flush is a no-op. A fetch's
  :class:`~odradek.storage.segment_file.FileRegion` being sent holds its file, so even a close (that
  delay, DeleteTopics, shutdown) leaves the descriptor open until the send is done.

Crash safety: every state a crash can leave is one the loader (:mod:`odradek.storage.loader`)
resolves. Removal (:meth:`SegmentList.remove_oldest`) renames each segment's files to
``.deleted``: a crash after any rename leaves a live segment the next retention pass deletes
again, or a ``.deleted`` file the loader deletes. The swap (:meth:`SegmentList.replace`) is
Kafka's, in numbered steps there.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path

from odradek.storage.atomic import fsync_directory
from odradek.storage.loader import DELETED_SUFFIX, SWAP_SUFFIX
from odradek.storage.segment import LogSegment
from odradek.storage.segment_file import FileRegion

__all__ = ["SegmentList"]


class SegmentList:
    """One partition's segments in ``directory`` (see the module docstring)."""

    def __init__(self, directory: Path, segments: list[LogSegment]) -> None:
        self.directory = directory
        self.segments = segments
        self.base_offsets = [s.base_offset for s in segments]
        # Segments that left the list: (when their files may be deleted, the segment).
        self._pending_deletions: list[tuple[int, LogSegment]] = []

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    def read(
        self,
        offset: int,
        max_bytes: int,
        published: tuple[LogSegment, int],
        *,
        min_one_message: bool,
    ) -> FileRegion | None:
        """Up to ``max_bytes`` of batches from the one holding ``offset`` (LogSegment.read), in
        what is published: up to a position of ``published``'s segment (a reader in another
        thread must not see a partial append); None if nothing is there yet."""
        end_segment, end_position = published
        index = max(0, bisect.bisect_right(self.base_offsets, offset) - 1)
        segments = self.segments
        for i in range(index, len(segments)):
            segment = segments[i]
            # A segment before the published one is complete; the published one is read up
            # to the published position only; later ones hold nothing published yet.
            limit = end_position if segment is end_segment else None
            region = segment.read(
                offset, max_bytes, max_position=limit, min_one_message=min_one_message
            )
            if region is not None or segment is end_segment:
                return region
        return None

    def flush(self, recovery_point: int) -> None:
        """fsync every segment that may hold offsets at or above ``recovery_point``."""
        # One snapshot of the list: this runs in the group-commit thread while the event loop
        # may replace the list (a removed segment is flushed anyway, harmlessly).
        segments = self.segments
        for i, segment in enumerate(segments):
            following = segments[i + 1] if i + 1 < len(segments) else None
            if following is None or following.base_offset > recovery_point:
                segment.flush()

    def add(self, segment: LogSegment) -> None:
        """A roll: ``segment`` (starting at the log end offset) becomes the active one."""
        self.segments.append(segment)
        self.base_offsets.append(segment.base_offset)

    def _set(self, segments: list[LogSegment]) -> None:
        self.segments = segments
        self.base_offsets = [s.base_offset for s in segments]

    def remove_oldest(self, count: int, *, due_ms: int) -> list[LogSegment]:
        """Drop the ``count`` oldest segments (never the active one) and rename their files to
        ``.deleted``, to be deleted at ``due_ms``; returns them."""
        if count >= len(self.segments):
            raise ValueError("the active segment of a log is never removed")
        doomed = self.segments[:count]
        self._set(self.segments[count:])
        self._schedule_deletion(doomed, due_ms)
        return doomed

    def replace(self, new: LogSegment, old: Sequence[LogSegment], *, due_ms: int) -> bool:
        """Swap the cleaned segment ``new`` (``.cleaned`` files) in for ``old`` (compaction).

        Kafka's protocol, each step leaving a state the loader resolves:

        1. rename ``new``'s files ``.cleaned`` -> ``.swap`` and fsync the directory (crash:
           the loader finishes the swap, or deletes a partial one that still has a ``.cleaned``
           file, and the old segments stay);
        2. put ``new`` in place of ``old`` in the segment list (memory only);
        3. rename ``old``'s files to ``.deleted`` (crash: the loader deletes them and renames
           the ``.swap`` to live), to be deleted at ``due_ms``;
        4. rename ``new``'s files ``.swap`` -> live.

        Returns False (and deletes ``new``) if ``old`` is no longer a run of inactive segments
        of this list (retention or a truncation got there first).
        """
        segments = self.segments
        start = next((i for i, s in enumerate(segments) if s is old[0]), None) if old else None
        end = None if start is None else start + len(old)
        if (
            start is None
            or end is None
            or end >= len(segments)  # the active segment is never replaced
            or any(a is not b for a, b in zip(segments[start:end], old, strict=True))
        ):
            new.delete_files()
            return False
        new.change_suffix(SWAP_SUFFIX)
        fsync_directory(self.directory)
        self._set([*segments[:start], new, *segments[end:]])
        self._schedule_deletion(old, due_ms)
        new.change_suffix("")
        return True

    def _schedule_deletion(self, doomed: Sequence[LogSegment], due_ms: int) -> None:
        for segment in doomed:
            segment.change_suffix(DELETED_SUFFIX)
            self._pending_deletions.append((due_ms, segment))

    def take_due_deletions(self, now_ms: int) -> list[LogSegment]:
        """Segments whose ``file.delete.delay.ms`` has passed; the caller deletes their files
        (:meth:`LogSegment.delete_files`, possibly in another thread)."""
        due = [s for t, s in self._pending_deletions if t <= now_ms]
        if due:
            self._pending_deletions = [(t, s) for t, s in self._pending_deletions if t > now_ms]
        return due

    def close(self) -> None:
        """Close every segment, those awaiting deletion too (their files stay)."""
        for segment in self.segments:
            segment.close()
        for _, segment in self._pending_deletions:
            segment.close()
