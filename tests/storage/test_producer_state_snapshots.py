"""Producer-state ``.snapshot`` files: Kafka's byte layout, when they are written, and the
state rebuilt after clean and unclean restarts (real files, real logs)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import parse_batch_header
from odradek.storage.errors import OutOfOrderSequenceError
from odradek.storage.log import Log
from odradek.storage.producer_snapshot import (
    CorruptSnapshotError,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_offsets,
    read_snapshot,
)
from odradek.storage.producer_state import BatchMetadata, ProducerStateEntry
from tests.storage.conftest import batch, config, open_log, split_batches
from tests.storage.test_producer_state import PID, pbatch


def _entry(pid: int, epoch: int, last_seq: int, last_offset: int, delta: int, ts: int) -> bytes:
    """One entry as Kafka's Schema writes it, built field by field from the documented schema."""
    return (
        struct.pack(">q", pid)
        + struct.pack(">h", epoch)
        + struct.pack(">i", last_seq)
        + struct.pack(">q", last_offset)
        + struct.pack(">i", delta)
        + struct.pack(">q", ts)
        + struct.pack(">i", -1)  # coordinator_epoch
        + struct.pack(">q", -1)  # current_txn_first_offset
    )


def test_snapshot_bytes_follow_kafkas_version_1_layout() -> None:
    entries = [
        ProducerStateEntry(9, 2, 5_000, [BatchMetadata(14, 120, 4, 5_000)]),
        ProducerStateEntry(3, 0, 7_000, [BatchMetadata(0, 7, 0, 7_000)]),
        ProducerStateEntry(5, 1, 8_000),  # no batch retained
    ]
    data = encode_snapshot(entries)
    body = (
        struct.pack(">i", 3)
        + _entry(3, 0, 0, 7, 0, 7_000)
        + _entry(5, 1, -1, -1, 0, 8_000)
        + _entry(9, 2, 14, 120, 4, 5_000)
    )
    assert data == struct.pack(">hI", 1, crc32c(body)) + body
    assert len(data) == 2 + 4 + 4 + 3 * 46
    decoded = decode_snapshot(data)
    assert [
        (e.producer_id, e.producer_epoch, e.last_seq, e.last_timestamp_ms) for e in decoded
    ] == [
        (3, 0, 0, 7_000),
        (5, 1, -1, 8_000),
        (9, 2, 14, 5_000),
    ]
    assert list(decoded[2].batches) == [BatchMetadata(14, 120, 4, 5_000)]
    assert decoded[2].batches[0].first_seq == 10 and decoded[2].batches[0].first_offset == 116


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: struct.pack(">h", 2) + d[2:], "version"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "CRC"),
        (lambda d: d[:20], "CRC"),
        (lambda d: d[:4], "short"),
    ],
)
def test_corrupt_snapshots_are_refused(mutate: object, reason: str) -> None:
    data = encode_snapshot([ProducerStateEntry(1, 0, 10, [BatchMetadata(3, 3, 0, 10)])])
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(mutate(data))  # type: ignore[operator]


def _reopen(log: Log, *, clean: bool, **kwargs: object) -> Log:
    if clean:
        log.close()
    else:  # a crash: nothing of close() runs; the unflushed data is on disk (page cache)
        for segment in log.segments:
            segment.file.close()
    return open_log(log.directory, log.config, clean_shutdown=clean, **kwargs)  # type: ignore[arg-type]


def test_clean_shutdown_writes_a_snapshot_at_the_log_end(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append(pbatch(0, 2) + pbatch(2, 3), now_ms=0)
    log.close()
    assert list_snapshot_offsets(log_dir) == [5]
    (entry,) = read_snapshot(log_dir / f"{5:020d}.snapshot")
    assert (entry.producer_id, entry.last_seq, entry.last_data_offset) == (PID, 4, 4)
    log = open_log(log_dir, clean_shutdown=True)
    # after a restart from the snapshot, the last batch is still found a duplicate
    info = log.append(pbatch(2, 3), now_ms=0)
    assert info.duplicate and (info.first_offset, info.last_offset) == (2, 4)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(9), now_ms=0)
    assert log.append(pbatch(5), now_ms=0).first_offset == 5
    log.close()


def test_a_roll_snapshots_at_the_new_segment_base(log_dir: Path) -> None:
    log = open_log(log_dir, config(segment_bytes=len(pbatch(0)) * 2))
    for seq in range(5):
        log.append(pbatch(seq), now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert list_snapshot_offsets(log_dir) == [2, 4]
    (entry,) = read_snapshot(log_dir / f"{4:020d}.snapshot")
    assert entry.last_seq == 3 and entry.last_data_offset == 3
    log.close()


def test_unclean_restart_rebuilds_the_state_from_the_log(log_dir: Path) -> None:
    log = open_log(log_dir, config(segment_bytes=len(pbatch(0, 2)) * 2))
    sent = [pbatch(seq, 2) for seq in range(0, 12, 2)]
    for data in sent:
        log.append(data, now_ms=0)
    log.append(pbatch(0, pid=77), now_ms=0)
    snapshots_before = list_snapshot_offsets(log_dir)
    log = _reopen(log, clean=False)
    assert list_snapshot_offsets(log_dir)[: len(snapshots_before)] == snapshots_before
    # The snapshot at the active segment's base (10) holds each producer's last batch only
    # (Kafka's format); the replay of the log after it re-learns the later ones. So the
    # batches at 8-9 (from the snapshot) and 10-11 (replayed) are still duplicates, an older
    # retry is out of order, as on Kafka.
    assert [s.base_offset for s in log.segments][-1] == 10
    for back in (1, 2):
        info = log.append(sent[-back], now_ms=0)
        assert info.duplicate, back
    with pytest.raises(OutOfOrderSequenceError):
        log.append(sent[-3], now_ms=0)
    assert log.append(pbatch(12), now_ms=0).first_offset == 13
    assert log.append(pbatch(1, pid=77), now_ms=0).first_offset == 14
    log.close()


def test_unclean_restart_without_any_snapshot_replays_the_whole_log(log_dir: Path) -> None:
    log = open_log(log_dir)
    sent = [pbatch(seq) for seq in range(5)]
    for data in sent:
        log.append(data, now_ms=0)
    log = _reopen(log, clean=False)
    for data, offset in zip(sent, range(5), strict=True):
        info = log.append(data, now_ms=0)
        assert info.duplicate and info.first_offset == offset
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(7), now_ms=0)
    log.close()


def test_recovery_truncation_drops_snapshots_above_the_new_end(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append(pbatch(0, 2), now_ms=0)
    log.flush()
    recovery_point = log.recovery_point
    log.append(pbatch(2, 2), now_ms=0)
    log.close()  # snapshot at 4
    assert list_snapshot_offsets(log_dir) == [4]
    # a torn tail: the second batch loses its last bytes; the snapshot at 4 is now beyond it
    path = log_dir / f"{0:020d}.log"
    os.truncate(path, os.path.getsize(path) - 3)
    log = open_log(log_dir, recovery_point=recovery_point)
    assert log.next_offset == 2
    assert list_snapshot_offsets(log_dir) == [2]
    # the state is the log's: sequence 2 (the lost batch) is accepted again, not a duplicate
    info = log.append(pbatch(2, 2), now_ms=0)
    assert not info.duplicate and info.first_offset == 2
    log.close()


def test_a_corrupt_snapshot_falls_back_to_an_older_one(log_dir: Path) -> None:
    log = open_log(log_dir, config(segment_bytes=len(pbatch(0)) * 2))
    for seq in range(5):
        log.append(pbatch(seq), now_ms=0)
    log.close()
    assert list_snapshot_offsets(log_dir) == [2, 4, 5]
    (log_dir / f"{5:020d}.snapshot").write_bytes(b"garbage")
    log = open_log(log_dir)  # unclean: rebuilt from the snapshot at 4, then the log
    assert log.append(pbatch(4), now_ms=0).duplicate
    assert log.append(pbatch(5), now_ms=0).first_offset == 5
    log.close()


def test_a_log_without_snapshots_after_a_clean_shutdown_is_not_scanned(log_dir: Path) -> None:
    # Kafka's upgrade path: the data predates producer state, nothing is rebuilt.
    log = open_log(log_dir, config(segment_bytes=len(batch(1)) * 2))
    for _ in range(5):
        log.append(batch(1), now_ms=0)
    log.close()
    for offset in list_snapshot_offsets(log_dir):
        (log_dir / f"{offset:020d}.snapshot").unlink()
    log = open_log(log_dir, log.config, clean_shutdown=True)
    assert list_snapshot_offsets(log_dir) == [2, 4, 5]  # empty ones, as Kafka takes them
    assert all(read_snapshot(log_dir / f"{o:020d}.snapshot") == [] for o in (2, 4, 5))
    log.close()


def test_expired_producers_are_not_loaded(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append(pbatch(0, ts=1_000), now_ms=1_000)
    log.close()
    log = open_log(log_dir, clean_shutdown=True, now_ms=1_000 + 86_400_000)
    assert log.producer_state.is_empty()
    log.close()


def test_retention_deletes_the_snapshots_of_removed_segments_and_keeps_the_state(
    log_dir: Path,
) -> None:
    log = open_log(log_dir, config(segment_bytes=len(pbatch(0)) * 2))
    for seq in range(6):
        log.append(pbatch(seq), now_ms=0)
    assert list_snapshot_offsets(log_dir) == [2, 4]
    log.remove_segments(log.segments[:2], now_ms=0)  # segments 0 and 2 go
    assert list_snapshot_offsets(log_dir) == [4]
    assert log.log_start_offset == 4
    assert log.append(pbatch(5), now_ms=0).duplicate  # the state survives retention
    log.advance_log_start_offset(5)  # DeleteRecords
    assert log.append(pbatch(6), now_ms=0).first_offset == 6
    log.close()


def test_compaction_keeps_each_producers_last_batch(log_dir: Path) -> None:
    from tests.storage.cleaner_helpers import clean_pass, wall_ms

    compact = {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0}
    log = open_log(log_dir, config(**compact, segment_bytes=200))
    log.append(pbatch(0), now_ms=0)  # key k, producer PID: its last batch
    log.append(pbatch(0, pid=9), now_ms=0)  # producer 9's first batch
    log.append(pbatch(1, pid=9), now_ms=0)  # producer 9's last batch
    for _ in range(3):  # key k again, no producer: every earlier record is superseded
        log.append(encode_batch([(b"k", b"plain", 1_000)]), now_ms=0)
    log.roll(0)
    log.flush()
    assert clean_pass(log, wall_ms()).records_before == 6
    headers = [
        parse_batch_header(raw)
        for segment in log.segments
        for raw in split_batches(os.pread(segment.file.fileno(), segment.size_bytes, 0))
    ]
    kept = [(h.producer_id, h.base_offset, h.record_count) for h in headers if h.producer_id >= 0]
    # every record is superseded; the producers' last batches stay, emptied (producer 9's
    # older batch may stay too, emptied, where it ends a cleaned segment's offset range)
    assert {(PID, 0, 0), (9, 2, 0)} <= set(kept)
    assert all(count == 0 for _, _, count in kept)
    log = _reopen(log, clean=False)  # rebuilt from the log alone: the state survives
    for snapshot in list_snapshot_offsets(log_dir):
        (log_dir / f"{snapshot:020d}.snapshot").unlink()
    log = _reopen(log, clean=False)
    assert log.append(pbatch(1, pid=9), now_ms=0).duplicate
    assert log.append(pbatch(0), now_ms=0).duplicate
    log.close()


def test_a_roll_snapshot_is_fsynced_by_the_next_flush_not_by_the_roll(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(log_dir, config(segment_bytes=len(pbatch(0)) * 2))
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    for seq in range(2):
        log.append(pbatch(seq), now_ms=0)
    monkeypatch.setattr(os, "fsync", fsync)
    log.append(pbatch(2), now_ms=0)  # rolls at 2: the segment's dir fsync only
    assert list_snapshot_offsets(log_dir) == [2]
    rolled_fsyncs = len(synced)
    log.flush()
    assert not log._unsynced_snapshots
    assert len(synced) > rolled_fsyncs
    monkeypatch.undo()
    log.close()
