"""Executor side of a file-backed read: one :class:`FileRange` → Arrow record batches.

The task opens its segment read-only (``O_RDONLY``; no lock, no write, no mapping) and reads
its planned bytes in chunks of ``fetch.max.bytes``:

1. Open the planned path and check the file is the planned one (device and inode). Retention
   renames a segment to ``*.deleted`` before it unlinks it, and a ``.swap`` becomes the live
   name: those names are tried too, by inode.
2. If no name holds the planned file any more: a live file at the segment's name is a
   replacement (compaction keeps offsets, not positions), read from its start, by offsets
   only; no file at all is data loss (``failOnDataLoss``).
3. Each chunk is cut after its last complete entry (a larger entry is read whole). Batches of
   aborted transactions (``.txnindex``, planned per task) are left out; control batches are
   skipped by the decoder. The chunk goes to :func:`odradek.spark.decode.decode_fetch` — the
   single decode call of this reader — which checks every CRC and keeps the records in
   ``[from_offset, until_offset)``.
4. The walk must land exactly on ``end_position``: entries that do not chain up to it mean the
   file is not what was planned (damage, or an index that lied), a
   :class:`~odradek.spark.decode.CorruptRecordError` naming the file and position.

Bytes below ``end_position`` were complete and CRC-valid at planning time, and the log is
append-only, so a read while the broker appends sees exactly the planned records.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from odradek.spark.decode import CorruptRecordError, decode_fetch
from odradek.spark.files_plan import FileRange
from odradek.spark.metadata import report_data_loss

__all__ = ["read_file_range"]

_PREFIX = struct.Struct(">qi")  # baseOffset (v0/v1: offset), length
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER_ID = struct.Struct(">q")
_LOG_OVERHEAD = 12
_MIN_ENTRY_BYTES = 26  # the smallest legacy message
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


def read_file_range(
    r: FileRange, *, include_headers: bool, chunk_bytes: int, fail_on_data_loss: bool
) -> Iterator[pa.RecordBatch]:
    """The records of ``r`` as Arrow batches in the Kafka source's schema."""
    opened = _open(r, fail_on_data_loss)
    if opened is None:
        return
    fd, planned = opened
    try:
        if planned:
            start, end = r.start_position, r.end_position
        else:
            start, end = 0, os.fstat(fd).st_size
        yield from _read(fd, r, start, end, planned, include_headers, chunk_bytes)
    finally:
        os.close(fd)


def _open(r: FileRange, fail_on_data_loss: bool) -> tuple[int, bool] | None:
    """``(descriptor, whether it is the planned file)``, or None when the segment is gone."""
    path = Path(r.path)
    live = path.with_name(path.name.removesuffix(".swap"))
    for candidate in dict.fromkeys([path, live, live.with_name(live.name + ".deleted")]):
        try:
            fd = os.open(candidate, os.O_RDONLY)
        except FileNotFoundError:
            continue
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) == (r.device, r.inode):
            return fd, True
        if candidate == live:
            return fd, False  # a replacement (compaction): read it by offsets
        os.close(fd)
    report_data_loss(
        fail_on_data_loss,
        f"{r.topic}-{r.partition}: segment {r.path} was deleted after the read was planned; "
        f"offsets {r.from_offset} to {r.until_offset - 1} are lost.",
    )
    return None


def _read(
    fd: int,
    r: FileRange,
    start: int,
    end: int,
    exact: bool,
    include_headers: bool,
    chunk_bytes: int,
) -> Iterator[pa.RecordBatch]:
    position = start
    while position < end:
        want = min(chunk_bytes, end - position)
        data = os.pread(fd, want, position)
        if len(data) < want and exact:
            raise CorruptRecordError(
                f"{r.path}: the file ends at {position + len(data)}, before the planned "
                f"end {end} (truncated after planning)"
            )
        complete, aborted = _walk(data, r, position)
        if complete == 0:
            if len(data) < _LOG_OVERHEAD:
                break  # a replacement file's trailing bytes (reading by offsets)
            size = _PREFIX.unpack_from(data)[1] + _LOG_OVERHEAD
            if position + size > end:
                if exact:
                    raise CorruptRecordError(
                        f"{r.path} position {position}: an entry of {size} bytes runs past "
                        f"the planned end {end}"
                    )
                break
            data = os.pread(fd, size, position)
            complete, aborted = _walk(data, r, position)
            if complete == 0:
                raise CorruptRecordError(f"{r.path} position {position}: unreadable entry")
        view = memoryview(data)[:complete]
        if aborted:
            view = memoryview(b"".join(_without(view, aborted)))
        try:
            batches, _ = decode_fetch(
                view,
                topic=r.topic,
                partition=r.partition,
                from_offset=r.from_offset,
                until_offset=r.until_offset,
                include_headers=include_headers,
            )
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"{r.path} bytes {position}..{position + complete}: {exc}"
            ) from None
        yield from batches
        position += complete
        if not exact and _past(data, complete, r.until_offset):
            break


def _walk(data: bytes, r: FileRange, position: int) -> tuple[int, list[tuple[int, int]]]:
    """Bytes of the complete entries at the start of ``data``, and the ``(start, end)``
    spans among them of batches of aborted transactions."""
    size = len(data)
    at = 0
    aborted: list[tuple[int, int]] = []
    while at + _LOG_OVERHEAD <= size:
        base_offset, length = _PREFIX.unpack_from(data, at)
        entry = length + _LOG_OVERHEAD
        if entry < _MIN_ENTRY_BYTES:
            raise CorruptRecordError(
                f"{r.path} position {position + at}: entry size {entry} is implausible"
            )
        if at + entry > size:
            break
        if r.aborted and entry >= 61 and data[at + 16] == 2:
            (attributes,) = _ATTRIBUTES.unpack_from(data, at + 21)
            if attributes & _TRANSACTIONAL and not attributes & _CONTROL:
                (producer_id,) = _PRODUCER_ID.unpack_from(data, at + 43)
                if any(
                    pid == producer_id and first <= base_offset <= last
                    for pid, first, last in r.aborted
                ):
                    aborted.append((at, at + entry))
        at += entry
    return at, aborted


def _without(view: memoryview, spans: list[tuple[int, int]]) -> Iterator[memoryview]:
    at = 0
    for start, end in spans:
        yield view[at:start]
        at = end
    yield view[at:]


def _past(data: bytes, complete: int, until_offset: int) -> bool:
    """Whether the last complete entry of ``data`` starts at or past ``until_offset``."""
    at = last = 0
    while at < complete:
        base_offset, length = _PREFIX.unpack_from(data, at)
        last = base_offset
        at += length + _LOG_OVERHEAD
    return last >= until_offset
