"""Finding and cutting out the damage that keeps a partition offline (``odradek repair-log``).

At start-up the loader truncates only a torn tail; any other invalid byte takes the partition
offline with every file in place (:mod:`odradek.storage.loader`). This module is the operator's
side: :func:`inspect_partition` validates every ``.log`` of one partition directory, exactly as
recovery does (complete entries, good checksums, offsets increasing and inside the segment),
and describes each damaged range; :func:`repair_partition` then removes those ranges and keeps
everything valid around them.

A damaged range starts at the first invalid byte and ends where valid batches resume: the
next position, scanning forward byte by byte, at which a v2 batch with a good CRC-32C and
offsets that follow the valid data begins (or the end of the segment). So a flipped bit costs
only the batch it hit; the records after it, and every later segment, stay.

Crash safety of a repair, per damaged segment, in order:

1. The dropped bytes are written to ``<base>.log.damaged-<position>`` beside the segment and
   fsynced (evidence, and a way back; the loader ignores such files).
2. The kept ranges are copied to ``<base>.log.tmp``, fsynced, and renamed over ``<base>.log``
   (a crash before the rename leaves the old file; the loader deletes ``*.tmp``).
3. The segment's ``.index`` and ``.timeindex`` are deleted (derived: the next start rebuilds
   and re-validates them), the directory fsynced; the root's ``.kafka_cleanshutdown`` is
   removed so that the next start re-validates from the recovery point.

The caller holds the root's ``.lock`` (:class:`odradek.storage.checkpoints.DirLock`): never
while a broker owns the directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from odradek.storage.atomic import fsync_directory
from odradek.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from odradek.storage.loader import TMP_SUFFIX
from odradek.storage.scan import EntryInfo, InvalidEntry, validated_entries
from odradek.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from odradek.storage.segment_recovery import offsets_problem

__all__ = ["DamagedRange", "SegmentReport", "inspect_partition", "repair_partition"]

_MAGIC_AT = 16  # the magic byte's position in every entry header
_COPY_CHUNK_BYTES = 1 << 20


@dataclass
class DamagedRange:
    """Bytes ``[start, end)`` of a segment to drop, and what is known about them."""

    start: int
    end: int
    reason: str
    first_lost_offset: int  # one past the last valid offset before the damage
    resumes_at_offset: int | None  # base offset of the batch at ``end``; None: segment end

    @property
    def size_bytes(self) -> int:
        return self.end - self.start


@dataclass
class SegmentReport:
    path: Path
    size_bytes: int
    damaged: list[DamagedRange] = field(default_factory=list)

    def kept_ranges(self) -> Iterator[tuple[int, int]]:
        position = 0
        for damage in self.damaged:
            if damage.start > position:
                yield position, damage.start
            position = damage.end
        if position < self.size_bytes:
            yield position, self.size_bytes


def _segment_bases(directory: Path) -> list[int]:
    bases = []
    for name in os.listdir(directory):
        stem, _, suffix = name.partition(".")
        if "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def _first_valid(fd: int, position: int, end: int, base: int, previous_last: int) -> str | None:
    """None if a valid batch following ``previous_last`` starts at ``position``, else why not."""
    for entry in validated_entries(fd, position, end):
        if isinstance(entry, InvalidEntry):
            return entry.reason
        return offsets_problem(entry, base, previous_last)
    return "end of the segment"


def _resume_position(fd: int, start: int, end: int, base: int, previous_last: int) -> int:
    """The first position after ``start`` where valid batches resume (``end`` if none)."""
    window_start = start + 1
    while window_start < end:
        window = os.pread(fd, min(_COPY_CHUNK_BYTES, end - window_start), window_start)
        at = window.find(2, _MAGIC_AT)
        while at >= 0:
            candidate = window_start + at - _MAGIC_AT
            if _first_valid(fd, candidate, end, base, previous_last) is None:
                return candidate
            at = window.find(2, at + 1)
        window_start += max(len(window) - _MAGIC_AT, 1)
    return end


def inspect_segment(path: Path, base: int) -> SegmentReport:
    """Validate one ``.log`` as recovery does, listing every damaged range."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        report = SegmentReport(path, size)
        position, previous_last = 0, base - 1
        while position < size:
            problem: str | None = None
            entry: EntryInfo | InvalidEntry | None = None
            for entry in validated_entries(fd, position, size):
                if isinstance(entry, InvalidEntry):
                    problem = entry.reason
                else:
                    problem = offsets_problem(entry, base, previous_last)
                if problem is not None:
                    break
                previous_last = entry.last_offset
                position = entry.next_position
            if problem is None:
                break
            end = _resume_position(fd, position, size, base, previous_last)
            resumes_at = None
            if end < size:
                resumes_at = next(iter(validated_entries(fd, end, size))).base_offset  # type: ignore[union-attr]
            report.damaged.append(
                DamagedRange(position, end, problem, previous_last + 1, resumes_at)
            )
            position = end
        return report
    finally:
        os.close(fd)


def inspect_partition(directory: Path) -> list[SegmentReport]:
    """A report for every ``.log`` in the partition directory, in offset order."""
    directory = Path(directory)
    return [
        inspect_segment(directory / f"{base:020d}{LOG_SUFFIX}", base)
        for base in _segment_bases(directory)
    ]


def _copy_range(src: int, dst: int, start: int, end: int) -> None:
    position = start
    while position < end:
        chunk = os.pread(src, min(_COPY_CHUNK_BYTES, end - position), position)
        if not chunk:
            raise OSError(f"unexpected end of file at byte {position}")
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view) :]
        position += len(chunk)


def _write_file(path: Path, src: int, ranges: list[tuple[int, int]]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        for start, end in ranges:
            _copy_range(src, fd, start, end)
        os.fsync(fd)
    finally:
        os.close(fd)


def damaged_copy_path(report: SegmentReport, damage: DamagedRange) -> Path:
    return report.path.with_name(f"{report.path.name}.damaged-{damage.start}")


def repair_partition(reports: list[SegmentReport]) -> list[Path]:
    """Cut every damaged range out of its segment (module docstring); returns the files
    holding the dropped bytes."""
    saved: list[Path] = []
    for report in reports:
        if not report.damaged:
            continue
        directory = report.path.parent
        src = os.open(report.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            for damage in report.damaged:
                copy = damaged_copy_path(report, damage)
                _write_file(copy, src, [(damage.start, damage.end)])
                saved.append(copy)
            tmp = report.path.with_name(report.path.name + TMP_SUFFIX)
            _write_file(tmp, src, list(report.kept_ranges()))
        finally:
            os.close(src)
        os.replace(tmp, report.path)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            report.path.with_suffix(suffix).unlink(missing_ok=True)
        fsync_directory(directory)
        root = directory.parent
        (root / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        fsync_directory(root)
    return saved
