"""One partition's log: an ordered list of segments, appended to at the end.

Offsets: ``log_start_offset`` ≤ every readable offset < ``next_offset`` (the log end offset,
which on one node is also the high watermark). ``recovery_point`` ≤ ``next_offset`` is the
offset below which every byte is known to be on disk (fsynced).

Append (:meth:`Log.append`), for the bytes of one produce request to this partition:
1. Every batch is validated record by record as Kafka's LogValidator does, re-encoded if
   ``compression.type`` says so and checked against ``max.message.bytes`` before any byte is
   written: a bad request writes nothing (:func:`odradek.storage.append.prepare_append`).
2. Offsets and the leader epoch are stamped into a new 16-byte prefix of each batch (the CRC
   does not cover bytes 0..20), so a batch is never re-encoded
   (:func:`odradek.storage.append.place_batches`).
3. Batches with a producer id pass the idempotent-producer checks
   (:mod:`odradek.storage.producer_state`): a retried batch (a duplicate of one of the
   producer's last 5) writes nothing and answers the original offsets (``duplicate=True``); a
   stale epoch, a sequence gap or a transactional batch fails the whole append, nothing written.
4. One append may span at most 2^31 offsets (a segment indexes offsets relative to its base
   as int32): more is refused (MESSAGE_TOO_LARGE). The active segment rolls first if the
   append would overflow it (:meth:`LogSegment.should_roll`, Kafka's ``shouldRoll``);
   a roll writes a producer-state snapshot (:mod:`odradek.storage.producer_snapshot`);
   then all batches go out in one ``pwritev``, and the producer state is updated.
5. ``next_offset`` is published last, so concurrent readers never see a partial append.

Step 1 is :meth:`Log.prepare_append`, steps 2-5 :meth:`Log.append`: the broker may prepare a
heavy append in a worker thread (it reads only the config, and is made again if the config
changed meanwhile), then append on the event loop, which alone reads and changes the producer
state.

Crash safety: an append is durable once :meth:`flush` returns (the broker calls it before
acknowledging ``acks=all``). After a crash, the loader re-validates from the recovery point.

Reading: :meth:`read` for Fetch; ListOffsets by time is :mod:`odradek.storage.timestamp_lookup`.

Removing and replacing segments (retention, :mod:`odradek.storage.retention`; compaction,
:mod:`odradek.storage.cleaner`) happens only in :meth:`remove_segments` and
:meth:`replace_segments`, which the broker calls on the event-loop thread, the thread that appends
and reads. Here the log moves its offsets; :mod:`odradek.storage.segment_list` changes the list
and the files, with the rules that keep concurrent readers and a crash safe.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.validate import DecompressionBudget
from odradek.storage.append import PreparedAppend, place_batches, prepare_append
from odradek.storage.config import LogConfig
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from odradek.storage.loader import load_log
from odradek.storage.producer_snapshot import delete_snapshots, sync_snapshot, take_snapshot
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.segment import LogSegment
from odradek.storage.segment_file import FileRegion
from odradek.storage.segment_list import SegmentList

__all__ = ["AppendInfo", "FetchInfo", "Log"]

logger = logging.getLogger(__name__)


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int
    log_append_time_ms: int  # -1 under CreateTime
    size_bytes: int
    rolled: bool
    # A retry of a batch already in the log: nothing was written, the offsets are the
    # original batch's (log_append_time_ms its timestamp under LogAppendTime).
    duplicate: bool = False


class FetchInfo(NamedTuple):
    region: FileRegion | None  # None: nothing at or after the offset yet
    high_watermark: int
    log_start_offset: int


class Log:
    """A partition log. Single writer; reads may run concurrently (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        next_offset: int,
        now_ms: int,
        producer_state: ProducerStateManager | None = None,
        leader_epochs: LeaderEpochCache | None = None,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._segments = SegmentList(directory, segments)
        self.log_start_offset = max(log_start_offset, segments[0].base_offset)
        self.recovery_point = recovery_point
        self.next_offset = next_offset
        self._published = (next_offset, segments[-1], segments[-1].size_bytes)
        self._active_created_ms = now_ms
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        # Producer snapshots written at a roll without fsync; the next flush syncs them.
        self._unsynced_snapshots: list[Path] = []
        # The cleaner's progress (cleaner-offset-checkpoint): offsets below it are compacted.
        self.first_dirty_offset = self.log_start_offset
        # Derived from the .snapshot files and the log (Log.open rebuilds them).
        self.producer_state = producer_state or ProducerStateManager(
            config.producer_id_expiration_ms
        )
        self.producer_state.map_end_offset = max(self.producer_state.map_end_offset, next_offset)
        self.leader_epochs = leader_epochs or LeaderEpochCache(
            directory / LEADER_EPOCH_CHECKPOINT, [(0, self.log_start_offset)]
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        now_ms: int,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
    ) -> Log:
        """Load (or create) the log in ``directory``, recovering as :mod:`odradek.storage.loader`
        says."""
        directory.mkdir(parents=True, exist_ok=True)
        loaded = load_log(
            directory,
            config,
            now_ms=now_ms,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
        )
        return cls(
            directory,
            topic,
            partition,
            config,
            loaded.segments,
            log_start_offset=loaded.log_start_offset,
            recovery_point=loaded.recovery_point,
            next_offset=loaded.next_offset,
            now_ms=now_ms,
            producer_state=loaded.producer_state,
            leader_epochs=loaded.leader_epochs,
        )

    @property
    def segments(self) -> list[LogSegment]:
        """The segments by base offset, the active one last (replaced whole when one goes)."""
        return self._segments.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments)

    @property
    def high_watermark(self) -> int:
        return self.next_offset

    # -- appending -------------------------------------------------------------------------

    def prepare_append(
        self, records: bytes | bytearray | memoryview, budget: DecompressionBudget | None = None
    ) -> PreparedAppend:
        """Step 1 of :meth:`append` (:func:`odradek.storage.append.prepare_append`): CPU work
        that reads nothing but ``self.config``, so the caller may run it in a worker thread
        while this log is appended to (module docstring)."""
        return prepare_append(records, self.config, f"{self.topic}-{self.partition}", budget)

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        now_ms: int,
        budget: DecompressionBudget | None = None,
        prepared: PreparedAppend | None = None,
    ) -> AppendInfo:
        """Validate, assign offsets to and append the batches in ``records`` (see module doc).

        ``prepared``: what :meth:`prepare_append` made of ``records`` (in a worker thread); it
        is made again here if this log's config changed since.
        """
        if prepared is None or prepared.config is not self.config:
            prepared = self.prepare_append(records, budget)
        first_offset = self.next_offset
        append_time = now_ms if self.config.log_append_time else -1
        buffers, entries, offset, max_timestamp, producer_batches = place_batches(
            prepared, first_offset, self.leader_epochs.latest_epoch, append_time
        )
        updated = None
        if producer_batches is not None:
            state = self.producer_state
            state.maybe_remove_expired_producers(now_ms)
            duplicate, updated = state.check(producer_batches)
            if duplicate is not None:
                return AppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.last_offset - duplicate.first_offset + 1,
                    duplicate.timestamp_ms,
                    duplicate.timestamp_ms if append_time >= 0 else -1,
                    0,
                    False,
                    True,
                )
        last_offset = offset - 1
        age_ms = now_ms - self._active_created_ms
        rolled = self.active_segment.should_roll(
            self.config, prepared.size_bytes, last_offset, max_timestamp, age_ms
        )
        if rolled:
            self.roll(now_ms)
        active = self.active_segment
        active.append(buffers, entries)
        if updated:
            self.producer_state.apply(updated)  # its map_end_offset is set when it is saved
        # Publish the end offset together with the byte position it ends at (one tuple store),
        # so a reader in another thread never sees data beyond the end offset it reads.
        self._published = (offset, active, active.size_bytes)
        self.next_offset = offset
        self._unflushed_messages += offset - first_offset
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
        return AppendInfo(
            first_offset,
            last_offset,
            prepared.record_count,
            max_timestamp,
            append_time,
            prepared.size_bytes,
            rolled,
        )

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at ``next_offset`` (no-op if the active one is empty).

        Crash safety (a power cut at any point leaves at most the *last* segment torn, which
        the loader truncates; a torn segment followed by data is damage to it):
        1. fsync the rolled segment's ``.log``: its bytes are durable before any byte of the
           next segment is written;
        2. create the new segment (its directory entry fsynced: :meth:`LogSegment.create`);
        3. write the producer-state snapshot without fsync (the next flush syncs it).
        """
        active = self.active_segment
        if active.size_bytes == 0:
            return active
        active.on_become_inactive()
        active.flush()
        segment = LogSegment.create(
            self.directory,
            self.next_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
        )
        self._segments.add(segment)
        self._active_created_ms = now_ms
        # Kafka snapshots the producer state at the new segment's base offset, so recovery
        # can start there and replay that segment only.
        self.producer_state.map_end_offset = self.next_offset
        snapshot = take_snapshot(self.directory, self.producer_state, sync=False)
        if snapshot is not None:  # fsynced by the next flush, off this thread
            self._unsynced_snapshots.append(snapshot)
        logger.debug("rolled %s-%d at offset %d", self.topic, self.partition, self.next_offset)
        return segment

    def flush(self) -> None:
        """fsync every segment holding offsets at or above the recovery point, and the producer
        snapshots rolls wrote since the last flush."""
        while True:  # pop() is atomic: safe against a concurrent flush and a roll adding one
            try:
                snapshot = self._unsynced_snapshots.pop()
            except IndexError:
                break
            sync_snapshot(snapshot)
        target = self.next_offset
        if target == self.recovery_point:
            return
        self._segments.flush(self.recovery_point)
        # Two flushes may overlap (the group-commit thread and flush.messages): never go back.
        self.recovery_point = max(self.recovery_point, target)
        self._unflushed_messages = 0

    # -- reading ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, min_one_message: bool = True) -> FetchInfo:
        """Up to ``max_bytes`` of batches from the one holding ``offset`` (see LogSegment.read).

        ``offset == next_offset`` reads nothing; outside ``[log_start_offset, next_offset]``
        raises :class:`OffsetOutOfRangeError`.
        """
        end, end_segment, end_position = self._published
        start = self.log_start_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(offset, start, end)
        if offset == end:
            return FetchInfo(None, end, start)
        region = self._segments.read(
            offset, max_bytes, (end_segment, end_position), min_one_message=min_one_message
        )
        return FetchInfo(region, end, start)

    # -- log start and end ---------------------------------------------------------------

    def advance_log_start_offset(self, offset: int) -> int:
        """DeleteRecords: records below ``offset`` become unreadable; returns the new start."""
        if offset > self.next_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.next_offset)
        self.log_start_offset = max(self.log_start_offset, offset)
        self._on_log_start_offset_moved()
        return self.log_start_offset

    def _on_log_start_offset_moved(self) -> None:
        """Kafka keeps the producer state (only time expires it) and folds the leader epochs
        below the new start; the epoch file is written with the next checkpoints."""
        self.producer_state.on_log_start_offset_incremented(self.log_start_offset)
        self.leader_epochs.truncate_from_start(self.log_start_offset)

    # -- removing and replacing segments (event-loop thread; see the module docstring) -----

    def remove_segments(self, doomed: Sequence[LogSegment], *, now_ms: int) -> int:
        """Drop the oldest ``len(doomed)`` segments (retention); returns the new log start.

        ``doomed`` must be the head of the segment list. If it is the whole list, the active
        segment is rolled first, so the log keeps an (empty) active segment at its end offset.
        The log start offset moves to the first remaining segment's base offset (it never moves
        back); the files go as :meth:`SegmentList.remove_oldest` says.
        """
        count = len(doomed)
        if count == 0:
            return self.log_start_offset
        if any(a is not b for a, b in zip(doomed, self.segments, strict=False)):
            raise ValueError("only the oldest segments of a log can be removed")
        if count >= len(self.segments):
            self.roll(now_ms)
            if self.active_segment in doomed:  # the active segment was empty: keep it
                count -= 1
        self.log_start_offset = max(self.log_start_offset, self.segments[count].base_offset)
        self.first_dirty_offset = max(self.first_dirty_offset, self.log_start_offset)
        removed = self._segments.remove_oldest(count, due_ms=self._deletion_due_ms(now_ms))
        # Kafka's deleteProducerSnapshots: the snapshots named by the removed segments go.
        delete_snapshots(self.directory, [s.base_offset for s in removed])
        self._on_log_start_offset_moved()
        return self.log_start_offset

    def replace_segments(self, new: LogSegment, old: Sequence[LogSegment], *, now_ms: int) -> bool:
        """Swap the cleaned segment ``new`` in for ``old`` (compaction), in the steps of
        :meth:`SegmentList.replace`. False (``new`` deleted) if ``old`` is no longer a run of
        inactive segments of this log (retention or a truncation got there first)."""
        return self._segments.replace(new, old, due_ms=self._deletion_due_ms(now_ms))

    def _deletion_due_ms(self, now_ms: int) -> int:
        return now_ms + self.config.file_delete_delay_ms

    def take_due_deletions(self, now_ms: int) -> list[LogSegment]:
        """Segments whose ``file.delete.delay.ms`` has passed; the caller deletes their files
        (:meth:`LogSegment.delete_files`, possibly in another thread)."""
        return self._segments.take_due_deletions(now_ms)

    def close(self) -> None:
        """Flush, snapshot the producer state at the log end offset (a clean shutdown's
        snapshot) and close every segment (the final time index entries are appended)."""
        self.flush()
        self.producer_state.map_end_offset = self.next_offset
        take_snapshot(self.directory, self.producer_state)
        self.leader_epochs.flush_if_dirty()
        self._segments.close()

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"end={self.next_offset}, segments={len(self.segments)})"
        )
