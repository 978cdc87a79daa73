"""storage.checkpoints: Kafka's state files byte for byte, strict readers, the dir lock."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOCK_FILE,
    CheckpointError,
    DirLock,
    LockError,
    MetaProperties,
    consume_clean_shutdown,
    new_uuid,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    uuid_bytes,
    write_clean_shutdown,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)
from storage.errors import InvalidTopicError, StorageError

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_ID = "J8qXRwI-Qyi2G0guFTiuYw"
DIRECTORY_ID = "Lrwnmu6-Bk6Bi0YHBtjudA"
TOPIC_ID = "oPbqxUvkSMmsDDmB7Rnxpw"
NOW = datetime(2024, 1, 4, 17, 31, 46, tzinfo=UTC)

topics = st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True).filter(
    lambda t: t not in (".", "..")
)
partitions = st.integers(0, 2**31 - 1)
offsets = st.integers(0, 2**63 - 1)


def _expect_error(path: Path, line: int | None, read: object) -> CheckpointError:
    with pytest.raises(CheckpointError) as info:
        read(path)  # type: ignore[operator]
    error = info.value
    assert isinstance(error, StorageError)
    assert str(path) in str(error)
    assert error.line == line
    if line is not None:
        assert f"line {line}" in str(error)
    return error


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
    _expect_error(path, line, read_offset_checkpoint)


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
    _expect_error(path, line, read_leader_epoch_checkpoint)


# -- meta.properties -------------------------------------------------------------------------


def test_meta_properties_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    meta = MetaProperties(node_id=1, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID)
    write_meta_properties(path, meta, now=NOW)
    assert path.read_bytes() == (
        b"#\n"
        b"#Thu Jan 04 17:31:46 UTC 2024\n"
        b"cluster.id=J8qXRwI-Qyi2G0guFTiuYw\n"
        b"directory.id=Lrwnmu6-Bk6Bi0YHBtjudA\n"
        b"node.id=1\n"
        b"version=1\n"
    )
    assert read_meta_properties(path) == meta


def test_meta_properties_date_comment_is_in_utc(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    meta = MetaProperties(node_id=0, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID)
    write_meta_properties(
        path, meta, now=datetime(2023, 12, 31, 23, 5, 9, tzinfo=timezone(timedelta(hours=-3)))
    )
    assert path.read_text().splitlines()[1] == "#Mon Jan 01 02:05:09 UTC 2024"
    write_meta_properties(path, meta)  # the real clock
    assert path.read_text().splitlines()[1].startswith("#")
    assert read_meta_properties(path) == meta


def test_meta_properties_reads_java_properties_syntax(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text(
        "#\n"
        "#Fri Jun 07 06:32:12 UTC 2024\n"
        "! another comment style\n"
        "\n"
        "  version = 1\n"
        "node.id:3\n"
        "cluster.id=J8qXRwI\\\n"
        "    -Qyi2G0guFTiuYw\n"
        "directory.id  Lrwnmu6-Bk6Bi0YHBtjudA\n"
        "some.future.key=ignored\n"
    )
    assert read_meta_properties(path) == MetaProperties(
        node_id=3, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID
    )


def test_meta_properties_escapes_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    odd = " lead=a:b #!\\ tail\tx\u00e9"
    meta = MetaProperties(node_id=2**31 - 1, cluster_id=odd, directory_id=new_uuid())
    write_meta_properties(path, meta, now=NOW)
    assert "cluster.id=\\ lead\\=a\\:b \\#\\!\\\\ tail\\tx\u00e9\n" in path.read_text()
    assert read_meta_properties(path) == meta


def test_meta_properties_missing(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path / "meta.properties") is None


GOOD_META = [
    f"cluster.id={CLUSTER_ID}",
    f"directory.id={DIRECTORY_ID}",
    "node.id=1",
    "version=1",
]


@pytest.mark.parametrize(
    "replace,line,problem",
    [
        ({2: None}, None, "'node.id' is missing"),
        ({3: None}, None, "'version' is missing"),
        ({0: None}, None, "'cluster.id' is missing"),
        ({1: None}, None, "'directory.id' is missing"),
        ({3: None, 2: "broker.id=1"}, None, "'version' is missing"),
        ({2: "node.id=one"}, 5, "node.id"),
        ({2: "node.id=-1"}, 5, "node.id"),
        ({3: "version=0"}, 6, "version"),
        ({3: "version=2"}, 6, "version"),
        ({0: "cluster.id="}, 3, "cluster.id"),
        ({1: "directory.id=not-a-uuid"}, 4, "directory.id"),
        ({1: "directory.id=Lrwnmu6-Bk6Bi0YHBtjud\\u00"}, 4, "escape"),
    ],
)
def test_meta_properties_garbage(
    tmp_path: Path, replace: dict[int, str | None], line: int | None, problem: str
) -> None:
    lines = [replace.get(i, text) for i, text in enumerate(GOOD_META)]
    path = tmp_path / "meta.properties"
    path.write_text("#\n#Thu Jan 04 17:31:46 UTC 2024\n" + "".join(f"{x}\n" for x in lines if x))
    error = _expect_error(path, line, read_meta_properties)
    assert problem in str(error)


def test_meta_properties_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_bytes(b"")
    _expect_error(path, None, read_meta_properties)


def test_meta_properties_writer_rejects_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    for bad in (
        MetaProperties(node_id=-1, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID),
        MetaProperties(node_id=1, cluster_id="", directory_id=DIRECTORY_ID),
        MetaProperties(node_id=1, cluster_id=CLUSTER_ID, directory_id="nope"),
        MetaProperties(node_id=1, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID, version=0),
    ):
        with pytest.raises(ValueError):
            write_meta_properties(path, bad)
    assert not path.exists()


# -- partition.metadata ----------------------------------------------------------------------


def test_partition_metadata_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    write_partition_metadata(path, TOPIC_ID)
    # PartitionMetadata.encode(): "version: " + version + "\ntopic_id: " + topicId, no final \n.
    assert path.read_bytes() == b"version: 0\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw"
    assert read_partition_metadata(path) == TOPIC_ID


def test_partition_metadata_lenient_where_kafka_is(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    path.write_bytes(b"version: 0\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw\n")
    assert read_partition_metadata(path) == TOPIC_ID
    path.write_bytes(b"version: 1\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw==\nfuture: field\n")
    assert read_partition_metadata(path) == TOPIC_ID


def test_partition_metadata_missing(tmp_path: Path) -> None:
    assert read_partition_metadata(tmp_path / "partition.metadata") is None


@pytest.mark.parametrize(
    "data,line",
    [
        (b"", 1),
        (b"version: 0\n", 2),
        (b"version: 0", 2),
        (b"version:0\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw", 1),
        (b"version: x\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw", 1),
        (b"version: -1\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw", 1),
        (b"topic_id: oPbqxUvkSMmsDDmB7Rnxpw\nversion: 0", 1),
        (b"version: 0\ntopicid: oPbqxUvkSMmsDDmB7Rnxpw", 2),
        (b"version: 0\ntopic_id: oPbqxUvkSMmsDDmB7Rnx", 2),
        (b"version: 0\ntopic_id: oPbqxUvkSMmsDDmB7Rnxp+", 2),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2),
    ],
)
def test_partition_metadata_garbage(tmp_path: Path, data: bytes, line: int) -> None:
    path = tmp_path / "partition.metadata"
    path.write_bytes(data)
    _expect_error(path, line, read_partition_metadata)


def test_partition_metadata_writer_rejects_bad_ids(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    for bad in ("AAAAAAAAAAAAAAAAAAAAAA", "short", "oPbqxUvkSMmsDDmB7Rnxp/"):
        with pytest.raises(ValueError):
            write_partition_metadata(path, bad)
    assert not path.exists()


# -- uuids -----------------------------------------------------------------------------------


def test_uuid_bytes_matches_kafka() -> None:
    assert uuid_bytes("AAAAAAAAAAAAAAAAAAAAAA") == bytes(16)  # Uuid.ZERO_UUID
    assert uuid_bytes("AAAAAAAAAAAAAAAAAAAAAQ") == bytes(15) + b"\x01"  # Uuid.METADATA_TOPIC_ID
    assert uuid_bytes("AAAAAAAAAAAAAAAAAAAAAQ==") == bytes(15) + b"\x01"
    for bad in ("", "AAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAA/"):
        with pytest.raises(ValueError):
            uuid_bytes(bad)


def test_new_uuid_is_a_kafka_random_uuid() -> None:
    seen = set()
    for _ in range(500):
        text = new_uuid()
        assert len(text) == 22
        assert not text.startswith("-")
        raw = base64.urlsafe_b64decode(text + "==")
        assert base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == text
        assert uuid.UUID(bytes=raw).version == 4  # java.util.UUID.randomUUID
        seen.add(text)
    assert len(seen) == 500


def test_new_uuid_skips_reserved_and_dash_leading(monkeypatch: pytest.MonkeyPatch) -> None:
    dash = uuid.UUID(bytes=b"\xf8" + bytes(15))
    good = uuid.UUID(bytes=b"\x10" + bytes(15))
    queue = [uuid.UUID(int=0), uuid.UUID(int=1), dash, good]
    monkeypatch.setattr(uuid, "uuid4", lambda: queue.pop(0))
    assert base64.urlsafe_b64encode(dash.bytes).startswith(b"-")
    assert new_uuid() == base64.urlsafe_b64encode(good.bytes).rstrip(b"=").decode()
    assert queue == []


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
    from storage.checkpoints import DirLock, LockError
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
