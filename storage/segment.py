"""One log segment: ``<base offset>.log`` plus its ``.index`` and ``.timeindex``.

Files (names are the base offset, 20 digits zero-padded)::

    00000000000000000042.log        entries back to back (see storage.scan); position = byte
    00000000000000000042.index      sparse: (last offset of a batch -> its position)
    00000000000000000042.timeindex  sparse: (max timestamp so far -> last offset of its batch)

Invariants:
1. Every offset in the segment is in ``[base_offset, base_offset + 2**31 - 1]`` so that index
   entries can store it relative to the base as an int32.
2. Entries are in increasing offset order; ``size_bytes`` is the end of complete, written data.
3. An offset index entry is added when more than ``index.interval.bytes`` were appended since
   the last one; time index entries only when the max timestamp grows.

Derived: both indexes, ``max_timestamp``. After an unclean shutdown they are rebuilt by
:meth:`LogSegment.recover` from the valid prefix of the ``.log`` (what is valid, and whether
the first invalid entry can be a torn write: :mod:`odradek.storage.segment_recovery`);
the loader decides whether the bytes from there on are a torn tail to cut
(:meth:`LogSegment.drop_invalid_tail`) or damage to leave in place (:mod:`.loader`).

Crash safety:
1. ``append`` writes with ``pwritev`` at ``size_bytes`` and only then publishes the new size.
2. ``flush`` fsyncs the ``.log`` (a roll flushes the rolled segment before the next one is
   created: :meth:`odradek.storage.log.Log.roll`); indexes are msynced on roll and close only
   (they are derived).
3. A new segment's directory entry is fsynced at creation, so an acknowledged append to it
   survives a crash together with its file.

A segment's files may carry a suffix (``file_suffix``): ``.cleaned`` while the cleaner writes
it, ``.swap`` while it replaces others, ``.deleted`` once it left the log
(:meth:`LogSegment.change_suffix`; the loader's rules for each are in
:mod:`odradek.storage.loader`).

Concurrency: one writer. Readers may run in other threads: they read ``size_bytes`` once and
never look past it, and use ``pread`` (no shared file position). The ``.log`` descriptor is a
:class:`~odradek.storage.segment_file.SegmentFile`: :meth:`LogSegment.read` holds it while it
scans, and a fetch holds its ``FileRegion``'s file (same module) until the region is sent, so
closing a segment never lets its descriptor number be reused under a reader.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Sequence
from pathlib import Path

from odradek.storage.atomic import fsync_directory
from odradek.storage.config import LogConfig
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.scan import EntryInfo, scan_entries
from odradek.storage.segment_file import FileRegion, SegmentFile
from odradek.storage.segment_recovery import RecoveryResult, ValidPrefix

__all__ = ["LogSegment", "segment_path"]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
INT32_MAX = 0x7FFF_FFFF
_BASE_OFFSET = struct.Struct(">q")


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}"


class LogSegment:
    """A segment's files and the in-memory state derived from them."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        writable: bool,
        file_suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.file_suffix = file_suffix  # "" live, or ".cleaned" / ".swap" / ".deleted"
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX + file_suffix)
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.file = SegmentFile(fd, str(self.log_path))
        offset_index = None
        try:  # out of descriptors or memory half-way: release what is open, for the rollback
            self.size_bytes = os.fstat(fd).st_size
            offset_index = OffsetIndex(
                segment_path(directory, base_offset, INDEX_SUFFIX + file_suffix),
                base_offset,
                max_index_bytes,
                writable=writable,
            )
            self.time_index = TimeIndex(
                segment_path(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix),
                base_offset,
                max_index_bytes,
                writable=writable,
            )
        except BaseException:
            if offset_index is not None:
                with contextlib.suppress(OSError):
                    offset_index.close()  # trims if it still can; unmaps in any case
            self.file.close()
            raise
        self.offset_index = offset_index
        self._bytes_since_index_entry = 0
        last_ts, last_ts_offset = self.time_index.last_entry
        self.max_timestamp = last_ts
        self._offset_of_max_timestamp = last_ts_offset
        self._first_batch_timestamp: int | None = None

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        file_suffix: str = "",
    ) -> LogSegment:
        """A new, empty, writable segment; any stale files with its name are replaced."""
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            segment_path(directory, base_offset, suffix + file_suffix).unlink(missing_ok=True)
        segment = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            writable=True,
            file_suffix=file_suffix,
        )
        fsync_directory(directory)
        return segment

    # -- writing ---------------------------------------------------------------------------

    def append(
        self,
        buffers: Sequence[bytes | bytearray | memoryview],
        batches: Sequence[tuple[int, int, int]],
    ) -> int:
        """Append whole entries with one ``pwritev`` of ``buffers``; returns their position.

        ``batches`` describes them in order as ``(size_bytes, last_offset, max_timestamp)``:
        index entries are added per batch, as Kafka (3.7+) does, so every offset index entry
        points at the start of the batch whose last offset it names. The caller has assigned
        offsets and checked that they fit this segment (:meth:`should_roll`).
        """
        position = self.size_bytes
        size_bytes = sum(size for size, _, _ in batches)
        written = os.pwritev(self.file.fileno(), buffers, position)
        if written != size_bytes:  # a short write to a regular file: disk full or a signal
            os.ftruncate(self.file.fileno(), position)
            raise OSError(f"short write to {self.log_path}: {written} of {size_bytes} bytes")
        if position == 0:
            self._first_batch_timestamp = batches[0][2]
        batch_position = position
        for size, last_offset, max_timestamp in batches:
            self._index_entry(batch_position, size, last_offset, max_timestamp)
            batch_position += size
        self.size_bytes = batch_position
        return position

    def _index_entry(
        self, position: int, size_bytes: int, last_offset: int, max_timestamp: int
    ) -> None:
        """Account for one entry written (or re-read by :meth:`recover`) at ``position``: the
        max timestamp first, as Kafka does, then index entries if more than
        ``index.interval.bytes`` went by since the last. An index that fills up midway leaves
        the rest of the segment indexed more sparsely (lookups scan forward), and the next
        append rolls the segment."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self._offset_of_max_timestamp = last_offset
        if self._bytes_since_index_entry > self.index_interval_bytes and not self.indexes_full():
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size_bytes

    def should_roll(
        self,
        config: LogConfig,
        append_bytes: int,
        last_offset: int,
        max_timestamp: int,
        age_ms: int,
    ) -> bool:
        """Kafka's ``shouldRoll``: whether an append of ``append_bytes`` ending at
        ``last_offset``, with records up to ``max_timestamp``, must go to a new segment.

        Never while this segment is empty; otherwise if the append would pass
        ``segment.bytes``, if ``max_timestamp`` is more than ``segment.ms`` past the first
        batch's (if that has none: if ``age_ms``, the time this segment has been the active
        one, is), if an index is full, or if ``last_offset`` would not fit an int32 relative
        to the base offset.
        """
        if self.size_bytes == 0:
            return False
        first_ts = self.first_batch_timestamp()
        waited_ms = max_timestamp - first_ts if first_ts >= 0 else age_ms
        return (
            self.size_bytes + append_bytes > config.segment_bytes
            or waited_ms > config.segment_ms
            or self.indexes_full()
            or not 0 <= last_offset - self.base_offset <= INT32_MAX
        )

    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch (Kafka's ``rollingBasedTimestamp``), -1 if empty."""
        if self._first_batch_timestamp is None:
            first = next(scan_entries(self.file.fileno(), 0, self.size_bytes), None)
            self._first_batch_timestamp = -1 if first is None else first.max_timestamp
        return self._first_batch_timestamp

    def flush(self) -> None:
        """Make every appended byte of the ``.log`` durable.

        A segment that left the log and was closed (``file.delete.delay.ms`` later) has nothing
        left to flush: a flush of an older snapshot of the segment list skips it.
        """
        if self.file.closed:
            return
        os.fsync(self.file.fileno())

    @property
    def last_modified_ms(self) -> int:
        """The ``.log`` file's modification time (Kafka's ``LogSegment.lastModified``)."""
        return os.stat(self.file.fileno()).st_mtime_ns // 1_000_000

    def set_last_modified_ms(self, mtime_ms: int) -> None:
        """Set the ``.log`` file's modification time (a cleaned segment keeps its sources')."""
        ns = mtime_ms * 1_000_000
        os.utime(self.file.fileno(), ns=(ns, ns))

    @property
    def largest_timestamp_ms(self) -> int:
        """Kafka's ``largestTimestamp``: the max record timestamp, else the file's mtime."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    def on_become_inactive(self) -> None:
        """The segment was rolled: add the final time index entry, trim and sync the indexes."""
        self.time_index.maybe_append(
            self.max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )
        for index in (self.offset_index, self.time_index):
            index.trim_to_valid_size()
            index.flush()

    # -- recovery --------------------------------------------------------------------------

    def recover(self, max_entry_bytes: int = INT32_MAX, *, truncate: bool = True) -> RecoveryResult:
        """Rebuild both indexes from the ``.log``; with ``truncate``, cut the file at the first
        invalid byte (the loader decides whether that is a torn tail, :mod:`.loader`).

        Valid means what :mod:`odradek.storage.segment_recovery` says: a complete entry with a
        good CRC, offsets inside this segment's range and above those of the entry before it.
        Without ``truncate`` the ``.log`` is left as it is
        (only the derived indexes change) and ``size_bytes`` still covers the invalid bytes.
        """
        self.offset_index.truncate()
        self.time_index.truncate()
        self.max_timestamp, self._offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_index_entry = 0
        valid = ValidPrefix(self.file.fileno(), self.base_offset, self.size_bytes, max_entry_bytes)
        for entry in valid:
            self._index_entry(
                entry.position, entry.size_bytes, entry.last_offset, entry.max_timestamp
            )
        self._first_batch_timestamp = None
        result = valid.result()
        if truncate:
            self.drop_invalid_tail(result)
        return result

    def drop_invalid_tail(self, result: RecoveryResult) -> None:
        """Cut the ``.log`` after the valid prefix :meth:`recover` found (a torn tail)."""
        if result.truncated_bytes:
            os.ftruncate(self.file.fileno(), result.valid_bytes)
            self.size_bytes = result.valid_bytes

    # -- reading ---------------------------------------------------------------------------

    def find_entry(self, offset: int, max_position: int | None = None) -> EntryInfo | None:
        """The first entry whose last offset is ≥ ``offset`` (index lookup, then a scan)."""
        return self._find_entry(self.file.fileno(), offset, max_position)

    def _find_entry(self, fd: int, offset: int, max_position: int | None) -> EntryInfo | None:
        end = self.size_bytes if max_position is None else max_position
        _, start_position = self.offset_index.lookup(offset)
        for entry in scan_entries(fd, start_position, end):
            if entry.last_offset >= offset:
                return entry
        return None

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_position: int | None = None,
        min_one_message: bool = True,
    ) -> FileRegion | None:
        """A region starting at the entry that holds ``offset``, at most ``max_bytes`` long.

        As Kafka's ``LogSegment.read``: the region may end inside an entry when ``max_bytes``
        cuts it (consumers drop a partial trailing batch), but with ``min_one_message`` a first
        entry larger than ``max_bytes`` is returned whole. None if no entry holds ``offset``.
        """
        end = self.size_bytes if max_position is None else max_position
        fd = self.file.hold()  # a close in another thread (DeleteTopics) cannot free it mid-scan
        try:
            entry = self._find_entry(fd, offset, end)
        finally:
            self.file.release()
        if entry is None:
            return None
        length = min(end - entry.position, max_bytes)
        if min_one_message and length < entry.size_bytes:
            length = entry.size_bytes
        return FileRegion(self.file, entry.position, length)

    def next_offset_from_data(self) -> int:
        """One past the last offset stored in the ``.log`` (the base offset if empty)."""
        _, start = self.offset_index.lookup(self.base_offset + INT32_MAX)
        next_offset = self.base_offset
        for entry in scan_entries(self.file.fileno(), start, self.size_bytes):
            next_offset = entry.last_offset + 1
        return next_offset

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        if self.file.closed:
            return
        if self.time_index.writable:
            self.time_index.maybe_append(
                self.max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
            )
        self.offset_index.close()
        self.time_index.close()
        self.file.close()

    def change_suffix(self, new_suffix: str) -> None:
        """Rename all three files from the current suffix to ``new_suffix`` (``""`` = live).

        The ``.log`` is renamed last, so a crash midway leaves a ``.log`` under its old name and
        the loader's rules (:mod:`odradek.storage.loader`) still apply to it: indexes are derived
        data.
        Open file descriptors and index mappings stay valid across the rename.
        """
        old = self.file_suffix
        for index in (self.offset_index, self.time_index):
            name = index.path.name.removesuffix(old) if old else index.path.name
            index.rename(index.path.with_name(name + new_suffix))
        name = self.log_path.name.removesuffix(old) if old else self.log_path.name
        new_log = self.log_path.with_name(name + new_suffix)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.file_suffix = new_suffix

    def delete_files(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size_bytes={self.size_bytes})"
