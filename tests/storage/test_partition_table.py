"""PartitionTable on its own: memory only, so stand-in logs do (test_manager.py uses real ones)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from odradek.storage.errors import (
    LogCorruptedError,
    LogDirOfflineError,
    PartitionLimitError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.log_dir_startup import DamagedPartition
from odradek.storage.partition_table import PartitionTable

A, B = Path("/a"), Path("/b")


def _log(topic: str, partition: int) -> SimpleNamespace:
    return SimpleNamespace(topic=topic, partition=partition)


def test_placement_counts_and_limit() -> None:
    table = PartitionTable(max_partitions=3, offline_dirs={})
    assert table.next_log_dir([A, B]) == A  # a tie goes to the first in log.dirs order
    table.add(("t", 0), A, _log("t", 0))
    assert table.next_log_dir([A, B]) == B
    table.add(("t", 1), B, _log("t", 1))
    assert table.partitions_per_dir([A, B]) == {A: 1, B: 1}
    assert table.partition_count("t") == 2 and table.partition_count("u") == 0
    table.check_limit(1)
    with pytest.raises(PartitionLimitError, match=r"max\.broker\.partitions=3"):
        table.check_limit(2)


def test_a_dir_taken_offline_keeps_its_partitions_in_their_topic() -> None:
    offline_dirs: dict[Path, str] = {}
    table = PartitionTable(max_partitions=10, offline_dirs=offline_dirs)
    logs = [_log("t", p) for p in range(3)]
    for p, log_dir in enumerate((A, B, A)):
        table.add(("t", p), log_dir, logs[p])
    offline_dirs[A] = "EIO"
    assert table.take_dir_offline(A) == [logs[0], logs[2]]
    assert table.online_of("t") == [("t", 1)] and table.offline_of("t") == [("t", 0), ("t", 2)]
    assert table.partition_count("t") == 3 and len(table) == 3
    assert table.logs_in(B) == [logs[1]] and table.logs_in(A) == []
    with pytest.raises(LogDirOfflineError, match="EIO"):
        table.get_log("t", 0)
    assert table.get_log("t", 1) is logs[1]
    with pytest.raises(UnknownTopicOrPartitionError):
        table.get_log("t", 3)
    assert table.pop(("t", 1)) == (logs[1], B)
    assert table.partition_count("t") == 2


def test_a_damaged_partition_is_offline_in_an_online_dir() -> None:
    table = PartitionTable(max_partitions=10, offline_dirs={})
    error = LogCorruptedError(A / "t-0" / "00000000000000000000.log", 70, "bad CRC")
    table.add(("t", 0), A, DamagedPartition(error, {"recovery-point-offset-checkpoint": 9}))
    table.add(("t", 1), A, _log("t", 1))
    with pytest.raises(LogCorruptedError) as raised:
        table.get_log("t", 0)
    assert raised.value is error
    assert table.dirs_with_damage() == {A}
    assert table.damaged_checkpoints_in(A) == {("t", 0): {"recovery-point-offset-checkpoint": 9}}
    assert table.damaged_checkpoints_in(B) == {}
    table.forget_online()
    assert table.logs == {} and table.log_dir_of == {} and table.partition_count("t") == 1
