"""The memory-mapped, preallocated file under both of Kafka's sparse segment indexes.

:class:`MappedIndex` (Kafka's ``AbstractIndex``) owns the file, the mapping, the entry count,
the binary search, the checks and the resizing; :mod:`odradek.storage.index` defines the two kinds,
``.index`` and ``.timeindex``, on top of it.

Byte layout: a flat array of fixed-size entries (``ENTRY``; big-endian, no header, no
checksum) of two columns each. The sort key (``_KEY``: relative offset or timestamp) sits at
byte 0; the relative offset (``offset - base_offset``, int32) at ``_REL_AT``. The entry count is
not stored: a trimmed file holds exactly ``length // ENTRY.size`` entries; a writable file is
preallocated past them.

Invariants:
- The key column strictly increases; per kind, each column (``_COLUMNS``) either strictly
  increases or never decreases. No relative offset is negative, so every offset is at least
  the base offset.
- Entries below the published count never change, except by truncation.

Derived data: both files are rebuilt from the ``.log`` whenever they are not trusted (after an
unclean shutdown, or when ``sanity_check`` raises :class:`CorruptIndexError`). Nothing here is
fsynced for durability's sake; ``flush`` (msync) only bounds how much is rebuilt.

Crash safety, in order:
1. Opening a file creates it if missing. A pre-existing file is assumed trimmed: its entry
   count is its length // entry size. A writable index is then extended (sparse
   ``ftruncate``) to ``max_index_bytes`` rounded down to a whole entry and mapped
   (:mod:`odradek.storage.mapping`), and its descriptor closed: a mapped index holds no
   descriptor (a partition costs one, its ``.log``); ``resize`` reopens the file briefly.
2. An append writes the entry into the mapping (page cache), then publishes the new count.
3. ``trim_to_valid_size`` (on roll and in ``close``) shrinks the file to count * entry size, so
   after a clean shutdown rule 1 recovers the exact entries.
4. After a crash the file may still be preallocated: its zero tail reads as entries.
   ``sanity_check`` reports that (and torn or non-monotonic files); the log rebuilds the index.

Concurrency: one writer. Lookups snapshot the entry count first and only read entries below
it; an append writes its bytes before it publishes the count (an attribute store, atomic under
the GIL), so a reader in another thread sees a consistent prefix while appends go on. A
snapshot also holds the mapping itself, which is unmapped only when no one references it, so a
remap or close never pulls pages from under a reader.
Truncation and remapping (``truncate*``, ``resize``, ``trim_to_valid_size``, ``close``,
``delete``) need the caller to keep readers out (the broker's partition lock).
"""

from __future__ import annotations

import io
import operator
import os
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Self

from odradek.storage.errors import StorageError
from odradek.storage.mapping import MappedBytes, map_file, sync_mapping

__all__ = [
    "DEFAULT_MAX_INDEX_BYTES",
    "INT32_MAX",
    "CorruptIndexError",
    "IndexFullError",
    "MappedIndex",
]

DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024  # log.index.size.max.bytes
INT32_MAX = 0x7FFF_FFFF
# Kafka's "warm section": the last 8 KiB of entries, searched first (page-cache friendly).
_WARM_SECTION_BYTES = 8192
_I32 = struct.Struct(">i")


class CorruptIndexError(StorageError):
    """An index file that fails :meth:`sanity_check`; rebuild it from the ``.log``."""


class IndexFullError(StorageError):
    """An append to an index with no free slot; the segment should have rolled."""


def _round_down(number: int, factor: int) -> int:
    return factor * (number // factor)


def _first_break(values: tuple[int, ...], *, strict: bool) -> int | None:
    """Index of the first value that breaks the (strictly) increasing order, or None."""
    op = operator.lt if strict else operator.le
    if all(map(op, values, values[1:])):
        return None
    return next(i for i in range(1, len(values)) if not op(values[i - 1], values[i]))


class MappedIndex(ABC):
    """File, mapping, entry count, binary search and checks shared by the two index kinds."""

    ENTRY: ClassVar[struct.Struct]
    _KIND: ClassVar[str]
    _KEY: ClassVar[struct.Struct]  # the sort key, at byte 0: relative offset or timestamp
    _REL_AT: ClassVar[int]  # where the relative offset sits in an entry
    # Per column of an entry: its name and whether it strictly increases (else never decreases).
    _COLUMNS: ClassVar[tuple[tuple[str, bool], tuple[str, bool]]]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES,
        *,
        writable: bool = True,
    ) -> None:
        size = self.ENTRY.size
        if writable and max_index_bytes < size:
            raise ValueError(f"invalid max index size {max_index_bytes} for {self._KIND}")
        self._path = Path(path)
        self._base_offset = base_offset
        self._max_index_bytes = max_index_bytes
        self._writable = writable
        self._closed = False
        self._mm: MappedBytes | None = None
        self._warm_entries = _WARM_SECTION_BYTES // size
        fd = os.open(self._path, (os.O_RDWR if writable else os.O_RDONLY) | os.O_CREAT, 0o644)
        try:
            length = self._opened_length = os.fstat(fd).st_size
            self._entries = length // size  # a pre-existing file is assumed trimmed (Kafka)
            self._torn = length % size != 0
            if writable:  # preallocate, but never cut off entries
                target = max(_round_down(max_index_bytes, size), self._entries * size)
                if target != length:
                    os.ftruncate(fd, target)
                    length = target
            self._mm = self._map(fd, length)
        finally:
            os.close(fd)
        self._length = length
        self._max_entries = length // size
        self._entries_changed()

    @abstractmethod
    def _parse(self, mm: MappedBytes, slot: int) -> tuple[int, int]:
        """Entry ``slot`` with its relative offset made absolute."""

    @abstractmethod
    def _empty(self) -> tuple[int, int]:
        """The last entry of an empty index, and the answer of a lookup below every entry."""

    # -- properties ------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_bytes(self) -> int:
        return self._max_index_bytes

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def size_bytes(self) -> int:
        """Bytes holding entries (the file is larger while preallocated)."""
        return self._entries * self.ENTRY.size

    def __len__(self) -> int:
        return self._entries

    # -- reading ---------------------------------------------------------------------------
    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry, with an absolute offset."""
        mm, entries = self._snapshot()
        if not 0 <= n < entries:
            raise IndexError(f"entry {n} of {self._path}, which has {entries} entries")
        return self._parse(mm, n)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        mm, entries = self._snapshot()
        for slot in range(entries):
            yield self._parse(mm, slot)

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` is representable relative to the base offset."""
        return 0 <= offset - self._base_offset <= INT32_MAX

    def _relative(self, offset: int) -> int:
        if not self.can_append_offset(offset):
            raise ValueError(
                f"offset {offset} does not fit {self._path} (base offset {self._base_offset}): "
                f"the relative offset must be in [0, {INT32_MAX}]"
            )
        return offset - self._base_offset

    def _snapshot(self) -> tuple[MappedBytes, int]:
        """Mapping and entry count to read; the count is read first (see module docstring).

        The mapping is None only for a zero-length file, which has no entries to read.
        """
        entries = self._entries
        if self._closed:
            raise ValueError(f"{self._KIND} {self._path} is closed")
        return self._mm, entries  # type: ignore[return-value]

    def _count_le(
        self, mm: MappedBytes, entries: int, target: int, field: struct.Struct, at: int
    ) -> int:
        """How many leading entries have ``field`` (at byte ``at``) <= target.

        The field must never decrease over the entries. As in Kafka, the warm section at the
        end is tried first so that lookups near the tail keep touching the same few pages.
        """
        size = self.ENTRY.size
        unpack = field.unpack_from
        lo, hi = 0, entries
        hot = entries - 1 - self._warm_entries
        if hot > 0:
            if unpack(mm, hot * size + at)[0] <= target:
                lo = hot + 1
            else:
                hi = hot
        while lo < hi:
            mid = (lo + hi) >> 1
            if unpack(mm, mid * size + at)[0] <= target:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _lookup(self, key: int) -> tuple[int, int]:
        """The largest entry whose key <= ``key`` (relative offset or timestamp)."""
        mm, entries = self._snapshot()
        slot = self._count_le(mm, entries, key, self._KEY, 0) - 1
        return self._empty() if slot < 0 else self._parse(mm, slot)

    # -- checking --------------------------------------------------------------------------
    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` on a torn, untrimmed or non-monotonic file.

        A torn length is the file's as opened (until ``truncate`` empties the index for a
        rebuild). Reads every entry in C-level passes: for segment load, not for hot paths.
        """
        mm, entries = self._snapshot()
        size = self.ENTRY.size
        if self._torn:
            raise self._corrupt(
                f"it had {self._opened_length} bytes, which is not a multiple of {size}"
            )
        if entries == 0:
            return
        if entries > 1 and mm[(entries - 1) * size : entries * size] == bytes(size):
            raise self._corrupt(
                f"entry {entries - 1} is all zeros (preallocated space that was never trimmed)"
            )
        # One unpack of every entry ("iiii..." / "qiqi..."), then split into the two columns.
        flat = struct.Struct(">" + self.ENTRY.format[1:] * entries).unpack_from(mm)
        columns = flat[0::2], flat[1::2]
        lowest = min(columns[self._REL_AT // 8])
        if lowest < 0:
            offset = self._base_offset + lowest
            raise self._corrupt(f"offset {offset} is below the base offset {self._base_offset}")
        for (name, strict), column in zip(self._COLUMNS, columns, strict=True):
            if column[0] < 0:
                raise self._corrupt(f"entry 0 has a negative {name} ({column[0]})")
            slot = _first_break(column, strict=strict)
            if slot is not None:
                trend = "do not strictly increase" if strict else "decrease"
                raise self._corrupt(f"{name}s {trend} at entry {slot}")

    def _corrupt(self, what: str) -> CorruptIndexError:
        return CorruptIndexError(f"{self._KIND} {self._path} is corrupt: {what}")

    # -- writing ---------------------------------------------------------------------------
    def _require_writable(self) -> None:
        if self._closed:
            raise ValueError(f"{self._KIND} {self._path} is closed")
        if not self._writable:
            raise io.UnsupportedOperation(f"{self._KIND} {self._path} is read-only")

    def _write(self, slot: int, first: int, second: int, last: tuple[int, int]) -> None:
        assert self._mm is not None
        self.ENTRY.pack_into(self._mm, slot * self.ENTRY.size, first, second)
        self._last = last
        self._entries = slot + 1  # published last: readers see a consistent prefix

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset >= ``offset`` (none if all are below)."""
        mm, entries = self._snapshot()
        below = offset - self._base_offset - 1
        self._truncate_to_entries(self._count_le(mm, entries, below, _I32, self._REL_AT))

    def truncate(self) -> None:
        """Drop every entry (the file keeps its size)."""
        self._truncate_to_entries(0)
        self._torn = False

    def _truncate_to_entries(self, entries: int) -> None:
        self._require_writable()
        if entries < self._entries:
            self._entries = entries
            self._entries_changed()

    def _entries_changed(self) -> None:
        entries, mm = self._entries, self._mm
        self._last = self._parse(mm, entries - 1) if entries and mm else self._empty()

    def flush(self) -> None:
        """msync the mapping (no-op when read-only, closed or empty)."""
        if self._writable and self._mm is not None:
            sync_mapping(self._mm)

    def resize(self, new_max_bytes: int) -> bool:
        """Set the file (and mapping) to ``new_max_bytes`` rounded down to whole entries.

        Returns whether the size changed. Shrinking below the entries in use is a ValueError.
        """
        self._require_writable()
        size = self.ENTRY.size
        new_length = _round_down(new_max_bytes, size)
        if new_length < self._entries * size:
            raise ValueError(
                f"cannot resize {self._path} to {new_max_bytes} bytes: "
                f"{self._entries} entries need {self._entries * size}"
            )
        if new_length == self._length:
            return False
        self._unmap()
        fd = os.open(self._path, os.O_RDWR)
        try:
            os.ftruncate(fd, new_length)
            self._mm = self._map(fd, new_length)
        finally:
            os.close(fd)
        self._length = new_length
        self._max_entries = new_length // size
        return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the entries in use (on roll and close)."""
        self.resize(self._entries * self.ENTRY.size)

    def close(self) -> None:
        """Trim (when writable) and unmap. Idempotent."""
        if self._closed:
            return
        try:
            if self._writable:
                self.trim_to_valid_size()
        finally:
            self._unmap()
            self._closed = True

    def rename(self, new_path: Path) -> None:
        """Rename the file (``.deleted`` / ``.cleaned`` / ``.swap``); the mapping stays valid."""
        new_path = Path(new_path)
        os.replace(self._path, new_path)
        self._path = new_path

    def delete(self) -> bool:
        """Unmap (without trimming) and delete the file; False if it was already gone."""
        self._unmap()
        self._closed = True
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _map(self, fd: int, length: int) -> MappedBytes | None:
        if length == 0:  # mmap refuses a zero-length mapping: an empty file has none
            return None
        return map_file(fd, length, writable=self._writable)

    def _unmap(self) -> None:
        """Drop the mapping; it is unmapped once no reader's snapshot still holds it."""
        self._mm = None
