"""``dump-log``: print segment files the way Kafka's ``kafka-dump-log.sh`` (DumpLogSegments) does.

This module tells the files apart and walks a ``.log``; :mod:`odradek.storage.dump_format` gives
the text of each line, :mod:`odradek.storage.dump_index` dumps and checks the indexes.

Files and what is printed for each (read-only; nothing is created, repaired or rewritten):

- ``<base>.log``: ``Log starting offset: <base>``, then one line per entry (batch) with the
  fields of its header, Kafka's field names and order (v2: ``baseOffset: .. lastOffset: ..``;
  legacy v0/v1: ``offset: .. position: ..``). With deep iteration, one ``| offset: ..`` line per
  record, control records described (``endTxnMarker: COMMIT coordinatorEpoch: 0``), and with
  ``print_data_log`` the key and payload decoded as UTF-8 (invalid bytes replaced, control
  characters such as newlines escaped as ``\\xNN`` so that each record stays on one line).
- ``<base>.index``: ``offset: N position: P`` per entry; ``<base>.timeindex``:
  ``timestamp: T offset: N``. Each entry is checked against ``<base>.log`` (``verify_index_only``
  checks without printing the entries), as Kafka checks them (:mod:`odradek.storage.dump_index`).

- ``.deleted``, ``.cleaned`` and ``.swap`` copies of those files are dumped as their base type
  (an index is then checked against the log with the same suffix, or else the live log).

Every printed line is a :class:`Line`, whose ``status`` says what it reports:

1. ``0``: nothing wrong.
2. ``1`` (``STATUS_INVALID``): invalid data. In a ``.log`` the walk stops at the first entry that
   fails validation (size, magic, CRC — :func:`odradek.storage.scan.validated_entries`): that entry
   is printed with ``isvalid: false`` when its bytes are all there, followed by one line giving
   the position where valid data ends and how many bytes from there on are invalid. Also: index
   entries that do not match the log, an index whose ``.log`` is missing, a torn index file, an
   index that fails the sanity check, records that do not decode.
3. ``2`` (``STATUS_UNUSABLE``): the file itself could not be dumped: missing, a directory, not a
   regular file (a FIFO or a device would block or never end: refused without being opened
   for reading), an unsupported suffix (``.snapshot``, ``.txnindex``, ...), an index whose name
   is not a base offset, or an I/O error. Also a v2 batch whose body decompresses to more than
   ``max_decompressed_bytes`` (a decompression bomb): its records are not printed, and memory
   stays bounded by that ceiling (:mod:`odradek.storage.dump_decompress`).

The ``dump-log`` command exits with the highest status printed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET
from odradek.storage.dump_decompress import BoundedDecompressor
from odradek.storage.dump_format import (
    INT32_MAX,
    STATUS_INVALID,
    STATUS_OK,
    STATUS_UNUSABLE,
    Line,
    batch_line,
    record_lines,
)
from odradek.storage.dump_index import dump_index
from odradek.storage.scan import InvalidEntry, open_regular, scan_entries, validated_entries

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "INT32_MAX",
    "STATUS_INVALID",
    "STATUS_OK",
    "STATUS_UNUSABLE",
    "DumpOptions",
    "Line",
    "dump_file",
    "dump_files",
]

DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024

_KINDS = {".log": "log", ".index": "index", ".timeindex": "timeindex"}
_RENAME_SUFFIXES = (".deleted", ".cleaned", ".swap")


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """The ``kafka-dump-log.sh`` flags (``print_data_log`` implies ``deep_iteration``)."""

    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: int = INT32_MAX  # .log only: stop before the first batch ending past this
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES  # per batch, deep iteration


def dump_files(paths: Iterable[str | Path], options: DumpOptions) -> Iterator[Line]:
    """:func:`dump_file` for each path in turn."""
    for path in paths:
        yield from dump_file(Path(path), options)


def dump_file(path: Path, options: DumpOptions) -> Iterator[Line]:
    """The lines that dump one file; I/O errors become a ``STATUS_UNUSABLE`` line."""
    if not path.exists():
        yield _unusable(f"{path}: no such file")
        return
    if path.is_dir():
        yield _unusable(f"{path}: is a directory, not a segment file")
        return
    if not path.is_file():
        yield _unusable(f"{path}: not a regular file (a FIFO, socket or device): not read")
        return
    kind, stem, rename_suffix = _classify(path.name)
    if kind is None:
        yield _unusable(
            f"{path}: unsupported file type (expected .log, .index or .timeindex, "
            f"optionally followed by {', '.join(_RENAME_SUFFIXES)})"
        )
        return
    base_offset = int(stem) if stem.isdigit() else None
    if kind != "log" and base_offset is None:
        yield _unusable(f"{path}: an index file must be named after its base offset")
        return
    try:
        if kind == "log":
            yield from _dump_log(path, base_offset, options)
        else:
            log_path = path.with_name(f"{stem}.log{rename_suffix}")
            if rename_suffix and not log_path.exists():
                log_path = path.with_name(f"{stem}.log")
            assert base_offset is not None
            yield from dump_index(
                path,
                kind,
                base_offset,
                log_path,
                sanity_check=options.index_sanity_check,
                verify_only=options.verify_index_only,
            )
    except OSError as exc:
        yield _unusable(f"{path}: {exc.strerror or exc}")


def _unusable(text: str) -> Line:
    return Line(text, STATUS_UNUSABLE, stderr=True)


def _classify(name: str) -> tuple[str | None, str, str]:
    """(kind, base name, rename suffix) of a file name; kind None when unsupported."""
    rename_suffix = next((s for s in _RENAME_SUFFIXES if name.endswith(s)), "")
    name = name.removesuffix(rename_suffix) if rename_suffix else name
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return None, name, rename_suffix
    return _KINDS.get(f".{ext}"), stem, rename_suffix


# -- .log --------------------------------------------------------------------------------------


def _dump_log(path: Path, base_offset: int | None, options: DumpOptions) -> Iterator[Line]:
    yield Line(f"Dumping {path}")
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if base_offset is None:
            first = next(scan_entries(fd, 0, size), None)
            origin = "unknown" if first is None else str(first.base_offset)
            yield Line(f"Log starting offset: {origin} (the file name holds no base offset)")
        else:
            yield Line(f"Log starting offset: {base_offset}")
        deep = options.deep_iteration or options.print_data_log
        decompressor = BoundedDecompressor(options.max_decompressed_bytes)
        gaps: list[tuple[int, int]] = []
        previous: list[int] = []  # the last record offset seen, if any
        for entry in validated_entries(fd, 0, size):
            if isinstance(entry, InvalidEntry):
                yield from _invalid_tail(fd, path, entry, size, options.max_bytes)
                break
            if entry.next_position > options.max_bytes:
                break
            data = os.pread(fd, entry.size_bytes, entry.position)
            yield Line(batch_line(data, entry.position, valid=True))
            if deep:
                yield from record_lines(
                    data, entry, options.print_data_log, previous, gaps, decompressor
                )
    finally:
        os.close(fd)
    if gaps:
        yield Line(f"Non-consecutive offsets in {path.resolve()}", stderr=True)
        for first, second in gaps:
            yield Line(f"  {first} is followed by {second}", stderr=True)


def _invalid_tail(
    fd: int, path: Path, invalid: InvalidEntry, size: int, max_bytes: int
) -> Iterator[Line]:
    """The entry where validation stopped (if complete) and where the valid data ends."""
    position = invalid.position
    remaining = size - position
    prefix = os.pread(fd, HEADER_SIZE, position)
    declared = magic = None
    if len(prefix) > MAGIC_OFFSET:
        declared = int.from_bytes(prefix[8:12], "big", signed=True) + LOG_OVERHEAD
        magic = prefix[MAGIC_OFFSET]
    if max_bytes < size and (declared is None or position + declared > max_bytes):
        return  # the bad entry lies past the requested range: leave it, as Kafka does
    if (
        declared is not None
        and declared <= remaining
        and ((magic == 2 and declared >= HEADER_SIZE) or (magic in (0, 1) and declared >= 26))
    ):
        data = os.pread(fd, declared, position)
        yield Line(batch_line(data, position, valid=False), STATUS_INVALID)
    yield Line(
        f"Found {remaining} invalid bytes at the end of {path.name}: valid data ends at "
        f"position {position} ({invalid.reason})",
        STATUS_INVALID,
    )
