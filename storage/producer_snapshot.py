"""Producer-state snapshots (Kafka's ``<offset>.snapshot`` files) and rebuilding the state
at load (Kafka's ``ProducerStateManager`` file half and ``UnifiedLog.rebuildProducerState``).

File ``<partition dir>/<20-digit offset>.snapshot``: the state of every producer after every
batch below ``offset``. Layout (version 1, Kafka's ``PID_SNAPSHOT_MAP_SCHEMA``, big-endian)::

    0   version                   int16   1
    2   crc                       uint32  CRC-32C of bytes 6..end
    6   producer entry count      int32
    10  entries, 46 bytes each:
        +0  producer_id               int64
        +8  epoch                     int16
        +10 last_sequence             int32   -1 if no batch is retained
        +14 last_offset               int64   -1 if no batch is retained
        +22 offset_delta              int32   lastOffsetDelta of the last batch
        +26 timestamp                 int64   max timestamp of the last batch
        +34 coordinator_epoch         int32   -1 (no transactions here)
        +38 current_txn_first_offset  int64   -1 (no transactions here)

Only the *last* batch of each producer is stored (as Kafka does), so after a restart from a
snapshot a retry of that batch is still found a duplicate; older ones are re-learnt only by
replaying the log after the snapshot.

When snapshots are written (through :func:`odradek.storage.atomic.write_atomically`:
``.tmp``, fsync, rename, fsync dir; a leftover ``.snapshot.tmp`` is deleted by the loader
like every ``*.tmp``):
1. when a segment rolls, named by the new segment's base offset — on the appending thread, so
   as Kafka it is written (``.tmp``, rename) without fsync, and fsynced by the log's next
   flush (:func:`sync_snapshot`); a power cut before that may tear it, which its CRC tells;
2. when the log closes (clean shutdown), at the log end offset;
3. during a rebuild at load, at the last two segments' base offsets and the log end offset.
A snapshot is only written when the state's end offset passed the last one.

Rebuild at load (:func:`rebuild`), after segment recovery (so the log end offset is final):
1. stray snapshots go: each one not named by a segment's base offset, except the largest if
   it is at or past the last segment's base offset (the clean-shutdown one);
2. no snapshot at all and a clean shutdown (a log from before producer state existed): no
   scan; empty snapshots are written at the offsets of step 3 above;
3. otherwise snapshots above the log end offset (truncated away) or at or below the log start
   offset are deleted; the newest remaining one that reads back (version 1, CRC valid, exact
   length) is loaded, dropping producers already expired (a corrupt one is deleted and the
   next older one tried); the log is replayed from its offset (or the log start offset) to
   the end, without checks; a snapshot is written at the end.
Retention deletes the snapshots named by the segments it removes (:func:`delete_snapshots`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

from crc32c import crc32c

from odradek.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    parse_batch_header,
)
from odradek.storage.atomic import fsync_directory, write_atomically
from odradek.storage.producer_state import BatchMetadata, ProducerStateEntry, ProducerStateManager
from odradek.storage.segment import LogSegment

__all__ = [
    "SNAPSHOT_SUFFIX",
    "CorruptSnapshotError",
    "decode_snapshot",
    "delete_snapshots",
    "encode_snapshot",
    "list_snapshot_offsets",
    "read_snapshot",
    "rebuild",
    "snapshot_path",
    "sync_snapshot",
    "take_snapshot",
]

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6
_CHUNK_BYTES = 1024 * 1024


class CorruptSnapshotError(ValueError):
    """A ``.snapshot`` file that does not read back (version, CRC, length)."""


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the ``.snapshot`` files in ``directory``, ascending."""
    offsets = []
    for name in os.listdir(directory):
        stem = name.removesuffix(SNAPSHOT_SUFFIX)
        if stem != name and len(stem) == 20 and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def encode_snapshot(producers: Sequence[ProducerStateEntry]) -> bytes:
    """The version-1 bytes for ``producers``, sorted by producer id (equal input, equal bytes)."""
    body = bytearray(_HEADER.size + _ENTRY.size * len(producers))
    _HEADER.pack_into(body, 0, SNAPSHOT_VERSION, 0, len(producers))
    position = _HEADER.size
    for entry in sorted(producers, key=lambda e: e.producer_id):
        _ENTRY.pack_into(
            body,
            position,
            entry.producer_id,
            entry.producer_epoch,
            entry.last_seq,
            entry.last_data_offset,
            entry.last_offset_delta,
            entry.last_timestamp_ms,
            entry.coordinator_epoch,
            -1,
        )
        position += _ENTRY.size
    struct.pack_into(">I", body, 2, crc32c(memoryview(body)[_CRC_START:]))
    return bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Entries of a version-1 snapshot; :class:`CorruptSnapshotError` if it does not read back."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"{len(data)} bytes, too short for the header")
    version, crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if crc != computed:
        raise CorruptSnapshotError(f"stored CRC {crc} does not match computed CRC {computed}")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{len(data)} bytes do not hold {count} entries")
    entries = []
    for fields in _ENTRY.iter_unpack(memoryview(data)[_HEADER.size :]):
        producer_id, epoch, seq, offset, delta, timestamp, coordinator_epoch, txn = fields
        if txn >= 0:
            raise CorruptSnapshotError(f"producer {producer_id} has an ongoing transaction")
        batches = [BatchMetadata(seq, offset, delta, timestamp)] if offset >= 0 else []
        entries.append(
            ProducerStateEntry(producer_id, epoch, timestamp, batches, coordinator_epoch)
        )
    return entries


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    return decode_snapshot(path.read_bytes())


def take_snapshot(
    directory: Path, state: ProducerStateManager, *, sync: bool = True
) -> Path | None:
    """Write the state as ``<map_end_offset>.snapshot`` if that passed the last snapshot.

    ``sync=False`` (a roll, on the appending thread; Kafka's ``takeSnapshot(false)``): written
    to ``.tmp`` and renamed, without fsync; the caller fsyncs it later (:func:`sync_snapshot`).
    Until then a power cut may leave it torn or empty: its CRC then fails and the load falls
    back to an older snapshot and a longer replay, never to a wrong state.
    """
    if state.map_end_offset <= state.last_snapshot_offset:
        return None
    path = snapshot_path(directory, state.map_end_offset)
    data = encode_snapshot(list(state.producers.values()))
    if sync:
        write_atomically(path, data)
    else:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    state.last_snapshot_offset = state.map_end_offset
    logger.debug("wrote %s with %d producer ids", path, len(state.producers))
    return path


def sync_snapshot(path: Path) -> None:
    """fsync a snapshot written with ``sync=False`` and its directory (gone: nothing to do)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:  # retention deleted it meanwhile
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_directory(path.parent)


def delete_snapshots(directory: Path, offsets: Sequence[int]) -> None:
    for offset in offsets:
        with contextlib.suppress(FileNotFoundError):
            snapshot_path(directory, offset).unlink()


def _remove_stray_snapshots(directory: Path, base_offsets: Sequence[int]) -> None:
    bases = set(base_offsets)
    strays = [o for o in list_snapshot_offsets(directory) if o not in bases]
    keep = strays[-1] if strays and strays[-1] >= max(base_offsets, default=0) else None
    delete_snapshots(directory, [o for o in strays if o != keep])


def rebuild(
    directory: Path,
    state: ProducerStateManager,
    segments: Sequence[LogSegment],
    *,
    log_start_offset: int,
    log_end_offset: int,
    clean_shutdown: bool,
    now_ms: int,
) -> None:
    """Load ``state`` from the snapshots and the log (the module docstring's steps)."""
    bases = [s.base_offset for s in segments]
    _remove_stray_snapshots(directory, bases)
    to_snapshot = [*bases[-2:], log_end_offset]
    if not list_snapshot_offsets(directory) and clean_shutdown:
        for offset in to_snapshot:
            state.map_end_offset = max(state.map_end_offset, offset)
            take_snapshot(directory, state)
        state.map_end_offset = log_end_offset
        return
    delete_snapshots(
        directory,
        [
            o
            for o in list_snapshot_offsets(directory)
            if o > log_end_offset or o <= log_start_offset
        ],
    )
    _load_latest_snapshot(directory, state, log_start_offset, now_ms)
    start = state.map_end_offset
    if log_end_offset > start:
        for segment in segments:
            following = bases[bases.index(segment.base_offset) + 1 :]
            if following and following[0] <= start:
                continue  # wholly below the snapshot
            if segment.base_offset >= log_end_offset:
                break
            state.map_end_offset = max(segment.base_offset, start, log_start_offset)
            if segment.base_offset in to_snapshot:
                take_snapshot(directory, state)
            for header in _batch_headers(segment, state.map_end_offset):
                if header.base_offset >= log_end_offset:
                    break
                state.replay(header)
    state.map_end_offset = log_end_offset
    take_snapshot(directory, state)


def _load_latest_snapshot(
    directory: Path, state: ProducerStateManager, log_start_offset: int, now_ms: int
) -> None:
    state.producers.clear()
    for offset in reversed(list_snapshot_offsets(directory)):
        path = snapshot_path(directory, offset)
        try:
            entries = read_snapshot(path)
        except CorruptSnapshotError as exc:
            logger.warning("deleting producer snapshot %s: %s", path, exc)
            path.unlink(missing_ok=True)
            continue
        for entry in entries:
            if not state.is_expired(entry, now_ms):
                state.producers[entry.producer_id] = entry
        state.map_end_offset = state.last_snapshot_offset = offset
        logger.info("loaded producer state from %s (%d producers)", path, len(state.producers))
        return
    state.map_end_offset = state.last_snapshot_offset = log_start_offset


def _batch_headers(segment: LogSegment, start_offset: int) -> Iterator[BatchHeader]:
    """Headers of the v2 batches in ``segment`` from the one holding ``start_offset``
    (legacy v0/v1 entries carry no producer id and are skipped)."""
    first = segment.find_entry(start_offset)
    if first is None:
        return
    fd = segment.file.fileno()
    end = segment.size_bytes
    position = first.position
    while position + HEADER_SIZE <= end:
        chunk = os.pread(fd, min(_CHUNK_BYTES, end - position), position)
        at = 0
        while at + HEADER_SIZE <= len(chunk):
            (length,) = struct.unpack_from(">i", chunk, at + 8)
            if chunk[at + MAGIC_OFFSET] == 2:
                header = parse_batch_header(chunk, at)
                if header.last_offset >= start_offset:
                    yield header
            at += length + LOG_OVERHEAD
        if at == 0:
            return  # recovery left a whole log; a header past the end means nothing more
        position += at
