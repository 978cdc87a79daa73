"""Kafka's sparse segment indexes (``.index`` and ``.timeindex``), memory-mapped and preallocated.

Byte layout (big-endian, no header, no checksum; Kafka's ``OffsetIndex`` / ``TimeIndex``)::

    .index       8-byte entries:  relative offset int32 | position int32
    .timeindex  12-byte entries:  timestamp int64       | relative offset int32

A relative offset is ``offset - base_offset`` of the segment (the file name's base offset), so
it must fit in ``[0, 2**31 - 1]``; a segment rolls before it would not. An offset entry maps
the last offset of a batch to the byte position where that batch starts in the ``.log``; a time
entry ``(T, O)`` says every record with a timestamp above ``T`` comes at or after offset ``O``.

Invariants:
- Offset index: offsets strictly increase, and so do positions.
- Time index: timestamps strictly increase (an entry is added only when the timestamp beats the
  last one), offsets never decrease. The last slot is kept for the entry written on roll
  (``maybe_append(..., skip_full_check=True)``), so ``is_full`` is ``entries >= max_entries - 1``.
- Every offset is at least the base offset.

Derived data, crash safety and concurrency are the same for both kinds and live with the file
they share, :mod:`odradek.storage.mapped_index`: both files are rebuilt from the ``.log`` whenever
they are not trusted; a crash leaves at worst an untrimmed or torn file, which ``sanity_check``
reports (:class:`CorruptIndexError`) so that the log rebuilds it.
"""

from __future__ import annotations

import struct

from odradek.storage.mapped_index import (
    DEFAULT_MAX_INDEX_BYTES,
    INT32_MAX,
    CorruptIndexError,
    IndexFullError,
    MappedIndex,
)
from odradek.storage.mapping import MappedBytes

__all__ = [
    "DEFAULT_MAX_INDEX_BYTES",
    "NO_TIMESTAMP",
    "CorruptIndexError",
    "IndexFullError",
    "OffsetIndex",
    "TimeIndex",
]

NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
_INT64_MAX = 2**63 - 1


class OffsetIndex(MappedIndex):
    """``.index``: the largest indexed offset <= a target, and where its batch starts."""

    ENTRY = struct.Struct(">ii")
    _KIND = "offset index"
    _KEY = struct.Struct(">i")
    _REL_AT = 0
    _COLUMNS = (("offset", True), ("position", True))

    def _parse(self, mm: MappedBytes, slot: int) -> tuple[int, int]:
        relative, position = self.ENTRY.unpack_from(mm, slot * 8)
        return self._base_offset + relative, position

    def _empty(self) -> tuple[int, int]:
        return self._base_offset, 0

    @property
    def last_offset(self) -> int:
        """Offset of the last entry; the base offset when empty."""
        return self._last[0]

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, else (base, 0)."""
        return self._lookup(target_offset - self._base_offset)

    def append(self, offset: int, position: int) -> None:
        """Add ``offset -> position``; both must be above the last entry's."""
        self._require_writable()
        entries = self._entries
        if entries >= self._max_entries:
            raise IndexFullError(f"{self._path} is full ({entries} entries)")
        last_offset, last_position = self._last
        if entries and offset <= last_offset:
            raise ValueError(f"offset {offset} is not above the last offset {last_offset}")
        relative = self._relative(offset)
        if not 0 <= position <= INT32_MAX or (entries and position <= last_position):
            raise ValueError(
                f"position {position} is not above the last position {last_position} "
                "or does not fit int32"
            )
        self._write(entries, relative, position, (offset, position))


class TimeIndex(MappedIndex):
    """``.timeindex``: the largest indexed timestamp <= a target, and the offset to start at."""

    ENTRY = struct.Struct(">qi")
    _KIND = "time index"
    _KEY = struct.Struct(">q")
    _REL_AT = 8
    _COLUMNS = (("timestamp", True), ("offset", False))

    def _parse(self, mm: MappedBytes, slot: int) -> tuple[int, int]:
        timestamp, relative = self.ENTRY.unpack_from(mm, slot * 12)
        return timestamp, self._base_offset + relative

    def _empty(self) -> tuple[int, int]:
        return NO_TIMESTAMP, self._base_offset

    @property
    def is_full(self) -> bool:
        # The last slot is kept for the entry appended on roll (skip_full_check=True).
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; ``(-1, base_offset)`` when empty."""
        return self._last

    def lookup(self, target_timestamp_ms: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base)."""
        return self._lookup(target_timestamp_ms)

    def maybe_append(
        self, timestamp_ms: int, offset: int, *, skip_full_check: bool = False
    ) -> bool:
        """Append ``timestamp_ms -> offset`` if the timestamp beats the last one (Kafka).

        Returns whether an entry was added. A timestamp or offset below the last entry's is a
        ValueError; an equal timestamp is skipped (the same entry again as a segment closes).
        """
        self._require_writable()
        if not skip_full_check and self.is_full:
            raise IndexFullError(f"{self._path} is full ({self._entries} entries)")
        entries = self._entries
        last_timestamp, last_offset = self._last
        if entries and offset < last_offset:
            raise ValueError(f"offset {offset} is below the last offset {last_offset}")
        if entries and timestamp_ms < last_timestamp:
            raise ValueError(f"timestamp {timestamp_ms} is below the last {last_timestamp}")
        if timestamp_ms <= last_timestamp:
            return False
        if timestamp_ms > _INT64_MAX:
            raise ValueError(f"timestamp {timestamp_ms} does not fit int64")
        relative = self._relative(offset)
        if entries >= self._max_entries:
            raise IndexFullError(f"{self._path} is full ({entries} entries)")
        self._write(entries, timestamp_ms, relative, (timestamp_ms, offset))
        return True
