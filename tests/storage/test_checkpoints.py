"""storage.checkpoints: offset and leader-epoch checkpoints byte for byte, strict readers, the
clean-shutdown marker and the dir lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOCK_FILE,
    DirLock,
    LockError,
    consume_clean_shutdown,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    write_clean_shutdown,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from odradek.storage.errors import InvalidTopicError, StorageError
from tests.storage.conftest import expect_checkpoint_error

ROOT = Path(__file__).resolve().parents[2]

topics = st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True).filter(
    lambda t: t not in (".", "..")
)
partitions = st.integers(0, 2**31 - 1)
offsets = st.integers(0, 2**63 - 1)


# -- offset checkpoints ----------------------------------------------------------------------


def test_offset_checkpoint_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(
        path,
        {("orders", 10): 5, ("orders", 2): 987, ("a-b.c_d", 0): 0, ("orders", 0): 1234},
    )
    assert path.read_bytes() == (b"0\n4\na-b.c_d 0 0\norders 0 1234\norders 2 987\norders 10 5\n")
    assert read_offset_checkpoint(path) == {
        ("a-b.c_d", 0): 0,
        ("orders", 0): 1234,
        ("orders", 2): 987,
        ("orders", 10): 5,
    }


def test_offset_checkpoint_empty_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    assert read_offset_checkpoint(path) == {}
    write_offset_checkpoint(path, {})
    assert path.read_bytes() == b"0\n0\n"
    assert read_offset_checkpoint(path) == {}


def test_offset_checkpoint_reads_what_kafka_accepts(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    # Kafka splits entries on \s+ and BufferedReader.readLine takes \r\n; no final newline is fine.
    path.write_bytes(b"0\r\n2\r\n__consumer_offsets  7\t42\r\nmy.topic 0 9")
    assert read_offset_checkpoint(path) == {("__consumer_offsets", 7): 42, ("my.topic", 0): 9}


@settings(max_examples=75, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.tuples(topics, partitions), offsets, max_size=20))
def test_offset_checkpoint_round_trip(tmp_path: Path, entries: dict[tuple[str, int], int]) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    write_offset_checkpoint(path, entries)
    lines = [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    assert path.read_text() == "".join(f"{x}\n" for x in ["0", str(len(entries)), *lines])
    assert read_offset_checkpoint(path) == entries


GARBAGE_OFFSETS = {
    "empty file": (b"", 1),
    "wrong version": (b"1\n0\n", 1),
    "version not an integer": (b"zero\n0\n", 1),
    "binary garbage": (b"\x00\x01\x02PK", 1),
    "only the version": (b"0\n", 2),
    "count not an integer": (b"0\ntwo\nt 0 1\n", 2),
    "negative count": (b"0\n-1\n", 2),
    "count too high": (b"0\n2\nt 0 1\n", 2),
    "count too low": (b"0\n1\nt 0 1\nt 1 2\n", 2),
    "offset not an integer": (b"0\n1\nt 0 x\n", 3),
    "partition not an integer": (b"0\n1\nt p 1\n", 3),
    "unicode digits": (b"0\n1\nt 0 \xd9\xa3\n", 3),
    "extra field": (b"0\n1\nt 0 1 9\n", 3),
    "missing field": (b"0\n1\nt 0\n", 3),
    "truncated last line": (b"0\n2\nt 0 1\nt 1", 4),
    "blank line": (b"0\n1\n\nt 0 1\n", 3),
    "illegal topic": (b"0\n1\n../etc 0 1\n", 3),
    "negative offset": (b"0\n1\nt 0 -5\n", 3),
    "partition overflow": (b"0\n1\nt 2147483648 1\n", 3),
    "offset overflow": (b"0\n1\nt 0 9223372036854775808\n", 3),
    "duplicate partition": (b"0\n2\nt 0 1\nt 0 2\n", 4),
    "invalid utf-8": (b"0\n1\n\xff 0 1\n", 3),
}


@pytest.mark.parametrize("data,line", GARBAGE_OFFSETS.values(), ids=GARBAGE_OFFSETS.keys())
def test_offset_checkpoint_garbage(tmp_path: Path, data: bytes, line: int) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(data)
    expect_checkpoint_error(path, line, read_offset_checkpoint)


def test_offset_checkpoint_writer_rejects_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    with pytest.raises(InvalidTopicError):
        write_offset_checkpoint(path, {("bad topic", 0): 1})
    with pytest.raises(ValueError):
        write_offset_checkpoint(path, {("t", 0): -1})
    with pytest.raises(ValueError):
        write_offset_checkpoint(path, {("t", -1): 0})
    assert not path.exists()


def test_a_leftover_tmp_does_not_affect_reading(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("t", 0): 5})
    tmp = tmp_path / "recovery-point-offset-checkpoint.tmp"
    tmp.write_bytes(b"0\n1\nt 0 99")  # a crash mid-write
    assert read_offset_checkpoint(path) == {("t", 0): 5}
    write_offset_checkpoint(path, {("t", 0): 6})
    assert read_offset_checkpoint(path) == {("t", 0): 6}
    assert not tmp.exists()
    # Only a .tmp and no file at all: still "no checkpoint".
    other = tmp_path / "log-start-offset-checkpoint"
    (tmp_path / "log-start-offset-checkpoint.tmp").write_bytes(b"0\n1\nt 0 3\n")
    assert read_offset_checkpoint(other) == {}


# -- leader-epoch-checkpoint -----------------------------------------------------------------


def test_leader_epoch_checkpoint_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_leader_epoch_checkpoint(path, [(0, 0), (1, 100), (5, 2000)])
    assert path.read_bytes() == b"0\n3\n0 0\n1 100\n5 2000\n"
    assert read_leader_epoch_checkpoint(path) == [(0, 0), (1, 100), (5, 2000)]


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(partitions, offsets), max_size=20))
def test_leader_epoch_checkpoint_round_trip(tmp_path: Path, entries: list[tuple[int, int]]) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_leader_epoch_checkpoint(path, entries)
    assert read_leader_epoch_checkpoint(path) == entries


def test_leader_epoch_checkpoint_missing(tmp_path: Path) -> None:
    assert read_leader_epoch_checkpoint(tmp_path / "leader-epoch-checkpoint") == []


@pytest.mark.parametrize(
    "data,line",
    [
        (b"", 1),
        (b"1\n0\n", 1),
        (b"0\n", 2),
        (b"0\n2\n0 0\n", 2),
        (b"0\n1\n0 0 7\n", 3),
        (b"0\n1\n0\n", 3),
        (b"0\n1\n-1 5\n", 3),
        (b"0\n1\nx 5\n", 3),
        (b"0\n1\n0 5.0\n", 3),
    ],
)
def test_leader_epoch_checkpoint_garbage(tmp_path: Path, data: bytes, line: int) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(data)
    expect_checkpoint_error(path, line, read_leader_epoch_checkpoint)


# -- clean shutdown marker -------------------------------------------------------------------


def test_clean_shutdown_exact_bytes_and_consume(tmp_path: Path) -> None:
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    write_clean_shutdown(tmp_path)
    assert marker.read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    write_clean_shutdown(tmp_path, broker_epoch=42)
    assert marker.read_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert consume_clean_shutdown(tmp_path) is True
    assert not marker.exists()
    assert consume_clean_shutdown(tmp_path) is False


def test_clean_shutdown_missing(tmp_path: Path) -> None:
    assert consume_clean_shutdown(tmp_path) is False
    assert list(tmp_path.iterdir()) == []


def test_clean_shutdown_written_by_kafka(tmp_path: Path) -> None:
    body = {"version": 0, "brokerEpoch": 1234567, "unknown": True}
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_text(json.dumps(body, indent=2))
    assert consume_clean_shutdown(tmp_path) is True
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b'{"version":0,"brokerEpoch":',
        b"[]",
        b'{"version":0}',
        b'{"version":0,"brokerEpoch":"7"}',
        b'{"version":0,"brokerEpoch":true}',
        b"\xff\xfe",
    ],
)
def test_unreadable_clean_shutdown_is_unclean_and_deleted(tmp_path: Path, data: bytes) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(data)
    assert consume_clean_shutdown(tmp_path) is False
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


# -- .lock -----------------------------------------------------------------------------------


def _child(code: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,  # type: ignore[arg-type]
    )


TRY_LOCK = """
    import sys
    from odradek.storage.checkpoints import DirLock, LockError
    try:
        lock = DirLock.acquire(sys.argv[1])
    except LockError as exc:
        print(exc)
        sys.exit(3)
    print("locked", flush=True)
    sys.stdin.readline()   # hold the lock until the parent closes our stdin
    lock.release()
"""


def test_lock_in_process(tmp_path: Path) -> None:
    with DirLock.acquire(tmp_path) as lock:
        assert lock.held
        with pytest.raises(LockError, match=str(tmp_path)) as info:
            DirLock.acquire(tmp_path)
        assert isinstance(info.value, StorageError)
        assert info.value.log_dir == tmp_path
    assert not lock.held
    lock.release()  # idempotent
    assert (tmp_path / LOCK_FILE).exists()  # the file stays, as in Kafka
    DirLock.acquire(tmp_path).release()


def test_lock_excludes_another_process(tmp_path: Path) -> None:
    lock = DirLock.acquire(tmp_path)
    child = _child(TRY_LOCK.replace("sys.argv[1]", repr(str(tmp_path))))
    out, err = child.communicate(timeout=60)
    assert child.returncode == 3, err
    assert str(tmp_path) in out and "locked by another process" in out
    lock.release()

    child = _child(TRY_LOCK.replace("sys.argv[1]", repr(str(tmp_path))))
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline() == "locked\n"
    with pytest.raises(LockError, match=str(tmp_path)):
        DirLock.acquire(tmp_path)
    child.stdin.close()  # the child releases and exits
    assert child.wait(timeout=60) == 0
    child.stdout.close()
    child.stderr.close()  # type: ignore[union-attr]
    DirLock.acquire(tmp_path).release()


def test_lock_dies_with_its_holder(tmp_path: Path) -> None:
    child = _child(TRY_LOCK.replace("sys.argv[1]", repr(str(tmp_path))))
    assert child.stdout is not None
    assert child.stdout.readline() == "locked\n"
    with pytest.raises(LockError):
        DirLock.acquire(tmp_path)
    child.kill()
    child.communicate(timeout=60)
    with DirLock.acquire(tmp_path) as lock:
        assert lock.held
