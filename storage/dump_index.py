"""``dump-log`` for ``.index`` and ``.timeindex`` files: print the entries, check each against
the ``.log``, as Kafka's ``DumpLogSegments`` checks them.

Layouts (:mod:`odradek.storage.index`): an offset index entry is ``(relative offset i32,
position i32)``, a time index entry ``(timestamp i64, relative offset i32)``. What is checked:

1. an offset entry ``(O, P)``: a batch starts at position ``P`` and its last offset is ``O``;
2. a time entry ``(T, O)``: a batch ends at offset ``O``, its max timestamp is ``T``, and ``T``
   is above the timestamp of the entry before it;
3. the file holds whole entries (a torn tail is reported), and entries after the first that
   repeat the base offset are zero-filled preallocated space, reported once and not dumped.

The ``.log`` is read by entry headers only, unvalidated (:func:`odradek.storage.scan.scan_entries`);
an index whose ``.log`` is missing is dumped unchecked, with an invalid-status line. Reading
only: the index is opened read-only and nothing is written.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from pathlib import Path

from odradek.storage.dump_format import STATUS_INVALID, Line
from odradek.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from odradek.storage.scan import open_regular, scan_entries

__all__ = ["dump_index"]


class _LogEntries:
    """Entry headers of a ``.log`` (unvalidated), by start position and by last offset."""

    def __init__(self, path: Path) -> None:
        fd = open_regular(path)
        try:
            self.size_bytes = os.fstat(fd).st_size
            entries = list(scan_entries(fd, 0, self.size_bytes))
        finally:
            os.close(fd)
        self.by_position = {e.position: e for e in entries}
        self.by_last_offset = {e.last_offset: e for e in entries}
        self._last_offsets = [e.last_offset for e in entries]

    def first_ending_at_or_after(self, offset: int) -> int:
        """Last offset of the first entry whose last offset is ≥ ``offset``, else -1."""
        slot = bisect.bisect_left(self._last_offsets, offset)
        return self._last_offsets[slot] if slot < len(self._last_offsets) else -1


def dump_index(
    path: Path,
    kind: str,
    base_offset: int,
    log_path: Path,
    *,
    sanity_check: bool = False,
    verify_only: bool = False,
) -> Iterator[Line]:
    """The lines that dump ``path`` (``kind`` "index" or "timeindex"), each entry checked
    against the entries of ``log_path``; with ``sanity_check`` only the index's own check,
    with ``verify_only`` the problems without the entries. Raises ``OSError``."""
    yield Line(f"Dumping {path}")
    index_type = OffsetIndex if kind == "index" else TimeIndex
    index = index_type(path, base_offset, writable=False)
    try:
        if sanity_check:
            try:
                index.sanity_check()
            except CorruptIndexError as exc:
                yield Line(str(exc), STATUS_INVALID, stderr=True)
            else:
                yield Line(f"{path} passed sanity check.")
            return
        torn_bytes = os.path.getsize(path) % index.ENTRY.size
        if torn_bytes:
            yield Line(
                f"{path}: the last {torn_bytes} bytes do not form a whole entry (a torn write)",
                STATUS_INVALID,
                stderr=True,
            )
        if not len(index):
            yield Line(f"{path} is empty.")
            return
        log = None
        if log_path.is_file():
            log = _LogEntries(log_path)
        else:
            yield Line(
                f"{path}: cannot verify the index: its log {log_path} does not exist",
                STATUS_INVALID,
                stderr=True,
            )
        check = _check_offset_index if kind == "index" else _check_time_index
        yield from check(path, index, log, verify_only)
    finally:
        index.close()


def _zero_tail(path: Path, slot: int, total: int) -> Line:
    return Line(
        f"{path}: entries {slot}..{total - 1} repeat the base offset: zero-filled preallocated "
        "space (the index was not trimmed), not dumped"
    )


def _check_offset_index(
    path: Path, index: OffsetIndex, log: _LogEntries | None, verify_only: bool
) -> Iterator[Line]:
    mismatches: list[str] = []
    for slot, (offset, position) in enumerate(index):
        if slot and offset == index.base_offset:
            yield _zero_tail(path, slot, len(index))
            break
        if log is not None:
            entry = log.by_position.get(position)
            if entry is None:
                mismatches.append(
                    f"  Index offset: {offset}, log offset: -1 (no batch starts at position "
                    f"{position}; the log has {log.size_bytes} bytes)"
                )
            elif entry.last_offset != offset:
                mismatches.append(f"  Index offset: {offset}, log offset: {entry.last_offset}")
        if not verify_only:
            yield Line(f"offset: {offset} position: {position}")
    if mismatches:
        yield Line(f"Mismatches in :{path.resolve()}", STATUS_INVALID, stderr=True)
        for text in mismatches:
            yield Line(text, STATUS_INVALID, stderr=True)


def _check_time_index(
    path: Path, index: TimeIndex, log: _LogEntries | None, verify_only: bool
) -> Iterator[Line]:
    wrong_timestamps: list[tuple[int, int]] = []
    out_of_order: list[tuple[int, int]] = []
    not_found: list[tuple[int, int]] = []
    previous_timestamp = -1
    for slot, (timestamp, offset) in enumerate(index):
        if slot and offset == index.base_offset:
            yield _zero_tail(path, slot, len(index))
            break
        if log is not None:
            entry = log.by_last_offset.get(offset)
            if entry is None:
                not_found.append((offset, log.first_ending_at_or_after(offset)))
            elif entry.max_timestamp != timestamp:
                wrong_timestamps.append((timestamp, entry.max_timestamp))
        if slot and previous_timestamp >= timestamp:
            out_of_order.append((timestamp, previous_timestamp))
        if not verify_only:
            yield Line(f"timestamp: {timestamp} offset: {offset}")
        previous_timestamp = timestamp
    where = path.resolve()
    if wrong_timestamps:
        yield Line(f"Found timestamp mismatch in :{where}", STATUS_INVALID, stderr=True)
        for indexed, logged in wrong_timestamps:
            text = f"  Index timestamp: {indexed}, log timestamp: {logged}"
            yield Line(text, STATUS_INVALID, stderr=True)
    if out_of_order:
        yield Line(f"Found out of order timestamp in :{where}", STATUS_INVALID, stderr=True)
        for indexed, before in out_of_order:
            text = f"  Index timestamp: {indexed}, Previously indexed timestamp: {before}"
            yield Line(text, STATUS_INVALID, stderr=True)
    if not_found:
        yield Line(
            f"The following indexed offsets are not found in the log {where}.",
            STATUS_INVALID,
            stderr=True,
        )
        for indexed, found in not_found:
            text = f"Indexed offset: {indexed}, found log offset: {found}"
            yield Line(text, STATUS_INVALID, stderr=True)
