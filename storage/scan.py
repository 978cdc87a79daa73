"""Walking the log entries of a ``.log`` file by position, with or without validation.

Every log entry, whatever its magic, starts with the same 17 bytes::

    0  offset        int64   v2: baseOffset; v0/v1: the (last) offset of the message
    8  length        int32   bytes that follow this field
    12 (v2: partitionLeaderEpoch, v0/v1: crc)
    16 magic         int8

so the next entry always starts at ``position + 12 + length``. v2 entries are record batches
(:mod:`odradek.protocol.record_batch`); v0/v1 entries are legacy messages or compressed wrapper
messages (:mod:`odradek.protocol.legacy`), which Kafka logs from before 0.11 hold and which are
read, never written.

:func:`scan_entries` reads headers only (reads, lookups); :func:`validated_entries` reads and
checks every entry in full (recovery, ``dump-log``), stopping at the first invalid byte.
:func:`open_regular` opens a file to scan that may not be a segment at all (``dump-log``).
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.legacy import validate_legacy_entry
from odradek.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    CorruptRecordError,
    parse_batch_header,
    validate_batch,
)

__all__ = ["EntryInfo", "InvalidEntry", "open_regular", "scan_entries", "validated_entries"]

# A lookup starts at an index entry and usually needs one or two headers within a few KiB:
# the first read is small; a scan that goes on reads larger chunks.
_FIRST_CHUNK_BYTES = 8 * 1024
_CHUNK_BYTES = 64 * 1024
_PREFIX = struct.Struct(">qi")
_V1_TIMESTAMP = struct.Struct(">q")
_LEGACY_MIN_BYTES = LOG_OVERHEAD + 14  # crc, magic, attributes, key length, value length


class EntryInfo(NamedTuple):
    """Where one entry sits in a ``.log`` and the offsets and timestamp it covers."""

    position: int
    base_offset: int
    last_offset: int
    size_bytes: int
    max_timestamp: int
    magic: int

    @property
    def next_position(self) -> int:
        return self.position + self.size_bytes


class InvalidEntry(NamedTuple):
    """Yielded by :func:`validated_entries` where validation stops (then iteration ends)."""

    position: int
    reason: str


def _info_from_header(buf: bytes | memoryview, at: int, position: int) -> EntryInfo:
    magic = buf[at + MAGIC_OFFSET]
    if magic == 2:
        h = parse_batch_header(buf, at)
        return EntryInfo(position, h.base_offset, h.last_offset, h.size_bytes, h.max_timestamp, 2)
    offset, length = _PREFIX.unpack_from(buf, at)
    timestamp = -1
    if magic == 1 and len(buf) - at >= LOG_OVERHEAD + 14:
        (timestamp,) = _V1_TIMESTAMP.unpack_from(buf, at + LOG_OVERHEAD + 6)
    return EntryInfo(position, offset, offset, length + LOG_OVERHEAD, timestamp, magic)


def scan_entries(fd: int, start_position: int, end_position: int) -> Iterator[EntryInfo]:
    """Entry headers in ``[start_position, end_position)``, read in 64 KiB chunks, unvalidated.

    Stops quietly at an entry that would run past ``end_position`` or whose header is
    implausible (a reader never looks past data it was told is complete).
    """
    position = start_position
    buf = b""
    buf_start = position
    while position + LOG_OVERHEAD + 5 <= end_position:
        at = position - buf_start
        if at < 0 or at + HEADER_SIZE > len(buf):
            chunk = _FIRST_CHUNK_BYTES if not buf else _CHUNK_BYTES
            buf = os.pread(fd, min(chunk, end_position - position), position)
            buf_start, at = position, 0
            if len(buf) < LOG_OVERHEAD + 5:
                return
        magic = buf[at + MAGIC_OFFSET]
        if magic == 2 and len(buf) - at < HEADER_SIZE:
            return
        _, length = _PREFIX.unpack_from(buf, at)
        size = length + LOG_OVERHEAD
        minimum = HEADER_SIZE if magic == 2 else _LEGACY_MIN_BYTES
        if magic > 2 or size < minimum or position + size > end_position:
            return
        yield _info_from_header(buf, at, position)
        position += size


def validated_entries(
    fd: int, start_position: int, end_position: int, *, max_entry_bytes: int = 0x7FFF_FFFF
) -> Iterator[EntryInfo | InvalidEntry]:
    """Every entry in ``[start_position, end_position)``, each read whole and checked.

    A v2 batch is checked for size, magic and CRC-32C, a legacy entry for size, magic and
    CRC32. At the first entry that fails — including a header or body cut short by the end of
    the range — an :class:`InvalidEntry` is yielded and iteration ends, so the caller knows
    exactly which byte the valid prefix ends at.
    """
    position = start_position
    while position < end_position:
        remaining = end_position - position
        if remaining < LOG_OVERHEAD + 5:
            yield InvalidEntry(position, f"{remaining} trailing bytes, too few for an entry header")
            return
        prefix = os.pread(fd, LOG_OVERHEAD + 5, position)
        _, length = _PREFIX.unpack_from(prefix)
        size = length + LOG_OVERHEAD
        if size < _LEGACY_MIN_BYTES or size > max_entry_bytes:
            yield InvalidEntry(position, f"entry size {size} is out of bounds")
            return
        if size > remaining:
            yield InvalidEntry(position, f"entry of {size} bytes cut short at {remaining} bytes")
            return
        data = os.pread(fd, size, position)
        try:
            if prefix[MAGIC_OFFSET] == 2:
                validate_batch(data)
            else:
                validate_legacy_entry(data)
        except CorruptRecordError as exc:
            yield InvalidEntry(position, str(exc))
            return
        yield _info_from_header(data, 0, position)
        position += size


def open_regular(path: Path) -> int:
    """A read-only descriptor of ``path``, which must be a regular file: opened without
    blocking (a FIFO swapped in after the check would otherwise wait for a writer)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"not a regular file: {path}")
    return fd
