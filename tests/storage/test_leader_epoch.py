"""Leader epoch 0: stamped into every appended batch, kept in ``leader-epoch-checkpoint``."""

from __future__ import annotations

import os
from pathlib import Path

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import parse_batch_header, validate_batch
from odradek.storage.checkpoints import read_leader_epoch_checkpoint
from odradek.storage.config import LogConfig
from odradek.storage.leader_epoch import LeaderEpochCache
from odradek.storage.manager import LogManager
from tests.storage.conftest import batch, config, open_log, region_bytes, split_batches

CHECKPOINT = "leader-epoch-checkpoint"


def test_a_new_partition_starts_epoch_zero_at_offset_zero(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(), node_id=1, clock_ms=lambda: 0)
    manager.startup()
    log = manager.create_topic("t", 1)[0]
    path = log.directory / CHECKPOINT
    assert path.read_bytes() == b"0\n1\n0 0\n"  # Kafka's LeaderEpochCheckpointFile, version 0
    manager.shutdown()


def test_appended_batches_carry_epoch_zero_with_a_valid_crc(log_dir: Path) -> None:
    log = open_log(log_dir, config(message_timestamp_type="LogAppendTime"))
    sent = [batch(2), encode_batch([(b"k", b"v", 5)], partition_leader_epoch=7)]
    for data in sent:
        log.append(data, now_ms=123)
    stored = split_batches(region_bytes(log.read(0, 1 << 20).region))  # checks each CRC
    assert [parse_batch_header(raw).partition_leader_epoch for raw in stored] == [0, 0]
    for raw in stored:
        validate_batch(raw)
    log.close()


def test_an_existing_partition_without_the_file_gets_epoch_zero_at_its_end(log_dir: Path) -> None:
    log = open_log(log_dir)
    for _ in range(3):
        log.append(batch(2), now_ms=0)
    log.close()
    (log_dir / CHECKPOINT).unlink()
    log = open_log(log_dir, clean_shutdown=True)
    # what a Kafka broker does on becoming leader with an empty cache: epoch 0 from the end
    assert read_leader_epoch_checkpoint(log_dir / CHECKPOINT) == [(0, 6)]
    log.close()


def test_the_log_start_offset_moves_the_epoch_start(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(), node_id=1, clock_ms=lambda: 0)
    manager.startup()
    log = manager.create_topic("t", 1)[0]
    for _ in range(4):
        log.append(batch(1), now_ms=0)
    log.advance_log_start_offset(3)  # DeleteRecords
    assert read_leader_epoch_checkpoint(log.directory / CHECKPOINT) == [(0, 0)]  # not yet
    manager.checkpoint()
    assert read_leader_epoch_checkpoint(log.directory / CHECKPOINT) == [(0, 3)]
    manager.shutdown()


def test_load_reconciles_with_a_truncated_log(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append(batch(1), now_ms=0)
    log.close()
    # a checkpoint naming an epoch that starts past the log end (a torn tail cut it off):
    # truncateFromEnd drops the entry; the epoch itself stays the current one, from the end
    (log_dir / CHECKPOINT).write_bytes(b"0\n2\n0 0\n3 5\n")
    log = open_log(log_dir, clean_shutdown=True)
    assert read_leader_epoch_checkpoint(log_dir / CHECKPOINT) == [(0, 0), (3, 1)]
    log.close()
    (log_dir / CHECKPOINT).write_bytes(b"0\n2\n0 0\n2 1\n")  # Kafka-written epochs 0 and 2
    log = open_log(log_dir, clean_shutdown=True)
    # epoch 2 started at the end (nothing written under it): kept, the newest epoch
    assert log.leader_epochs.entries == [(0, 0), (2, 1)]
    log.close()


def test_a_kafka_directory_keeps_its_newest_epoch(log_dir: Path) -> None:
    log = open_log(log_dir)
    for _ in range(3):
        log.append(batch(1), now_ms=0)
    log.close()
    (log_dir / CHECKPOINT).write_bytes(b"0\n2\n0 0\n4 2\n")
    log = open_log(log_dir, clean_shutdown=True, log_start_offset=1)
    assert log.leader_epochs.entries == [(0, 1), (4, 2)]
    log.append(batch(1), now_ms=0)  # epochs never go back
    raw = os.pread(
        log.active_segment.file.fileno(), 61, log.active_segment.size_bytes - len(batch(1))
    )
    assert parse_batch_header(raw).partition_leader_epoch == 4
    log.close()


def test_a_damaged_checkpoint_is_rebuilt(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append(batch(1), now_ms=0)
    log.close()
    (log_dir / CHECKPOINT).write_bytes(b"0\n9\n")
    log = open_log(log_dir, clean_shutdown=True)
    assert read_leader_epoch_checkpoint(log_dir / CHECKPOINT) == [(0, 1)]
    log.close()


def test_truncate_from_start_folds_older_epochs() -> None:
    cache = LeaderEpochCache(Path("/nonexistent"), [(0, 0), (1, 10), (2, 20)])
    cache.truncate_from_start(15)
    assert cache.entries == [(1, 15), (2, 20)]
    cache.truncate_from_start(20)
    assert cache.entries == [(2, 20)]
    cache.truncate_from_start(5)
    assert cache.entries == [(2, 20)]
