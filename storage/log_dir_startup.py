"""Start-up of one ``log.dirs`` root: open it, then load the partitions in it.

Layout read and written here, per root (docs/architecture.md §4)::

    meta.properties                      node.id, cluster.id, directory.id (written once)
    .lock                                flock held while this process owns the root
    .kafka_cleanshutdown                 present only between a clean shutdown and the next start
    <topic>-<partition>/                 one Log each (:mod:`odradek.storage.loader`)
    <topic>-<partition>.<uuid>-delete/   left by a topic deletion a crash interrupted

Invariants:
- All roots share one cluster id: a new root takes it from the roots that have one
  (:func:`find_cluster_id`, read before any root is written); a stored cluster id or node id
  that differs is fatal, as in Kafka.
- A root with no marker is loaded as after an unclean shutdown; a root created just now with
  no partition directory in it counts as clean (there is nothing to recover).
- A partition directory appears in one root only; a second copy is fatal.
- A partition whose log is damaged (:class:`LogCorruptedError`) is reported, not loaded: its
  files stay as they are, and its checkpoint entries go with it to be written back unchanged.

Crash safety, in the order :func:`open_log_dir` and :func:`load_partitions` run:
1. Create the root durably (:func:`odradek.storage.atomic.make_directories`) and take its lock.
2. Read ``meta.properties``, or write it (atomically) for a new root.
3. Consume the clean-shutdown marker: it is deleted and the deletion fsynced before any log is
   touched, so a crash from here on is never mistaken for a clean shutdown.
4. Read the checkpoints (:mod:`odradek.storage.log_dir_checkpoints`), remove ``-delete``
   directories (a crash mid-removal repeats it) and load each partition directory; a missing
   ``partition.metadata`` is written again with the topic's id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.atomic import make_directories
from odradek.storage.checkpoints import (
    CheckpointError,
    DirLock,
    consume_clean_shutdown,
)
from odradek.storage.config import LogConfig
from odradek.storage.errors import LogCorruptedError, StorageError
from odradek.storage.log import Log
from odradek.storage.log_dir_checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_log_dir_checkpoints,
)
from odradek.storage.meta_properties import (
    META_PROPERTIES,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from odradek.storage.partition_metadata import (
    PARTITION_METADATA,
    read_partition_metadata,
    write_partition_metadata,
)
from odradek.storage.topic_configs import TopicMetadata
from odradek.storage.topics import DELETE_DIR_SUFFIX, parse_partition_dir
from odradek.storage.uuids import new_uuid

__all__ = ["DamagedPartition", "OpenedLogDir", "find_cluster_id", "load_partitions", "open_log_dir"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OpenedLogDir:
    """A root this process now owns: its lock, its cluster id, how it was shut down."""

    lock: DirLock
    cluster_id: str
    clean_shutdown: bool


@dataclass(frozen=True)
class DamagedPartition:
    """A partition left offline: why, and its checkpoint entries by file name."""

    error: LogCorruptedError
    checkpoints: dict[str, int]


def find_cluster_id(log_dirs: list[Path]) -> str | None:
    """The cluster id of the first root with a readable ``meta.properties``, if any."""
    for log_dir in log_dirs:
        with contextlib.suppress(OSError, CheckpointError):
            meta = read_meta_properties(log_dir / META_PROPERTIES)
            if meta is not None:
                return meta.cluster_id
    return None


def open_log_dir(log_dir: Path, *, node_id: int, cluster_id: str | None) -> OpenedLogDir:
    """Steps 1 to 3: create and lock ``log_dir``, check or write its ``meta.properties``,
    consume its clean-shutdown marker. ``cluster_id`` is the one the other roots hold, or
    ``None`` for the first.

    Raises ``OSError``, :class:`CheckpointError`, :class:`LockError`, or
    :class:`StorageError` for a node id or cluster id mismatch; the lock is released first.
    """
    make_directories(log_dir)  # durably: the partitions in it are acknowledged later
    lock = DirLock.acquire(log_dir)
    try:
        meta = read_meta_properties(log_dir / META_PROPERTIES)
        fresh = meta is None
        if meta is None:
            meta = MetaProperties(node_id, cluster_id or new_uuid(), new_uuid())
            write_meta_properties(log_dir / META_PROPERTIES, meta)
        elif meta.node_id != node_id:
            raise StorageError(
                f"stored node.id {meta.node_id} in {log_dir / META_PROPERTIES} does not match "
                f"the configured node.id {node_id}"
            )
        if cluster_id is not None and meta.cluster_id != cluster_id:
            raise StorageError(
                f"cluster.id {meta.cluster_id} in {log_dir / META_PROPERTIES} differs from "
                f"{cluster_id} in the other log dirs"
            )
        clean = consume_clean_shutdown(log_dir)
        clean = clean or (fresh and not any(parse_partition_dir(n) for n in os.listdir(log_dir)))
    except BaseException:
        lock.release()
        raise
    return OpenedLogDir(lock, meta.cluster_id, clean)


def load_partitions(
    log_dir: Path,
    *,
    clean_shutdown: bool,
    default_config: LogConfig,
    topics: MutableMapping[str, TopicMetadata],
    loaded: MutableMapping[TopicPartition, Path],
    clock_ms: Callable[[], int],
) -> Iterator[tuple[TopicPartition, Log | DamagedPartition]]:
    """Step 4: load each partition of ``log_dir``, yielding it (or its damage) as it goes.

    The caller registers each one before the next is loaded: ``loaded`` (partition -> root, the
    ones registered so far) is how a second copy of a partition is found. ``topics`` gets an
    entry for a topic seen for the first time. Raises ``OSError`` or :class:`CheckpointError`
    for the root, :class:`StorageError` for a duplicate partition.
    """
    checkpoints = read_log_dir_checkpoints(log_dir)
    recovery_points = checkpoints[RECOVERY_POINT_CHECKPOINT]
    start_offsets = checkpoints[LOG_START_OFFSET_CHECKPOINT]
    cleaner_offsets = checkpoints[CLEANER_OFFSET_CHECKPOINT]
    for name in sorted(os.listdir(log_dir)):
        path = log_dir / name
        if not path.is_dir():
            continue
        if name.endswith(DELETE_DIR_SUFFIX):
            logger.info("removing %s, left by a topic deletion", path)
            shutil.rmtree(path, ignore_errors=True)
            continue
        parsed = parse_partition_dir(name)
        if parsed is None:
            logger.warning("ignoring %s: not a partition directory", path)
            continue
        if parsed in loaded:
            raise StorageError(f"duplicate log directories for {name}: {path} and {loaded[parsed]}")
        topic, partition = parsed
        metadata = _topic_metadata(topics, topic, path)
        try:
            log = Log.open(
                path,
                topic,
                partition,
                default_config.with_overrides(metadata.configs),
                now_ms=clock_ms(),
                log_start_offset=start_offsets.get(parsed, 0),
                recovery_point=recovery_points.get(parsed, 0),
                clean_shutdown=clean_shutdown,
            )
        except LogCorruptedError as exc:  # this partition only: the loader logged where
            frozen = {n: values[parsed] for n, values in checkpoints.items() if parsed in values}
            yield parsed, DamagedPartition(exc, frozen)
            continue
        log.first_dirty_offset = max(
            log.log_start_offset, cleaner_offsets.get(parsed, log.log_start_offset)
        )
        yield parsed, log
    logger.info(
        "loaded log dir %s (%s shutdown)", log_dir, "clean" if clean_shutdown else "unclean"
    )


def _topic_metadata(
    topics: MutableMapping[str, TopicMetadata], topic: str, partition_dir: Path
) -> TopicMetadata:
    topic_id = read_partition_metadata(partition_dir / PARTITION_METADATA)
    metadata = topics.get(topic)
    if metadata is None:
        metadata = topics[topic] = TopicMetadata(topic_id or new_uuid())
    if topic_id is None:
        write_partition_metadata(partition_dir / PARTITION_METADATA, metadata.topic_id)
    return metadata
