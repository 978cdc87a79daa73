"""LogManager over several real log dirs: start-up, checkpoints, topics, offline dirs."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.storage.checkpoints import read_offset_checkpoint
from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    InvalidConfigError,
    InvalidTopicError,
    LogCorruptedError,
    LogDirOfflineError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.manager import LogManager
from odradek.storage.meta_properties import read_meta_properties
from tests.storage.conftest import all_records, batch


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def start(dirs: list[Path], *, node_id: int = 1, config: LogConfig | None = None) -> LogManager:
    manager = LogManager(dirs, config or LogConfig(), node_id=node_id, clock_ms=FakeClock())
    manager.startup()
    return manager


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    # config order is deliberately not name order
    return [tmp_path / "z-first", tmp_path / "m-second", tmp_path / "a-third"]


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its contents (None for directories)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        out[str(path.relative_to(root))] = None if path.is_dir() else path.read_bytes()
    return out


def simulate_crash(manager: LogManager, dirs: list[Path]) -> None:
    """Shut down, then put back the on-disk state of a crash: no clean-shutdown markers."""
    manager.shutdown()
    for log_dir in dirs:
        (log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)


# -- placement -------------------------------------------------------------------------------


def test_new_partitions_go_to_the_least_loaded_dir(dirs: list[Path]) -> None:
    manager = start(dirs)
    where = manager.partitions.log_dir_of
    manager.create_topic("a", 4)
    assert [where[("a", p)] for p in range(4)] == [dirs[0], dirs[1], dirs[2], dirs[0]]
    manager.create_topic("b", 1)  # 2/1/1: the tie goes to the earlier dir in config order
    assert where[("b", 0)] == dirs[1]
    manager.create_topic("c", 1)
    assert where[("c", 0)] == dirs[2]
    manager.create_topic("d", 1)
    assert where[("d", 0)] == dirs[0]
    for topic, partition in manager.partitions.logs:
        assert (where[(topic, partition)] / f"{topic}-{partition}").is_dir()
    manager.shutdown()

    manager = start(dirs)  # counts come from what is on disk
    counts = manager.partitions.partitions_per_dir(manager.online_dirs)
    assert counts == {dirs[0]: 3, dirs[1]: 2, dirs[2]: 2}
    manager.add_partitions("b", 3)
    assert [manager.partitions.log_dir_of[("b", p)] for p in (1, 2)] == [dirs[1], dirs[2]]
    manager.shutdown()


# -- checkpoints and clean shutdown ------------------------------------------------------------


def test_checkpoints_round_trip_in_kafka_format(tmp_path: Path) -> None:
    log_dir = tmp_path / "data"
    manager = start([log_dir])
    manager.create_topic("t", 2)
    log = manager.partitions.get_log("t", 0)
    log.append(batch(3), now_ms=0)
    log.flush()
    log.append(batch(2), now_ms=0)  # unflushed
    log.advance_log_start_offset(1)
    manager.checkpoint()
    assert (log_dir / "recovery-point-offset-checkpoint").read_bytes() == b"0\n2\nt 0 3\nt 1 0\n"
    assert (log_dir / "log-start-offset-checkpoint").read_bytes() == b"0\n2\nt 0 1\nt 1 0\n"
    assert (log_dir / "replication-offset-checkpoint").read_bytes() == b"0\n2\nt 0 5\nt 1 0\n"
    manager.shutdown()
    assert read_offset_checkpoint(log_dir / "recovery-point-offset-checkpoint") == {
        ("t", 0): 5,
        ("t", 1): 0,
    }
    assert (log_dir / ".kafka_cleanshutdown").exists()

    manager = start([log_dir])
    assert not (log_dir / ".kafka_cleanshutdown").exists()  # consumed at start-up
    log = manager.partitions.get_log("t", 0)
    assert (log.log_start_offset, log.recovery_point, log.next_offset) == (1, 5, 5)
    assert [r.offset for r in all_records(log)] == [1, 2, 3, 4]
    manager.shutdown()


def test_partition_metadata_holds_the_topic_id(tmp_path: Path) -> None:
    manager = start([tmp_path / "d"])
    manager.create_topic("t", 2)
    topic_id = manager.topics["t"].topic_id
    for p in range(2):
        data = (tmp_path / "d" / f"t-{p}" / "partition.metadata").read_bytes()
        assert data == f"version: 0\ntopic_id: {topic_id}".encode()
    manager.shutdown()
    manager = start([tmp_path / "d"])
    assert manager.topics["t"].topic_id == topic_id
    manager.shutdown()


def test_unclean_restart_revalidates_through_the_manager(tmp_path: Path) -> None:
    log_dir = tmp_path / "d"
    cfg = LogConfig().with_overrides({"segment.bytes": str(3 * len(batch(1)))})
    manager = start([log_dir], config=cfg)
    manager.create_topic("t", 1)
    log = manager.partitions.get_log("t", 0)
    for _ in range(7):
        log.append(batch(1), now_ms=0)
    simulate_crash(manager, [log_dir])
    # the crash left a torn write and an old recovery point
    partition = log_dir / "t-0"
    with open(partition / f"{6:020d}.log", "ab") as f:
        f.write(batch(1)[:30])
    (log_dir / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\nt 0 3\n")
    manager = start([log_dir], config=cfg)
    log = manager.partitions.get_log("t", 0)
    assert log.next_offset == 7 and log.recovery_point == 3
    assert (partition / f"{6:020d}.log").stat().st_size == len(batch(1))
    manager.shutdown()


# -- meta.properties and locks -----------------------------------------------------------------


def test_meta_properties_written_once_and_node_id_mismatch_refused(dirs: list[Path]) -> None:
    manager = start(dirs, node_id=7)
    metas = [read_meta_properties(d / "meta.properties") for d in dirs]
    assert all(m.node_id == 7 and m.version == 1 for m in metas)
    assert len({m.cluster_id for m in metas}) == 1
    assert len({m.directory_id for m in metas}) == 3
    written = [(d / "meta.properties").read_bytes() for d in dirs]
    assert written[0].startswith(b"#\n#")
    manager.shutdown()

    manager = start(dirs, node_id=7)
    assert [(d / "meta.properties").read_bytes() for d in dirs] == written  # not rewritten
    assert manager.cluster_id == metas[0].cluster_id
    manager.shutdown()

    with pytest.raises(StorageError, match=r"node\.id"):
        start(dirs, node_id=8)
    assert [(d / "meta.properties").read_bytes() for d in dirs] == written
    start(dirs, node_id=7).shutdown()  # the failed start released its locks


def test_cluster_id_mismatch_between_dirs_is_refused(tmp_path: Path) -> None:
    start([tmp_path / "one"]).shutdown()
    start([tmp_path / "two"]).shutdown()  # another cluster id
    with pytest.raises(StorageError, match=r"cluster\.id"):
        start([tmp_path / "one", tmp_path / "two"])
    start([tmp_path / "one"]).shutdown()


def test_a_log_dir_that_cannot_be_created_goes_offline(tmp_path: Path) -> None:
    blocker = tmp_path / "regular-file"
    blocker.write_bytes(b"not a directory")
    good = [tmp_path / "good1", tmp_path / "good2"]
    bad = blocker / "logs"
    manager = start([good[0], bad, good[1]])
    assert list(manager.offline_dirs) == [bad]
    assert manager.online_dirs == good
    logs = manager.create_topic("t", 4)
    assert {manager.partitions.log_dir_of[("t", p)] for p in range(4)} == set(good)
    for log in logs:
        log.append(batch(2), now_ms=0)
    manager.checkpoint()
    assert (good[0] / "recovery-point-offset-checkpoint").exists()
    manager.shutdown()

    with pytest.raises(StorageError, match="no usable log dir"):
        start([bad, blocker / "other"])


def test_a_corrupt_meta_properties_takes_only_its_dir_offline(dirs: list[Path]) -> None:
    start(dirs).shutdown()
    (dirs[1] / "meta.properties").write_bytes(b"garbage\n")
    manager = start(dirs)
    assert list(manager.offline_dirs) == [dirs[1]]
    assert "meta.properties" in manager.offline_dirs[dirs[1]]
    manager.shutdown()


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[Path]:
    """A log dir whose ``.lock`` another process holds (flock) until the test ends."""
    log_dir = tmp_path / "held"
    log_dir.mkdir()
    code = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(log_dir / ".lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield log_dir
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


def test_a_dir_locked_by_another_process_goes_offline(tmp_path: Path, lock_holder: Path) -> None:
    free = tmp_path / "free"
    manager = start([lock_holder, free])
    assert list(manager.offline_dirs) == [lock_holder]
    assert "locked by another process" in manager.offline_dirs[lock_holder]
    assert not (lock_holder / "meta.properties").exists()  # untouched
    manager.create_topic("t", 2)
    assert {manager.partitions.log_dir_of[("t", p)] for p in range(2)} == {free}
    manager.shutdown()

    with pytest.raises(StorageError, match="locked by another process"):
        start([lock_holder])


def test_a_second_manager_on_the_same_dirs_is_refused(tmp_path: Path) -> None:
    first = start([tmp_path / "d"])
    with pytest.raises(StorageError, match="locked"):
        start([tmp_path / "d"])
    first.shutdown()
    start([tmp_path / "d"]).shutdown()


# -- topics ----------------------------------------------------------------------------------


def test_topic_configs_persist_across_restarts(dirs: list[Path]) -> None:
    manager = start(dirs)
    manager.create_topic(
        "t", 2, {"segment.bytes": "1000", "message.timestamp.type": "LogAppendTime"}
    )
    assert manager.partitions.get_log("t", 1).config.log_append_time
    manager.create_topic("plain", 1)
    config = manager.alter_topic_configs("t", {"segment.bytes": "2000", "retention.ms": "-1"})
    assert config.segment_bytes == 2000 and not config.log_append_time
    assert manager.partitions.get_log("t", 0).config == config  # effective at once
    topic_id = manager.topics["t"].topic_id
    manager.shutdown()

    (dirs[0] / "topic-configs.json").unlink()  # every root holds a copy
    manager = start(dirs)
    assert manager.topics["t"].configs == {"segment.bytes": "2000", "retention.ms": "-1"}
    assert manager.topics["t"].topic_id == topic_id
    assert manager.topics["plain"].configs == {}
    for p in range(2):
        assert manager.partitions.get_log("t", p).config == config
    assert manager.effective_config("plain") == LogConfig()
    manager.shutdown()


def test_the_newest_topic_configs_copy_wins(dirs: list[Path]) -> None:
    manager = start(dirs[:2])
    manager.create_topic("t", 1, {"segment.bytes": "1000"})
    stale = (dirs[1] / "topic-configs.json").read_bytes()
    manager.alter_topic_configs("t", {"segment.bytes": "3000"})
    manager.shutdown()
    (dirs[1] / "topic-configs.json").write_bytes(stale)
    (dirs[0] / "topic-configs.json").write_bytes(b"{not json")
    manager = start(dirs[:2])  # the unreadable copy is ignored, not fatal
    assert manager.partitions.get_log("t", 0).config.segment_bytes == 1000
    manager.shutdown()
    (dirs[0] / "topic-configs.json").unlink()
    manager = start(dirs[:2])
    manager.alter_topic_configs("t", {"segment.bytes": "4000"})
    manager.shutdown()
    manager = start(dirs[:2])
    assert manager.partitions.get_log("t", 0).config.segment_bytes == 4000
    manager.shutdown()


def test_create_topic_rules(dirs: list[Path]) -> None:
    manager = start(dirs)
    manager.create_topic("t", 1)
    with pytest.raises(TopicExistsError):
        manager.create_topic("t", 3)
    with pytest.raises(StorageError):
        manager.create_topic("zero", 0)
    assert "zero" not in manager.topics
    with pytest.raises(StorageError):
        manager.add_partitions("t", 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.add_partitions("nope", 2)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.partitions.get_log("t", 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.alter_topic_configs("nope", {})
    manager.shutdown()


def test_delete_topic_removes_its_directories(dirs: list[Path]) -> None:
    manager = start(dirs)
    manager.create_topic("t", 4)
    manager.create_topic("keep", 1)
    for p in range(4):
        manager.partitions.get_log("t", p).append(batch(3), now_ms=0)
    manager.delete_topic("t")
    for log_dir in dirs:
        assert [p.name for p in log_dir.iterdir() if p.is_dir()] in ([], ["keep-0"])
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.partitions.get_log("t", 0)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.delete_topic("t")
    assert manager.partitions.partitions_per_dir(manager.online_dirs) == {
        dirs[0]: 0,
        dirs[1]: 0,
        dirs[2]: 0,
    } | {manager.partitions.log_dir_of[("keep", 0)]: 1}
    manager.shutdown()

    manager = start(dirs)
    assert "t" not in manager.topics and ("t", 0) not in manager.partitions.logs
    (log,) = manager.create_topic("t", 1)  # a new topic under the old name starts afresh
    assert log.next_offset == 0 and manager.partitions.partition_count("t") == 1
    manager.shutdown()


def test_delete_topic_with_the_longest_name(tmp_path: Path) -> None:
    name = "x" * 249
    manager = start([tmp_path / "d"])
    manager.create_topic(name, 12)
    manager.delete_topic(name)
    assert [p.name for p in (tmp_path / "d").iterdir() if p.is_dir()] == []
    manager.shutdown()


def test_leftover_delete_dirs_and_strays_at_start_up(tmp_path: Path) -> None:
    log_dir = tmp_path / "d"
    start([log_dir]).shutdown()
    doomed = log_dir / "t-0.0123456789abcdef0123456789abcdef-delete"
    doomed.mkdir()
    (doomed / f"{0:020d}.log").write_bytes(batch(1))
    (log_dir / "not_a_partition").mkdir()
    manager = start([log_dir])
    assert not doomed.exists()
    assert (log_dir / "not_a_partition").is_dir()  # ignored, not removed
    assert manager.partitions.logs == {}
    manager.shutdown()


def test_corrupt_checkpoints_are_logged_and_mean_full_recovery(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_dir = tmp_path / "d"
    size = len(batch(1))
    cfg = LogConfig().with_overrides({"segment.bytes": str(3 * size)})
    manager = start([log_dir], config=cfg)
    manager.create_topic("t", 1)
    log = manager.partitions.get_log("t", 0)
    for _ in range(9):
        log.append(batch(1), now_ms=0)
    log.advance_log_start_offset(2)
    simulate_crash(manager, [log_dir])
    # bit rot far below the checkpointed recovery point (9): only a full recovery finds it
    path = log_dir / "t-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    data[size + 70] ^= 0xFF
    path.write_bytes(bytes(data))
    files_before = {p.name: p.read_bytes() for p in (log_dir / "t-0").iterdir()}
    (log_dir / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\nt 0 9\ngarbage\n")
    (log_dir / "log-start-offset-checkpoint").write_bytes(b"")
    with caplog.at_level(logging.ERROR, logger="odradek.storage.log_dir_checkpoints"):
        manager = start([log_dir], config=cfg)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "recovery-point-offset-checkpoint" in messages
    assert "log-start-offset-checkpoint" in messages
    assert manager.offline_dirs == {}
    # segment 0 of 3 is damaged, not torn: only this partition goes offline, nothing is cut
    with pytest.raises(LogCorruptedError, match=f"{path} is damaged at byte {size}"):
        manager.partitions.get_log("t", 0)
    assert manager.partitions.partition_count("t") == 1
    manager.shutdown()
    logs_after = {p.name: p.read_bytes() for p in (log_dir / "t-0").iterdir()}
    assert {n: b for n, b in logs_after.items() if n.endswith(".log")} == {
        n: b for n, b in files_before.items() if n.endswith(".log")
    }
    assert not (log_dir / ".kafka_cleanshutdown").exists()  # the next start checks again


@pytest.mark.parametrize(
    "name",
    ["../x", "", "x" * 250, "a/b", "a\x00b", ".", "..", "a b", "caf\u00e9", "/abs", "t\n"],
)
def test_invalid_topic_names_are_rejected_before_any_io(tmp_path: Path, name: str) -> None:
    manager = start([tmp_path / "d"])
    before = snapshot(tmp_path)
    with pytest.raises(InvalidTopicError):
        manager.create_topic(name, 1)
    with pytest.raises(InvalidTopicError):
        manager.create_topic(name, 1, {"segment.bytez": "1"})  # the name is checked first
    assert snapshot(tmp_path) == before
    assert manager.topics == {} and manager.partitions.logs == {}
    manager.shutdown()


def test_the_longest_legal_topic_name_is_accepted(tmp_path: Path) -> None:
    manager = start([tmp_path / "d"])
    name = "a.B_c-9" * 35 + "abcd"
    assert len(name) == 249
    manager.create_topic(name, 1)
    assert (tmp_path / "d" / f"{name}-0").is_dir()
    manager.shutdown()


@pytest.mark.parametrize(
    ("configs", "named"),
    [
        ({"segment.bytez": "1000"}, "segment.bytez"),
        ({"segment.bytes": "abc"}, "segment.bytes"),
        ({"segment.bytes": "1_000"}, "segment.bytes"),
        ({"segment.bytes": "13"}, "segment.bytes"),
        ({"segment.index.bytes": "8"}, "segment.index.bytes"),
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"message.timestamp.type": "Now"}, "message.timestamp.type"),
        ({"cleanup.policy": "delete,shred"}, "cleanup.policy"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
        ({"compression.type": "brotli"}, "compression.type"),
    ],
)
def test_bad_configs_are_rejected_naming_the_key(
    tmp_path: Path, configs: dict[str, str], named: str
) -> None:
    manager = start([tmp_path / "d"])
    manager.create_topic("ok", 1, {"segment.bytes": "5000"})
    before = snapshot(tmp_path)
    with pytest.raises(InvalidConfigError, match=named.replace(".", r"\.")):
        manager.create_topic("t", 1, configs)
    with pytest.raises(InvalidConfigError, match=named.replace(".", r"\.")):
        manager.alter_topic_configs("ok", configs)
    assert snapshot(tmp_path) == before
    assert "t" not in manager.topics
    assert manager.topics["ok"].configs == {"segment.bytes": "5000"}
    assert manager.partitions.get_log("ok", 0).config.segment_bytes == 5000
    manager.shutdown()


def test_no_online_dir_left_for_a_new_partition(tmp_path: Path) -> None:
    manager = start([tmp_path / "d"])
    manager.mark_dir_offline(tmp_path / "d", "disk pulled")
    with pytest.raises(LogDirOfflineError):
        manager.create_topic("t", 1)
    manager.shutdown()


def test_a_partition_dir_that_is_offline_is_dropped_with_its_logs(dirs: list[Path]) -> None:
    manager = start(dirs)
    manager.create_topic("t", 3)
    manager.mark_dir_offline(dirs[1], "I/O error")
    assert ("t", 1) not in manager.partitions.logs
    with pytest.raises(LogDirOfflineError, match="I/O error"):  # known, but offline
        manager.partitions.get_log("t", 1)
    assert manager.partitions.partition_count("t") == 3
    with pytest.raises(LogDirOfflineError):  # not half a topic
        manager.delete_topic("t")
    manager.partitions.get_log("t", 0).append(batch(1), now_ms=0)
    manager.shutdown()
    assert not (dirs[1] / ".kafka_cleanshutdown").exists()
    assert (dirs[0] / ".kafka_cleanshutdown").exists()
    manager = start(dirs)  # back online after a restart
    assert manager.partitions.partition_count("t") == 3
    assert os.path.isdir(dirs[1] / "t-1")
    manager.shutdown()


def test_an_io_error_at_shutdown_takes_only_that_dir_offline(dirs: list[Path]) -> None:
    manager = start(dirs[:2])
    manager.create_topic("t", 4)  # two partitions in each dir
    for p in range(4):
        manager.partitions.get_log("t", p).append(batch(1), now_ms=0)
    # the first dir's partitions vanish under the broker (a pulled disk, an operator's rm -rf)
    for p in (0, 2):
        shutil.rmtree(dirs[0] / f"t-{p}")
    manager.shutdown()
    assert dirs[0] in manager.offline_dirs
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    assert (dirs[1] / ".kafka_cleanshutdown").exists()
    assert read_offset_checkpoint(dirs[1] / "recovery-point-offset-checkpoint") == {
        ("t", 1): 1,
        ("t", 3): 1,
    }


def test_a_new_log_dir_listed_first_joins_the_existing_cluster(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    manager = start([old])
    cluster_id = manager.cluster_id
    manager.create_topic("t", 1)
    manager.shutdown()
    manager = start([new, old])  # an operator adds a log dir in front of the existing one
    assert manager.offline_dirs == {}
    assert manager.cluster_id == cluster_id
    assert read_meta_properties(new / "meta.properties").cluster_id == cluster_id
    assert manager.partitions.partition_count("t") == 1
    manager.shutdown()
