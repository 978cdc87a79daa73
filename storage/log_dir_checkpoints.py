"""The four offset checkpoints of one ``log.dirs`` root: what each records, read and written.

Layout: each is an offset checkpoint file (:mod:`odradek.storage.checkpoints` gives the bytes)
directly in the root, one entry per partition of that root::

    recovery-point-offset-checkpoint     every offset below it is fsynced (Log.recovery_point)
    log-start-offset-checkpoint          the log start offset (DeleteRecords, retention)
    replication-offset-checkpoint        the high watermark (= the log end offset on one node)
    cleaner-offset-checkpoint            compacted partitions only: the cleaner's first dirty
                                         offset

Invariants:
- The checkpoints are derived from the logs and only ever lag them: a stale recovery point means
  more re-validation at the next start, a stale log start offset is re-applied by the next
  DeleteRecords or retention pass, a stale first dirty offset makes the cleaner redo work.
- A damaged partition (offline, :class:`LogCorruptedError`) keeps the entries read for it at
  start-up: a round writes them back unchanged, so repairing it later loses nothing.
- A checkpoint that does not parse is logged and read as empty: the safe side, a full recovery.

Crash safety: each file is replaced atomically (:mod:`odradek.storage.atomic`), one after the
other; a crash between two leaves some new and some old, each of them a valid lag.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from odradek.storage.checkpoints import (
    CheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from odradek.storage.log import Log

__all__ = [
    "CHECKPOINT_NAMES",
    "CLEANER_OFFSET_CHECKPOINT",
    "HIGH_WATERMARK_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "read_log_dir_checkpoints",
    "write_log_dir_checkpoints",
]

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CHECKPOINT_NAMES = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
    HIGH_WATERMARK_CHECKPOINT,
)

TopicPartition = tuple[str, int]


def read_log_dir_checkpoints(log_dir: Path) -> dict[str, dict[TopicPartition, int]]:
    """Every checkpoint of ``log_dir`` by file name; a missing or corrupt one is empty.

    Raises ``OSError`` if a file cannot be read.
    """
    return {name: _read_checkpoint_or_empty(log_dir / name) for name in CHECKPOINT_NAMES}


def write_log_dir_checkpoints(
    log_dir: Path, logs: list[Log], frozen: Mapping[TopicPartition, Mapping[str, int]]
) -> None:
    """Write the four checkpoints of ``log_dir`` for its online ``logs``; ``frozen`` holds the
    entries of its damaged partitions, written back as they were. Raises ``OSError``."""
    compacted = [log for log in logs if log.config.compact]
    for name, of, value in (
        (RECOVERY_POINT_CHECKPOINT, logs, lambda log: log.recovery_point),
        (LOG_START_OFFSET_CHECKPOINT, logs, lambda log: log.log_start_offset),
        (HIGH_WATERMARK_CHECKPOINT, logs, lambda log: log.high_watermark),
        (CLEANER_OFFSET_CHECKPOINT, compacted, lambda log: log.first_dirty_offset),
    ):
        offsets = {k: v[name] for k, v in frozen.items() if name in v}
        offsets.update(_offsets(of, value))
        write_offset_checkpoint(log_dir / name, offsets)


def _offsets(logs: Iterable[Log], value: Callable[[Log], int]) -> dict[TopicPartition, int]:
    return {(log.topic, log.partition): value(log) for log in logs}


def _read_checkpoint_or_empty(path: Path) -> dict[TopicPartition, int]:
    """A checkpoint's entries; a corrupt one is reported and treated as empty (full recovery)."""
    try:
        return read_offset_checkpoint(path)
    except CheckpointError as exc:
        logger.error("%s; recovering as if it were absent", exc)
        return {}
