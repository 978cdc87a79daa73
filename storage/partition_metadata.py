"""Kafka's ``partition.metadata``, one per partition directory, byte for byte.

Layout (``PartitionMetadata.encode``; UTF-8)::

    version: 0\\n
    topic_id: oPbqxUvkSMmsDDmB7Rnxpw      a Kafka Uuid (:mod:`odradek.storage.uuids`), no trailing
    \\n

Invariants:
- The reader is as lenient as Kafka's: any version >= 0, a trailing newline, a padded uuid and
  later lines are accepted, so a newer Kafka's file still yields its topic id. Anything else
  (a missing or misspelled key, no space after the colon, a bad version, a bad or zero uuid)
  raises CheckpointError naming the file, the line and the problem (the conventions of
  :mod:`odradek.storage.checkpoints`). A missing file is None.
- The writer never writes the zero uuid nor a string that is not a uuid.

Crash safety:
1. The writer builds the whole file in memory, then hands it to
   ``odradek.storage.atomic.write_atomically`` (``.tmp``, fsync, rename, fsync dir): a crash leaves
   the old or the new file, never a mix, and a stale ``.tmp`` is never read.
"""

from __future__ import annotations

import re
from pathlib import Path

from odradek.storage.atomic import write_atomically
from odradek.storage.checkpoints import INT32_MAX, CheckpointError, parse_int, read_lines
from odradek.storage.uuids import uuid_bytes, uuid_text

__all__ = ["PARTITION_METADATA", "read_partition_metadata", "write_partition_metadata"]

PARTITION_METADATA = "partition.metadata"


def read_partition_metadata(path: Path) -> str | None:
    """The topic id stored in ``partition.metadata``; None if the file does not exist."""
    path = Path(path)
    lines = read_lines(path)
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
        parse_int(values[0], "version", 0, INT32_MAX)  # Kafka accepts any version >= 0
    except ValueError as exc:
        raise CheckpointError(path, 1, str(exc)) from None
    try:
        raw = uuid_bytes(values[1])
    except ValueError as exc:
        raise CheckpointError(path, 2, str(exc)) from None
    if raw == bytes(16):
        raise CheckpointError(path, 2, "the topic id is the zero uuid")
    return uuid_text(raw)


def write_partition_metadata(path: Path, topic_id: str) -> None:
    """Atomically write ``partition.metadata`` for ``topic_id`` (a Kafka Uuid string)."""
    if uuid_bytes(topic_id) == bytes(16):
        raise ValueError("the topic id must not be the zero uuid")
    write_atomically(Path(path), f"version: 0\ntopic_id: {topic_id}".encode())
