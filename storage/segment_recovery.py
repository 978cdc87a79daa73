"""Which prefix of a segment's ``.log`` is valid, and whether the bytes after it can be a torn
write. Nothing here writes: :meth:`LogSegment.recover <odradek.storage.segment.LogSegment.recover>`
rebuilds the indexes from the valid entries, and the loader (:mod:`odradek.storage.loader`)
decides what to do with the rest.

Valid (invariants 1 and 2 of :mod:`odradek.storage.segment`): an entry complete with a good
checksum (:func:`odradek.storage.scan.validated_entries`: size, magic, CRC-32C or CRC32), its
offsets above those of the entry before it and inside ``[base offset, base offset + 2**31 - 1]``.
The walk stops at the first entry that is not.

Torn or damaged: a first invalid entry that is incomplete, of an implausible size or with a bad
checksum is one a write cut short can leave (``torn_write_possible``). A complete v2 batch
whose checksum matches but whose offsets do not fit was written whole: no crash made it, so it
is damage, which the loader leaves in place.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from odradek.protocol.record_batch import (
    CRC_START,
    HEADER_SIZE,
    MAGIC_OFFSET,
    MAGIC_V2,
    parse_batch_header,
)
from odradek.storage.mapped_index import INT32_MAX  # an index stores offsets relative, as int32
from odradek.storage.scan import EntryInfo, InvalidEntry, validated_entries

__all__ = ["RecoveryResult", "ValidPrefix", "offsets_problem"]


class RecoveryResult(NamedTuple):
    """What :meth:`LogSegment.recover` found: ``[0, valid_bytes)`` holds valid entries."""

    valid_bytes: int
    truncated_bytes: int  # invalid bytes after the valid prefix (cut off only if asked)
    reason: str | None  # why validation stopped, if it did
    next_offset: int = 0  # one past the last offset of the valid prefix
    # Whether the first invalid entry looks like a write the crash cut short (incomplete,
    # implausible size, bad checksum). False for an entry whose checksum is good but whose
    # offsets do not fit: no torn write makes that, so it is damage, not a crash artifact.
    torn_write_possible: bool = True


def offsets_problem(entry: EntryInfo, base_offset: int, previous_last: int) -> str | None:
    """Why a valid entry's offsets cannot follow ``previous_last`` in the segment at
    ``base_offset`` (invariant 1 and 2), or None if they can."""
    if entry.last_offset <= previous_last or not 0 <= entry.last_offset - base_offset <= INT32_MAX:
        return (
            f"offset {entry.last_offset} out of order or outside the segment "
            f"(previous {previous_last})"
        )
    return None


class ValidPrefix:
    """The valid entries of ``[0, size_bytes)`` of the ``.log`` open as ``fd``, in order (iterate
    once); then :meth:`result` says where the valid prefix ends and why."""

    def __init__(self, fd: int, base_offset: int, size_bytes: int, max_entry_bytes: int) -> None:
        self._fd = fd
        self._base_offset = base_offset
        self._size_bytes = size_bytes
        self._max_entry_bytes = max_entry_bytes
        self._valid_bytes = 0
        self._previous_last = base_offset - 1
        self._reason: str | None = None
        self._torn_write_possible = True

    def __iter__(self) -> Iterator[EntryInfo]:
        fd, size_bytes = self._fd, self._size_bytes
        for entry in validated_entries(fd, 0, size_bytes, max_entry_bytes=self._max_entry_bytes):
            if isinstance(entry, InvalidEntry):
                self._reason = entry.reason
                self._torn_write_possible = not _checksum_intact(fd, entry.position, size_bytes)
                return
            self._reason = offsets_problem(entry, self._base_offset, self._previous_last)
            if self._reason is not None:
                self._torn_write_possible = False
                return
            self._valid_bytes += entry.size_bytes
            self._previous_last = entry.last_offset
            yield entry

    def result(self) -> RecoveryResult:
        return RecoveryResult(
            self._valid_bytes,
            self._size_bytes - self._valid_bytes,
            self._reason,
            self._previous_last + 1,
            self._torn_write_possible,
        )


def _checksum_intact(fd: int, position: int, end: int) -> bool:
    """Whether a complete v2 batch with a matching CRC-32C starts at ``position``. Such an
    entry is no torn write: if it fails another check, the log is damaged, not torn."""
    head = os.pread(fd, HEADER_SIZE, position)
    if len(head) < HEADER_SIZE or head[MAGIC_OFFSET] != MAGIC_V2:
        return False
    header = parse_batch_header(head)
    if not HEADER_SIZE <= header.size_bytes <= end - position:
        return False
    data = os.pread(fd, header.size_bytes, position)
    return crc32c(memoryview(data)[CRC_START:]) == header.crc
