"""Kafka's offset and leader-epoch checkpoints, the clean-shutdown marker and the dir lock.

Also the conventions every small state file shares (:mod:`odradek.storage.meta_properties` and
:mod:`odradek.storage.partition_metadata` build on them): text is UTF-8, lines end in ``\\n``;
readers also take ``\\r\\n`` as Java does; a file that exists but does not parse is a
:class:`CheckpointError` naming the file, the line and the problem.

Layouts:

- Offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``; Kafka's
  ``OffsetCheckpointFile``)::

      0\\n                          version
      2\\n                          entry count
      orders 0 1234\\n              <topic> <partition> <offset>, one space apart
      orders 1 987\\n

- ``leader-epoch-checkpoint`` (``LeaderEpochCheckpointFile``): the same frame, entries
  ``<epoch> <start offset>``.
- ``.kafka_cleanshutdown`` (``CleanShutdownFileHandler``): ``{"version":0,"brokerEpoch":N}``.
- ``.lock``: an empty file, held with ``flock(LOCK_EX | LOCK_NB)`` while a broker owns the dir.

Invariants:
- Readers are strict: any deviation from the layout (wrong version, entry count that does not
  match, non-integer or out-of-range field, illegal topic name, duplicate partition, extra
  field, truncated line) raises CheckpointError naming the file, the line and the problem. A
  missing file is not an error (``{}``, ``[]`` or ``None``); an empty one is (Kafka reads an
  empty checkpoint as no entries, but odradek never writes one: it means lost data).
- Writers validate their input first and never write a file their reader would reject.
- Offset checkpoints are written sorted by (topic, partition), so equal input gives equal bytes.

Crash safety:
1. Every writer builds the whole file in memory, then hands it to
   ``odradek.storage.atomic.write_atomically`` (``.tmp``, fsync, rename, fsync dir): a crash leaves
   the old or the new file, never a mix, and a stale ``.tmp`` is never read.
2. ``consume_clean_shutdown`` reads the marker, deletes it and fsyncs the dir *before* returning,
   so once the broker starts mutating logs a crash can never be mistaken for a clean shutdown.
   A marker that does not parse counts as an unclean shutdown (a full recovery is the safe side).
3. The ``.lock`` flock is released by the kernel when its holder dies, so a crash never leaves a
   stale lock behind. (Java's ``FileChannel.tryLock`` takes an fcntl record lock instead, so this
   lock excludes other odradek processes, not a real Kafka broker.)
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from odradek.storage.atomic import fsync_directory, write_atomically
from odradek.storage.errors import InvalidTopicError, StorageError
from odradek.storage.topics import validate_topic_name

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CheckpointError",
    "DirLock",
    "LockError",
    "consume_clean_shutdown",
    "read_leader_epoch_checkpoint",
    "read_offset_checkpoint",
    "write_clean_shutdown",
    "write_leader_epoch_checkpoint",
    "write_offset_checkpoint",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_CHECKPOINT_VERSION = 0
_INT = re.compile(r"-?[0-9]+")
_LINE_END = re.compile(r"\r\n|\r|\n")
_FIELD_SEP = re.compile(r"[ \t\x0b\f]+")  # Java's \s minus the line terminators

T = TypeVar("T")


class CheckpointError(StorageError):
    """A state file that exists but does not parse: names the file, the line and the problem."""

    def __init__(self, path: Path, line: int | None, problem: str) -> None:
        where = f"{path}, line {line}" if line is not None else str(path)
        super().__init__(f"malformed {Path(path).name} file {where}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class LockError(StorageError):
    """Another process holds ``<log.dir>/.lock``."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(
            f"log dir {log_dir} is locked by another process ({Path(log_dir) / LOCK_FILE}); "
            "is another broker running on it?"
        )
        self.log_dir = log_dir


# -- shared by every state file --------------------------------------------------------------


def parse_int(text: str, what: str, low: int, high: int) -> int:
    """Parse a base-10 integer in [low, high] or raise ValueError describing the problem."""
    if not _INT.fullmatch(text):
        raise ValueError(f"{what} {text!r} is not an integer")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is outside [{low}, {high}]")
    return value


def read_lines(path: Path) -> list[str] | None:
    """The file's lines without terminators, or None if it does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CheckpointError(path, line, "not valid UTF-8") from None
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()  # the terminator of the last line, or an empty file
    return lines


# -- offset and leader-epoch checkpoints -----------------------------------------------------


def _read_checkpoint(path: Path, parse: Callable[[list[str]], T], layout: str) -> list[T] | None:
    lines = read_lines(path)
    if lines is None:
        return None
    if not lines:
        raise CheckpointError(path, 1, "the file is empty, expected the version line")
    try:
        version = parse_int(lines[0], "version", -(2**31), INT32_MAX)
    except ValueError as exc:
        raise CheckpointError(path, 1, str(exc)) from None
    if version != _CHECKPOINT_VERSION:
        raise CheckpointError(path, 1, f"unsupported version {version}, expected 0")
    if len(lines) < 2:
        raise CheckpointError(path, 2, "truncated: the entry count line is missing")
    try:
        count = parse_int(lines[1], "entry count", 0, INT32_MAX)
    except ValueError as exc:
        raise CheckpointError(path, 2, str(exc)) from None
    entries: list[T] = []
    for number, line in enumerate(lines[2:], start=3):
        fields = _FIELD_SEP.split(line)
        try:
            entries.append(parse(fields))
        except (ValueError, InvalidTopicError) as exc:
            raise CheckpointError(
                path, number, f"expected {layout!r}, got {line!r}: {exc}"
            ) from None
    if len(entries) != count:
        raise CheckpointError(path, 2, f"the header says {count} entries, found {len(entries)}")
    return entries


def _encode_checkpoint(lines: list[str]) -> bytes:
    return "".join(
        f"{line}\n" for line in [str(_CHECKPOINT_VERSION), str(len(lines)), *lines]
    ).encode()


def _offset_entry(fields: list[str]) -> tuple[str, int, int]:
    if len(fields) != 3:
        raise ValueError(f"{len(fields)} fields instead of 3")
    topic = validate_topic_name(fields[0])
    return (
        topic,
        parse_int(fields[1], "partition", 0, INT32_MAX),
        parse_int(fields[2], "offset", 0, INT64_MAX),
    )


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` from an offset checkpoint; ``{}`` if the file is missing."""
    path = Path(path)
    entries = _read_checkpoint(path, _offset_entry, "<topic> <partition> <offset>")
    offsets: dict[tuple[str, int], int] = {}
    for number, (topic, partition, offset) in enumerate(entries or [], start=3):
        if (topic, partition) in offsets:
            raise CheckpointError(path, number, f"duplicate entry for {topic}-{partition}")
        offsets[topic, partition] = offset
    return offsets


def write_offset_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    """Atomically replace an offset checkpoint; entries sorted by (topic, partition)."""
    lines = []
    for (topic, partition), offset in sorted(offsets.items()):
        validate_topic_name(topic)
        parse_int(str(partition), "partition", 0, INT32_MAX)
        parse_int(str(offset), "offset", 0, INT64_MAX)
        lines.append(f"{topic} {partition} {offset}")
    write_atomically(Path(path), _encode_checkpoint(lines))


def _epoch_entry(fields: list[str]) -> tuple[int, int]:
    if len(fields) != 2:
        raise ValueError(f"{len(fields)} fields instead of 2")
    return parse_int(fields[0], "epoch", 0, INT32_MAX), parse_int(
        fields[1], "start offset", 0, INT64_MAX
    )


def read_leader_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """``[(epoch, start offset), ...]`` in file order; ``[]`` if the file is missing."""
    return _read_checkpoint(Path(path), _epoch_entry, "<epoch> <start offset>") or []


def write_leader_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    """Atomically replace a leader-epoch checkpoint with ``entries`` in the given order."""
    lines = [" ".join(map(str, _epoch_entry([str(e), str(o)]))) for e, o in entries]
    write_atomically(Path(path), _encode_checkpoint(lines))


# -- clean shutdown marker -------------------------------------------------------------------


def write_clean_shutdown(log_dir: Path, broker_epoch: int = -1) -> None:
    """Atomically write ``<log_dir>/.kafka_cleanshutdown``, the last step of a clean shutdown."""
    body = json.dumps({"version": 0, "brokerEpoch": int(broker_epoch)}, separators=(",", ":"))
    write_atomically(Path(log_dir) / CLEAN_SHUTDOWN_FILE, body.encode())


def _is_valid_marker(data: bytes) -> bool:
    try:
        content = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(content, dict) and all(
        type(content.get(key)) is int for key in ("version", "brokerEpoch")
    )


def consume_clean_shutdown(log_dir: Path) -> bool:
    """True if ``log_dir`` was shut down cleanly. The marker is deleted either way (and the
    deletion made durable), so the next start after a crash sees an unclean shutdown."""
    marker = Path(log_dir) / CLEAN_SHUTDOWN_FILE
    try:
        data = marker.read_bytes()
    except FileNotFoundError:
        return False
    marker.unlink(missing_ok=True)
    fsync_directory(Path(log_dir))
    return _is_valid_marker(data)


# -- .lock -----------------------------------------------------------------------------------


class DirLock:
    """An exclusive ``flock`` on ``<log.dir>/.lock``, held for the broker's lifetime."""

    def __init__(self, log_dir: Path, fd: int) -> None:
        self.log_dir = log_dir
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, log_dir: Path) -> DirLock:
        """Lock ``log_dir`` without waiting; LockError if another holder has it."""
        log_dir = Path(log_dir)
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockError(log_dir) from None
        except BaseException:
            os.close(fd)
            raise
        return cls(log_dir, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock; safe to call more than once. The ``.lock`` file stays, as in Kafka."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> DirLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"DirLock({str(self.log_dir)!r}, held={self.held})"
