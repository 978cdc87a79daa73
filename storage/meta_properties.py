"""Kafka's ``meta.properties``, one per log dir, byte for byte.

Layout (``MetaProperties`` via ``java.util.Properties.store(writer, "")``; UTF-8)::

    #\\n                                    an empty comment
    #Thu Jan 04 17:31:46 UTC 2024\\n        ``java.util.Date.toString()`` of the write, in UTC
    cluster.id=J8qXRwI-Qyi2G0guFTiuYw\\n    then key=value lines sorted by key:
    directory.id=Lrwnmu6-Bk6Bi0YHBtjudA\\n  a Kafka Uuid (:mod:`odradek.storage.uuids`)
    node.id=1\\n
    version=1\\n                            KRaft; version 0 (ZooKeeper) is not supported

Reading follows ``java.util.Properties.load``: ``#`` and ``!`` comments, blank lines, leading
whitespace, ``=``, ``:`` or whitespace between key and value, backslash line continuations
and escapes (``\\t \\n \\r \\f \\uXXXX``); unknown keys are ignored.

Invariants:
- The reader is strict (the conventions of :mod:`odradek.storage.checkpoints`): a missing or
malformed
  required key, a version other than 1, a ``node.id`` outside ``[0, 2**31 - 1]``, an empty
  ``cluster.id`` or a ``directory.id`` that is not a uuid raises CheckpointError naming the
  file, the line and the problem. A missing file is None; an empty one is an error.
- The writer validates its input first and never writes a file the reader would reject; values
  are escaped as ``Properties.saveConvert`` does (a leading space, ``\\t \\n \\r \\f``,
  ``= : # !`` and backslash), so they read back unchanged.

Crash safety:
1. The writer builds the whole file in memory, then hands it to
   ``odradek.storage.atomic.write_atomically`` (``.tmp``, fsync, rename, fsync dir): a crash leaves
   the old or the new file, never a mix, and a stale ``.tmp`` is never read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from odradek.storage.atomic import write_atomically
from odradek.storage.checkpoints import INT32_MAX, CheckpointError, parse_int, read_lines
from odradek.storage.uuids import uuid_bytes, uuid_text

__all__ = ["META_PROPERTIES", "MetaProperties", "read_meta_properties", "write_meta_properties"]

META_PROPERTIES = "meta.properties"


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
    parse_int(str(meta.node_id), "node.id", 0, INT32_MAX)
    _non_empty(meta.cluster_id)
    uuid_bytes(meta.directory_id)


def read_meta_properties(path: Path) -> MetaProperties | None:
    """The ``meta.properties`` at ``path``; None if it does not exist."""
    path = Path(path)
    lines = read_lines(path)
    if lines is None:
        return None
    props = _parse_properties(path, lines)

    def value(key: str) -> tuple[int, str]:
        if key not in props:
            raise CheckpointError(path, None, f"required key {key!r} is missing")
        return props[key]

    fields: dict[str, object] = {}
    for key, name, parse in (
        ("version", "version", lambda v: parse_int(v, "version", 1, 1)),
        ("node.id", "node_id", lambda v: parse_int(v, "node.id", 0, INT32_MAX)),
        ("cluster.id", "cluster_id", _non_empty),
        ("directory.id", "directory_id", lambda v: uuid_text(uuid_bytes(v))),
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
