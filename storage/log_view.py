"""A read-only view of a partition directory, for readers that are not the broker.

Readers outside the broker (the Spark file reader, forensics on a dead broker's disk) see the
files while a broker may still append to them. They never take ``.lock``, never create, write,
truncate, resize or map-for-write any file: every read here is ``open(O_RDONLY)`` + ``pread``
(or one ``read`` of a small file). The broker's index classes preallocate and truncate on open
(:mod:`odradek.storage.mapped_index`), so this module reads the same byte layouts itself:

    <base>.log        entries back to back (:mod:`odradek.storage.scan`)
    <base>.index      8-byte entries:  relative offset int32 | position int32
    <base>.timeindex 12-byte entries:  timestamp int64       | relative offset int32
    <base>.txnindex  34-byte entries:  version int16 (0) | producerId int64 | firstOffset int64
                                       | lastOffset int64 | lastStableOffset int64
                     (Kafka's ``TransactionIndex``: one entry per *aborted* transaction whose
                     ABORT marker is in the segment; odradek refuses transactions and never
                     writes one)

Which files count (Kafka's recovery rules, :mod:`odradek.storage.loader`, applied to the
listing only, never to the disk): ``*.deleted``, ``*.cleaned`` and ``*.tmp`` are ignored;
``*.swap`` segments replace the live segments of their offset range (as recovery would rename
them), unless a ``.cleaned`` at or below them says their cleaning pass never finished; indexes
are only looked at beside a ``.log`` (orphans are ignored); a missing index means a scan.

Invariants a reader relies on:

1. The ``.log`` is append-only: bytes below a position the reader found complete never change
   while the file keeps its inode (retention and compaction replace whole files, recorded by
   :attr:`ListedSegment.inode`).
2. Indexes are derived data and may be stale (after a crash), preallocated (an active
   segment's index ends in zero entries) or torn. Only the longest strictly increasing prefix of
   entries is kept, and an offset index entry is used only after the batch header at its
   position agrees with it (:func:`locate`); otherwise the reader scans from position 0.
3. :func:`readable_end` fixes where a segment's complete, CRC-valid data ends *now*: a batch a
   running broker is still writing, or the torn tail of a crash, is left out, and a reader that
   stops there sees every record wholly or not at all.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.legacy import decode_legacy_records
from odradek.protocol.records import Record, decode_records
from odradek.storage.scan import EntryInfo, InvalidEntry, scan_entries, validated_entries

__all__ = [
    "AbortedTransaction",
    "ListedSegment",
    "first_offset_at_timestamp",
    "hint_position",
    "list_segments",
    "locate",
    "read_aborted_transactions",
    "read_offset_index",
    "read_time_index",
    "readable_end",
]

_SEGMENT_NAME = re.compile(r"^(\d{20})\.log(\.swap|\.cleaned)?$")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True)
class ListedSegment:
    """One segment as listed: the file to read, its base offset and its identity."""

    path: Path  # a live ``.log`` or a ``.log.swap`` that recovery would promote
    base_offset: int
    device: int
    inode: int
    size_bytes: int  # st_size when listed (a running broker may have appended since)

    def sibling(self, suffix: str) -> Path:
        """The segment's ``.index`` / ``.timeindex`` / ``.txnindex`` (same file suffix)."""
        name = self.path.name.replace(".log", suffix, 1)
        return self.path.with_name(name)


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker


def _stat_segment(path: Path, base_offset: int) -> ListedSegment | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:  # deleted (retention) between the listing and now
        return None
    return ListedSegment(path, base_offset, st.st_dev, st.st_ino, st.st_size)


def list_segments(partition_dir: Path) -> list[ListedSegment]:
    """The segments a reader should read, in base offset order (see the module docstring)."""
    live: dict[int, Path] = {}
    swaps: dict[int, Path] = {}
    cleaned: list[int] = []
    for name in os.listdir(partition_dir):
        match = _SEGMENT_NAME.match(name)
        if match is None:
            continue
        base, suffix = int(match.group(1)), match.group(2)
        if suffix is None:
            live[base] = partition_dir / name
        elif suffix == ".swap":
            swaps[base] = partition_dir / name
        else:
            cleaned.append(base)
    if cleaned:  # an unfinished cleaning pass: its swaps (a split) are not complete
        swaps = {b: p for b, p in swaps.items() if b < min(cleaned)}
    if swaps:
        low = min(swaps)
        high = max(_next_offset(path, base) for base, path in swaps.items())
        live = {b: p for b, p in live.items() if not low <= b < high}
        live.update(swaps)
    found = (_stat_segment(path, base) for base, path in sorted(live.items()))
    return [segment for segment in found if segment is not None]


def _next_offset(path: Path, base_offset: int) -> int:
    """One past the last offset of a complete segment file (a ``.swap``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        last = None
        for entry in scan_entries(fd, 0, os.fstat(fd).st_size):
            last = entry
        return base_offset if last is None else last.last_offset + 1
    finally:
        os.close(fd)


def _read_small(path: Path) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except FileNotFoundError:
        return b""


def read_offset_index(path: Path, base_offset: int) -> list[tuple[int, int]]:
    """``(offset, position)`` entries of an ``.index``: its strictly increasing prefix (a
    preallocated or stale tail ends it). Missing file: no entries."""
    data = _read_small(path)
    entries: list[tuple[int, int]] = []
    last_relative = last_position = -1
    for relative, position in _OFFSET_ENTRY.iter_unpack(data[: len(data) // 8 * 8]):
        if relative <= last_relative or position <= last_position:
            break
        last_relative, last_position = relative, position
        if relative == 0 and position == 0:
            continue  # a zero first slot (preallocated): says nothing, never indexed by Kafka
        entries.append((base_offset + relative, position))
    return entries


def read_time_index(path: Path, base_offset: int) -> list[tuple[int, int]]:
    """``(timestamp_ms, offset)`` entries of a ``.timeindex``: its prefix with strictly
    increasing timestamps and non-decreasing offsets."""
    data = _read_small(path)
    entries: list[tuple[int, int]] = []
    last_timestamp = last_relative = -1
    for timestamp, relative in _TIME_ENTRY.iter_unpack(data[: len(data) // 12 * 12]):
        if timestamp <= last_timestamp or relative < last_relative or relative < 0:
            break
        last_timestamp, last_relative = timestamp, relative
        if timestamp == 0 and relative == 0:
            continue  # a zero first slot (preallocated): says nothing
        entries.append((timestamp, base_offset + relative))
    return entries


def read_aborted_transactions(path: Path) -> list[AbortedTransaction]:
    """The entries of a ``.txnindex`` up to the first partial or unknown-version one."""
    data = _read_small(path)
    result = []
    for version, producer_id, first, last, _ in _TXN_ENTRY.iter_unpack(
        data[: len(data) // _TXN_ENTRY.size * _TXN_ENTRY.size]
    ):
        if version != 0 or last < first:
            break
        result.append(AbortedTransaction(producer_id, first, last))
    return result


def locate(
    fd: int, index: list[tuple[int, int]], offset: int, end_position: int
) -> EntryInfo | None:
    """The first entry in ``[0, end_position)`` whose last offset is ≥ ``offset``.

    The scan starts at :func:`hint_position`. None past the data.
    """
    for entry in scan_entries(fd, hint_position(fd, index, offset, end_position), end_position):
        if entry.last_offset >= offset:
            return entry
    return None


def hint_position(fd: int, index: list[tuple[int, int]], offset: int, end_position: int) -> int:
    """Where a scan for ``offset`` may start: the position of the largest index entry with an
    offset ≤ ``offset`` if the entry header there starts at or below that entry's offset (Kafka
    indexes a batch's last offset, or an append's largest offset, against the position of its
    first batch), else 0."""
    i = bisect.bisect_right(index, (offset, 1 << 62)) - 1
    if i < 0:
        return 0
    indexed_offset, position = index[i]
    if position >= end_position:
        return 0
    head = next(scan_entries(fd, position, end_position), None)
    return position if head is not None and head.base_offset <= indexed_offset else 0


def readable_end(fd: int, start_position: int, size_bytes: int) -> tuple[int, EntryInfo | None]:
    """Where complete, CRC-valid entries from ``start_position`` end, and the last of them.

    Every entry from ``start_position`` to ``size_bytes`` is read whole and checked
    (:func:`~odradek.storage.scan.validated_entries`); the first incomplete or invalid one (a
    write in progress, a torn tail) ends the readable data.
    """
    end, last = start_position, None
    for entry in validated_entries(fd, start_position, size_bytes):
        if isinstance(entry, InvalidEntry):
            break
        end, last = entry.next_position, entry
    return end, last


def first_offset_at_timestamp(
    fd: int,
    segment: ListedSegment,
    timestamp_ms: int,
    min_offset: int,
    end_position: int,
    offset_index: list[tuple[int, int]],
) -> int | None:
    """The first offset ≥ ``min_offset`` in ``[0, end_position)`` of this segment whose record
    timestamp is ≥ ``timestamp_ms`` (Kafka's ListOffsets by time), or None.

    The time index gives where to start when its entry agrees with the log (the batch holding
    its offset has its timestamp as max timestamp); otherwise the scan starts at position 0.
    """
    start_offset = min_offset
    entries = read_time_index(segment.sibling(".timeindex"), segment.base_offset)
    i = bisect.bisect_right(entries, (timestamp_ms, 1 << 62)) - 1
    if i >= 0:
        indexed_ts, indexed_offset = entries[i]
        hint = locate(fd, offset_index, indexed_offset, end_position)
        if (
            hint is not None
            and hint.base_offset <= indexed_offset
            and hint.max_timestamp == indexed_ts
        ):
            start_offset = max(start_offset, hint.base_offset)
    found = locate(fd, offset_index, start_offset, end_position)
    if found is None:
        return None
    for entry in scan_entries(fd, found.position, end_position):
        if entry.max_timestamp < timestamp_ms or entry.last_offset < min_offset:
            continue
        for record in _records(fd, entry):
            if record.timestamp_ms >= timestamp_ms and record.offset >= min_offset:
                return record.offset
    return None


def _records(fd: int, entry: EntryInfo) -> list[Record]:
    data = os.pread(fd, entry.size_bytes, entry.position)
    if entry.magic == 2:
        return decode_records(data)
    return decode_legacy_records(data)
