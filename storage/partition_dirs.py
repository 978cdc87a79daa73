"""Creating and removing one partition's directory in a ``log.dirs`` root.

Layout (names from :mod:`odradek.storage.topics`)::

    <log.dir>/<topic>-<partition>/                  the live partition
        partition.metadata                          the topic id, written before the log
    <log.dir>/<topic>-<partition>.<uuid>-delete/    a deleted partition, until removed

Invariants:
- A directory with a live name always holds a ``partition.metadata`` naming its topic's id
  once creation returned; a log is opened in it only after that file is durable.
- A deleted partition never keeps its live name: the rename to ``-delete`` comes first, so a
  later topic of the same name never finds the old records.

Crash safety:
1. Creation: ``mkdir``, write ``partition.metadata`` atomically, open the log (one empty
   segment), fsync the root. A crash before the fsync may leave no directory or a partial one;
   the start-up loader completes a directory that is there (docs/architecture.md §4).
2. Deletion: close the log, rename the directory to ``-delete``, fsync the root, then remove
   it. A crash after the rename leaves a ``-delete`` directory, which the next start removes
   (:mod:`odradek.storage.log_dir_startup`); before it, the partition is still whole.
3. A creation undone part-way (:func:`discard_partition`) removes the files with at most one
   descriptor open, because it may run when the process is out of them.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

from odradek.storage.atomic import fsync_directory
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.partition_metadata import PARTITION_METADATA, write_partition_metadata
from odradek.storage.topics import delete_dir_name, partition_dir_name

__all__ = [
    "create_partition_dir",
    "delete_partition_dir",
    "discard_partition",
    "remove_leftover_dirs",
]

logger = logging.getLogger(__name__)


def create_partition_dir(
    log_dir: Path, topic: str, partition: int, topic_id: str, config: LogConfig, *, now_ms: int
) -> Log:
    """Step 1: a new, empty partition of ``topic`` in ``log_dir``. Raises ``OSError``."""
    path = log_dir / partition_dir_name(topic, partition)
    path.mkdir()
    write_partition_metadata(path / PARTITION_METADATA, topic_id)
    log = Log.open(path, topic, partition, config, now_ms=now_ms, clean_shutdown=True)
    fsync_directory(log_dir)
    return log


def delete_partition_dir(log: Log, log_dir: Path) -> None:
    """Step 2: close ``log`` and remove its directory from ``log_dir``. Raises ``OSError``."""
    log.close()
    doomed = log_dir / delete_dir_name(log.topic, log.partition, uuid.uuid4().hex)
    os.replace(log.directory, doomed)
    fsync_directory(log_dir)
    shutil.rmtree(doomed, ignore_errors=True)


def discard_partition(log: Log) -> None:
    """Step 3: drop a partition just created, without trimming its indexes: out of
    descriptors, a trim (which reopens the file) would fail, and the files go anyway.
    Unmapping and closing first frees what the removal needs."""
    for segment in log.segments:
        segment.offset_index.delete()
        segment.time_index.delete()
        segment.file.close()
    _remove_flat_dir(log.directory)


def remove_leftover_dirs(log_dirs: Iterable[Path], topic: str, partitions: Sequence[int]) -> None:
    """Step 3, after :func:`discard_partition`: remove the directories of ``partitions`` that
    an undone creation made in ``log_dirs`` but never opened as a log."""
    for log_dir in log_dirs:
        for partition in partitions:
            leftover = log_dir / partition_dir_name(topic, partition)
            if leftover.exists():
                _remove_flat_dir(leftover)


def _remove_flat_dir(path: Path) -> None:
    """Remove a partition directory (no subdirectories) using one descriptor at most, for a
    rollback that runs out of them (``shutil.rmtree`` holds two); errors are logged."""
    try:
        for name in os.listdir(path):
            (path / name).unlink(missing_ok=True)
        path.rmdir()
    except OSError as exc:
        logger.error("could not remove %s: %s", path, exc)
