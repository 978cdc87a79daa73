"""``LogManager.allocate_producer_id``: unique across restarts and crashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.storage.config import LogConfig
from odradek.storage.errors import StorageError
from odradek.storage.manager import LogManager
from odradek.storage.producer_ids import (
    BLOCK_SIZE,
    PRODUCER_ID_BLOCK,
    ProducerIdAllocator,
    read_next_block_start,
)


def _manager(dirs: list[Path]) -> LogManager:
    manager = LogManager(dirs, LogConfig(), node_id=1, clock_ms=lambda: 0)
    manager.startup()
    return manager


def test_ids_are_dense_within_a_block_and_the_block_is_durable_first(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    assert not (tmp_path / PRODUCER_ID_BLOCK).exists()  # nothing reserved before first use
    assert [manager.allocate_producer_id() for _ in range(3)] == [0, 1, 2]
    assert (tmp_path / PRODUCER_ID_BLOCK).read_bytes() == b"0\n1000\n"
    manager.shutdown()


def test_a_restart_never_reuses_an_id(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    first = [manager.allocate_producer_id() for _ in range(5)]
    manager.shutdown()
    manager = _manager([tmp_path])
    assert manager.allocate_producer_id() == BLOCK_SIZE  # the rest of block 0 is skipped
    manager.shutdown()
    assert first == list(range(5))


def test_a_crash_never_reuses_an_id(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    handed_out = {manager.allocate_producer_id() for _ in range(BLOCK_SIZE + 10)}
    assert read_next_block_start(tmp_path / PRODUCER_ID_BLOCK) == 2 * BLOCK_SIZE
    for lock in manager._locks.values():  # a crash: no shutdown, the kernel drops the lock
        lock.release()
    again = _manager([tmp_path])
    assert again.allocate_producer_id() == 2 * BLOCK_SIZE not in handed_out
    again.shutdown()


def test_every_online_dir_records_the_block_and_the_largest_wins(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    manager = _manager([a, b])
    manager.allocate_producer_id()
    manager.shutdown()
    assert read_next_block_start(a / PRODUCER_ID_BLOCK) == BLOCK_SIZE
    assert read_next_block_start(b / PRODUCER_ID_BLOCK) == BLOCK_SIZE
    (a / PRODUCER_ID_BLOCK).unlink()  # say the first dir lost it: the second still knows
    manager = _manager([a, b])
    assert manager.allocate_producer_id() == BLOCK_SIZE
    manager.shutdown()


def test_a_damaged_block_file_stops_the_start(tmp_path: Path) -> None:
    _manager([tmp_path]).shutdown()
    (tmp_path / PRODUCER_ID_BLOCK).write_bytes(b"0\nlots\n")
    manager = LogManager([tmp_path], LogConfig(), node_id=1, clock_ms=lambda: 0)
    with pytest.raises(StorageError, match=PRODUCER_ID_BLOCK):
        manager.startup()


def test_a_failed_persist_hands_out_nothing() -> None:
    calls: list[int] = []

    def persist(value: int) -> None:
        calls.append(value)
        if len(calls) == 1:
            raise OSError("disk full")

    allocator = ProducerIdAllocator(3000, persist)
    with pytest.raises(OSError):
        allocator.allocate()
    assert allocator.allocate() == 3000 and calls == [4000, 4000]
