"""Kafka's small per-log-dir and per-partition state files, byte for byte, plus the dir lock.

Layouts (text is UTF-8, lines end in ``\\n``; readers also take ``\\r\\n`` as Java does):

- Offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``; Kafka's
  ``OffsetCheckpointFile``)::

      0\\n                          version
      2\\n                          entry count
      orders 0 1234\\n              <topic> <partition> <offset>, one space apart
      orders 1 987\\n

- ``leader-epoch-checkpoint`` (``LeaderEpochCheckpointFile``): the same frame, entries
  ``<epoch> <start offset>``.
- ``meta.properties`` (``MetaProperties`` via ``java.util.Properties.store(writer, "")``): a
  ``#`` line, a ``#<java.util.Date>`` line, then ``key=value`` lines sorted by key:
  ``cluster.id``, ``directory.id``, ``node.id``, ``version=1``.
- ``partition.metadata`` (``PartitionMetadata.encode``): ``version: 0\\ntopic_id: <uuid>``, no
  trailing newline.
- ``.kafka_cleanshutdown`` (``CleanShutdownFileHandler``): ``{"version":0,"brokerEpoch":N}``.
- ``.lock``: an empty file, held with ``flock(LOCK_EX | LOCK_NB)`` while a broker owns the dir.

A uuid (``Uuid.toString``) is 16 bytes in URL-safe base64 without padding: 22 characters.

Invariants:
- Readers are strict: any deviation from the layout (wrong version, entry count that does not
  match, non-integer or out-of-range field, illegal topic name, duplicate partition, extra
  field, truncated line) raises CheckpointError naming the file, the line and the problem. A
  missing file is not an error (``{}``, ``[]`` or ``None``); an empty one is (Kafka reads an
  empty checkpoint as no entries, but odradek never writes one: it means lost data).
  ``partition.metadata`` is read as leniently as Kafka reads it (any version >= 0, later lines
  ignored) so a newer Kafka's file still yields its topic id.
- Writers validate their input first and never write a file their reader would reject.
- Offset checkpoints are written sorted by (topic, partition), so equal input gives equal bytes.

Crash safety:
1. Every writer builds the whole file in memory, then hands it to
   ``storage.atomic.write_atomically`` (``.tmp``, fsync, rename, fsync dir): a crash leaves the
   old or the new file, never a mix, and a stale ``.tmp`` is never read.
2. ``consume_clean_shutdown`` reads the marker, deletes it and fsyncs the dir *before* returning,
   so once the broker starts mutating logs a crash can never be mistaken for a clean shutdown.
   A marker that does not parse counts as an unclean shutdown (a full recovery is the safe side).
3. The ``.lock`` flock is released by the kernel when its holder dies, so a crash never leaves a
   stale lock behind. (Java's ``FileChannel.tryLock`` takes an fcntl record lock instead, so this
   lock excludes other odradek processes, not a real Kafka broker.)
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from storage.atomic import fsync_directory, write_atomically
from storage.errors import InvalidTopicError, StorageError
from storage.topics import validate_topic_name

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "META_PROPERTIES",
    "PARTITION_METADATA",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CheckpointError",
    "DirLock",
    "LockError",
    "MetaProperties",
    "consume_clean_shutdown",
    "new_uuid",
    "read_leader_epoch_checkpoint",
    "read_meta_properties",
    "read_offset_checkpoint",
    "read_partition_metadata",
    "uuid_bytes",
    "write_clean_shutdown",
    "write_leader_epoch_checkpoint",
    "write_meta_properties",
    "write_offset_checkpoint",
    "write_partition_metadata",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"

_CHECKPOINT_VERSION = 0
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_INT = re.compile(r"-?[0-9]+")
_LINE_END = re.compile(r"\r\n|\r|\n")
_FIELD_SEP = re.compile(r"[ \t\x0b\f]+")  # Java's \s minus the line terminators
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")
_RESERVED_UUIDS = (bytes(16), bytes(15) + b"\x01")  # Uuid.ZERO_UUID, Uuid.ONE_UUID

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


# -- helpers ---------------------------------------------------------------------------------


def _int(text: str, what: str, low: int, high: int) -> int:
    """Parse a base-10 integer in [low, high] or raise ValueError describing the problem."""
    if not _INT.fullmatch(text):
        raise ValueError(f"{what} {text!r} is not an integer")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is outside [{low}, {high}]")
    return value


def _read_lines(path: Path) -> list[str] | None:
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


def uuid_bytes(text: str) -> bytes:
    """The 16 bytes of a Kafka Uuid string (``Uuid.fromString``); ValueError if it is not one."""
    if not _UUID_TEXT.fullmatch(text):
        raise ValueError(f"{text!r} is not a base64 uuid (22 URL-safe base64 characters)")
    return base64.urlsafe_b64decode(text[:22] + "==")


def _uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def new_uuid() -> str:
    """A random Kafka Uuid string, as ``Uuid.randomUuid().toString()``: a version-4 uuid in
    unpadded URL-safe base64, never a reserved uuid and never starting with ``-``."""
    while True:
        raw = uuid.uuid4().bytes
        text = _uuid_text(raw)
        if raw not in _RESERVED_UUIDS and not text.startswith("-"):
            return text


# -- offset and leader-epoch checkpoints -----------------------------------------------------


def _read_checkpoint(path: Path, parse: Callable[[list[str]], T], layout: str) -> list[T] | None:
    lines = _read_lines(path)
    if lines is None:
        return None
    if not lines:
        raise CheckpointError(path, 1, "the file is empty, expected the version line")
    try:
        version = _int(lines[0], "version", -(2**31), _INT32_MAX)
    except ValueError as exc:
        raise CheckpointError(path, 1, str(exc)) from None
    if version != _CHECKPOINT_VERSION:
        raise CheckpointError(path, 1, f"unsupported version {version}, expected 0")
    if len(lines) < 2:
        raise CheckpointError(path, 2, "truncated: the entry count line is missing")
    try:
        count = _int(lines[1], "entry count", 0, _INT32_MAX)
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
        _int(fields[1], "partition", 0, _INT32_MAX),
        _int(fields[2], "offset", 0, _INT64_MAX),
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
        _int(str(partition), "partition", 0, _INT32_MAX)
        _int(str(offset), "offset", 0, _INT64_MAX)
        lines.append(f"{topic} {partition} {offset}")
    write_atomically(Path(path), _encode_checkpoint(lines))


def _epoch_entry(fields: list[str]) -> tuple[int, int]:
    if len(fields) != 2:
        raise ValueError(f"{len(fields)} fields instead of 2")
    return _int(fields[0], "epoch", 0, _INT32_MAX), _int(fields[1], "start offset", 0, _INT64_MAX)


def read_leader_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """``[(epoch, start offset), ...]`` in file order; ``[]`` if the file is missing."""
    return _read_checkpoint(Path(path), _epoch_entry, "<epoch> <start offset>") or []


def write_leader_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    """Atomically replace a leader-epoch checkpoint with ``entries`` in the given order."""
    lines = [" ".join(map(str, _epoch_entry([str(e), str(o)]))) for e, o in entries]
    write_atomically(Path(path), _encode_checkpoint(lines))


# -- meta.properties -------------------------------------------------------------------------


@dataclass(frozen=True)
class MetaProperties:
    """The KRaft (version 1) ``meta.properties`` of one log dir."""

    node_id: int
    cluster_id: str
    directory_id: str
    version: int = 1


_PROPS_SPACE = " \t\f"
_PROPS_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _continues(line: str) -> bool:
    """A logical line continues when it ends in an odd number of backslashes."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(raw: str) -> str:
    """Undo ``Properties`` escapes: ``\\t \\n \\r \\f \\uXXXX``, and ``\\x`` is ``x``."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        char = raw[i + 1 : i + 2]  # "" for a dangling backslash, which Java drops
        if char == "u":
            digits = raw[i + 2 : i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ValueError(r"malformed \uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_PROPS_ESCAPES.get(char, char))
            i += 2
    return "".join(out)


def _parse_properties(path: Path, lines: list[str]) -> dict[str, tuple[int, str]]:
    """``{key: (line number, value)}`` with ``java.util.Properties.load`` rules."""
    props: dict[str, tuple[int, str]] = {}
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(_PROPS_SPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_PROPS_SPACE)
            i += 1
        end = 0
        while end < len(line) and line[end] not in "=:" + _PROPS_SPACE:
            end += 2 if line[end] == "\\" else 1
        rest = line[end:].lstrip(_PROPS_SPACE)
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(_PROPS_SPACE)
        try:
            props[_unescape(line[:end])] = (number, _unescape(rest))
        except ValueError as exc:
            raise CheckpointError(path, number, str(exc)) from None
    return props


def _escape(value: str) -> str:
    """``Properties.saveConvert`` for a value, without unicode escapes (Kafka stores through a
    Writer): a leading space, ``\\t \\n \\r \\f``, ``= : # !`` and backslash are escaped."""
    out = []
    for i, char in enumerate(value):
        if char == " ":
            out.append("\\ " if i == 0 else " ")
        elif char in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(char)])
        elif char in "=:#!\\":
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def _java_date(now: datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``Thu Jan 04 17:31:46 UTC 2024``."""
    t = now.astimezone(UTC)
    return f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t:%d %H:%M:%S} UTC {t.year}"


def _non_empty(text: str) -> str:
    if not text:
        raise ValueError("the value is empty")
    return text


def _check_meta(meta: MetaProperties) -> None:
    if meta.version != 1:
        raise ValueError(f"meta.properties version {meta.version} is not supported, only 1")
    _int(str(meta.node_id), "node.id", 0, _INT32_MAX)
    _non_empty(meta.cluster_id)
    uuid_bytes(meta.directory_id)


def read_meta_properties(path: Path) -> MetaProperties | None:
    """The ``meta.properties`` at ``path``; None if it does not exist."""
    path = Path(path)
    lines = _read_lines(path)
    if lines is None:
        return None
    props = _parse_properties(path, lines)

    def value(key: str) -> tuple[int, str]:
        if key not in props:
            raise CheckpointError(path, None, f"required key {key!r} is missing")
        return props[key]

    fields: dict[str, object] = {}
    for key, name, parse in (
        ("version", "version", lambda v: _int(v, "version", 1, 1)),
        ("node.id", "node_id", lambda v: _int(v, "node.id", 0, _INT32_MAX)),
        ("cluster.id", "cluster_id", _non_empty),
        ("directory.id", "directory_id", lambda v: _uuid_text(uuid_bytes(v))),
    ):
        number, text = value(key)
        try:
            fields[name] = parse(text)
        except ValueError as exc:
            raise CheckpointError(path, number, f"bad {key}: {exc}") from None
    return MetaProperties(**fields)  # type: ignore[arg-type]


def write_meta_properties(path: Path, meta: MetaProperties, *, now: datetime | None = None) -> None:
    """Atomically write ``meta`` as Kafka does; ``now`` (default: the current time) only feeds the
    date comment line that ``java.util.Properties.store`` writes."""
    _check_meta(meta)
    props = {
        "cluster.id": meta.cluster_id,
        "directory.id": meta.directory_id,
        "node.id": str(meta.node_id),
        "version": str(meta.version),
    }
    date = _java_date(now if now is not None else datetime.now(UTC))
    lines = ["#", f"#{date}"]
    lines += [f"{key}={_escape(value)}" for key, value in sorted(props.items())]
    write_atomically(Path(path), "".join(f"{line}\n" for line in lines).encode())


# -- partition.metadata ----------------------------------------------------------------------


def read_partition_metadata(path: Path) -> str | None:
    """The topic id stored in ``partition.metadata``; None if the file does not exist."""
    path = Path(path)
    lines = _read_lines(path)
    if lines is None:
        return None
    values = []
    for number, key in ((1, "version"), (2, "topic_id")):
        line = lines[number - 1] if len(lines) >= number else None
        parts = re.split(r":[ \t\x0b\f]+", line, maxsplit=1) if line is not None else []
        if len(parts) != 2 or parts[0] != key:
            raise CheckpointError(path, number, f"expected '{key}: <value>', got {line!r}")
        values.append(parts[1])
    try:
        _int(values[0], "version", 0, _INT32_MAX)  # Kafka accepts any version >= 0
    except ValueError as exc:
        raise CheckpointError(path, 1, str(exc)) from None
    try:
        raw = uuid_bytes(values[1])
    except ValueError as exc:
        raise CheckpointError(path, 2, str(exc)) from None
    if raw == bytes(16):
        raise CheckpointError(path, 2, "the topic id is the zero uuid")
    return _uuid_text(raw)


def write_partition_metadata(path: Path, topic_id: str) -> None:
    """Atomically write ``partition.metadata`` for ``topic_id`` (a Kafka Uuid string)."""
    if uuid_bytes(topic_id) == bytes(16):
        raise ValueError("the topic id must not be the zero uuid")
    write_atomically(Path(path), f"version: 0\ntopic_id: {topic_id}".encode())


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
