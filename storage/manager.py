"""The ``log.dirs`` roots and the logs in them: start-up, shutdown, topics, checkpoints, failures.

Per root (docs/architecture.md §4)::

    meta.properties, .lock, .kafka_cleanshutdown     :mod:`odradek.storage.log_dir_startup`
    *-offset-checkpoint (four of them)               :mod:`odradek.storage.log_dir_checkpoints`
    topic-configs.json                   odradek's own: topic ids and config overrides, the
                                         newest copy wins (:mod:`odradek.storage.topic_configs`)
    producer-id-block                    odradek's own: the next unallocated block of producer
                                         ids (:mod:`odradek.storage.producer_ids`)
    <topic>-<partition>/                 one Log each (:mod:`odradek.storage.partition_dirs`)

Which partitions exist (online, offline, damaged), in which root, where a new one goes and how
many may exist: the :class:`~odradek.storage.partition_table.PartitionTable` in ``partitions``,
which the manager keeps in step with the files.

Start-up opens every root, then loads the partitions of each
(:mod:`odradek.storage.log_dir_startup`). A root that cannot be used (missing and not
creatable, unwritable, locked, I/O error) goes offline with its reason; the others keep
working. Without any online root the start fails.

A partition whose log is damaged (:class:`LogCorruptedError`, the loader's rule) stays offline
alone: its files stay as they are, requests for it get the error, its checkpoint entries are
written back unchanged, and its root gets no clean-shutdown marker, so the next start
re-validates it again (after ``odradek repair-log``, or to find the damage again).

Failures: an ``OSError`` from the disk (EIO, ENOSPC, EROFS...) takes its root offline. Running
out of file descriptors or memory (EMFILE, ENFILE, ENOMEM: ``is_resource_exhaustion``) is the
process's problem, not the disk's: it never takes a root offline. A topic creation or a
CreatePartitions that hits it is undone (every partition it made is closed and removed) and
the error goes to that one request; a checkpoint round skips the root and logs it; at
start-up it is fatal, naming the root (the broker cannot serve partitions it cannot open).

Crash safety: every file is replaced atomically (:mod:`odradek.storage.atomic`); checkpoints
only ever lag the truth, which recovery tolerates (:mod:`odradek.storage.log_dir_checkpoints`);
a partition is created and deleted in the order :mod:`odradek.storage.partition_dirs` states.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from odradek.storage.atomic import write_atomically
from odradek.storage.checkpoints import CheckpointError, DirLock, LockError, write_clean_shutdown
from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    LogDirOfflineError,
    StorageError,
    UnknownTopicOrPartitionError,
    is_resource_exhaustion,
)
from odradek.storage.log import Log
from odradek.storage.log_dir_checkpoints import write_log_dir_checkpoints
from odradek.storage.log_dir_startup import find_cluster_id, load_partitions, open_log_dir
from odradek.storage.partition_dirs import (
    create_partition_dir,
    delete_partition_dir,
    discard_partition,
    remove_leftover_dirs,
)
from odradek.storage.partition_table import PartitionTable, TopicPartition
from odradek.storage.producer_ids import (
    PRODUCER_ID_BLOCK,
    ProducerIdAllocator,
    encode_next_block_start,
)
from odradek.storage.topic_configs import (
    TOPIC_CONFIGS,
    TopicMetadata,
    encode_topic_configs,
    read_topic_configs,
)
from odradek.storage.topics import validate_new_topic_name
from odradek.storage.uuids import new_uuid

__all__ = ["LogManager"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_PARTITIONS = 10_000  # max.broker.partitions


class LogManager:
    """Owns the ``log.dirs`` roots and every partition's :class:`Log` in them."""

    def __init__(
        self,
        log_dirs: Sequence[Path | str],
        default_config: LogConfig,
        *,
        node_id: int,
        clock_ms: Callable[[], int],
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
    ) -> None:
        if not log_dirs:
            raise StorageError("log.dirs names no directory")
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        self.default_config = default_config
        self.node_id = node_id
        self.clock_ms = clock_ms
        self.topics: dict[str, TopicMetadata] = {}
        self.offline_dirs: dict[Path, str] = {}
        self.partitions = PartitionTable(max_partitions, self.offline_dirs)
        self.cluster_id: str | None = None
        self._locks: dict[Path, DirLock] = {}
        self._topic_configs_version = 0
        self._producer_ids: ProducerIdAllocator | None = None

    # -- start-up and shutdown --------------------------------------------------------------

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def startup(self) -> None:
        """Open every root and load every partition in it (see the module docstring).

        A fatal error (a node.id or cluster.id mismatch, no usable root) releases every lock
        taken so far before it propagates.
        """
        try:
            self._startup()
        except BaseException:
            self._release_locks()
            raise

    def _startup(self) -> None:
        # A root without meta.properties (a newly added dir) joins the cluster of the roots
        # that have one, wherever it is listed: read theirs before writing any.
        self.cluster_id = find_cluster_id(self.log_dirs)
        clean: dict[Path, bool] = {}
        for log_dir in self.log_dirs:
            try:
                opened = open_log_dir(log_dir, node_id=self.node_id, cluster_id=self.cluster_id)
            except (OSError, CheckpointError, LockError) as exc:
                self._startup_failed(log_dir, exc)
                continue
            self._locks[log_dir] = opened.lock
            self.cluster_id = opened.cluster_id
            clean[log_dir] = opened.clean_shutdown
        if not self.online_dirs:
            raise StorageError(
                "no usable log dir: "
                + "; ".join(f"{d}: {why}" for d, why in self.offline_dirs.items())
            )
        self._load_topic_configs()
        self._producer_ids = ProducerIdAllocator.from_dirs(
            self.online_dirs, self._persist_producer_id_block
        )
        for log_dir in self.online_dirs:
            try:
                self._load_log_dir(log_dir, clean_shutdown=clean[log_dir])
            except (OSError, CheckpointError) as exc:
                self._startup_failed(log_dir, exc)
        if not self.offline_dirs:  # a topic whose creation crashed before its partitions
            for topic in [t for t in self.topics if self.partitions.partition_count(t) == 0]:
                logger.warning("forgetting topic %s: it has no partition on disk", topic)
                del self.topics[topic]

    def _startup_failed(self, log_dir: Path, exc: Exception) -> None:
        if isinstance(exc, OSError) and is_resource_exhaustion(exc):
            raise StorageError(
                f"cannot load log dir {log_dir}: {exc} (the process ran out of file descriptors "
                "or memory; raise RLIMIT_NOFILE or lower the partition count)"
            ) from exc
        self.mark_dir_offline(log_dir, str(exc))

    def _load_log_dir(self, log_dir: Path, *, clean_shutdown: bool) -> None:
        """Register each partition of ``log_dir`` as it is loaded: one that fails part-way
        leaves the ones before it registered, for :meth:`mark_dir_offline` to close."""
        for key, loaded in load_partitions(
            log_dir,
            clean_shutdown=clean_shutdown,
            default_config=self.default_config,
            topics=self.topics,
            loaded=self.partitions.log_dir_of,
            clock_ms=self.clock_ms,
        ):
            self.partitions.add(key, log_dir, loaded)

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints and the clean-shutdown markers."""
        logs = self.partitions.logs
        for key, log in list(logs.items()):
            if key not in logs:  # its dir went offline while closing an earlier log
                continue
            try:
                log.close()
            except OSError as exc:
                with contextlib.suppress(OSError):  # out of resources: close the others
                    self._io_failed(self.partitions.log_dir_of[key], exc, f"closing {log}")
        self.checkpoint()
        damaged_dirs = self.partitions.dirs_with_damage()
        for log_dir in self.online_dirs:
            if log_dir in damaged_dirs:  # the next start must find (or re-check) the damage
                logger.error("not marking %s cleanly shut down: it holds a damaged log", log_dir)
                continue
            try:
                write_clean_shutdown(log_dir)
            except OSError as exc:
                logger.error("cannot mark %s cleanly shut down: %s", log_dir, exc)
        self._release_locks()
        self.partitions.forget_online()

    def _release_locks(self) -> None:
        for lock in self._locks.values():
            lock.release()
        self._locks.clear()

    # -- partitions and topics -------------------------------------------------------------

    def effective_config(self, topic: str) -> LogConfig:
        metadata = self.topics.get(topic)
        return self.default_config.with_overrides(metadata.configs if metadata else {})

    def create_topic(
        self, topic: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> list[Log]:
        """Create ``partitions`` partitions of a new topic; validates name and configs first."""
        validate_new_topic_name(topic, self.topics)
        if partitions < 1:
            raise StorageError(f"number of partitions must be at least 1, got {partitions}")
        config = self.default_config.with_overrides(configs or {})  # raises naming the key
        self.partitions.check_limit(partitions)
        self.topics[topic] = TopicMetadata(new_uuid(), configs)
        try:
            self._save_topic_configs()
            return [self._create_partition(topic, p, config) for p in range(partitions)]
        except Exception:  # all partitions or none
            self._undo_creation(topic, self.partitions.online_of(topic), range(partitions))
            del self.topics[topic]
            try:
                self._save_topic_configs()
            except OSError as exc:  # the next start forgets a topic without partitions anyway
                logger.error("could not forget the partly created topic %s: %s", topic, exc)
            raise

    def _undo_creation(
        self, topic: str, created: Sequence[TopicPartition], partitions: range
    ) -> None:
        """Undo a request that failed while creating ``partitions`` of ``topic``: forget and
        remove the ``created`` ones (:func:`discard_partition`), then the directories it made
        but never opened as a log."""
        for key in created:
            discard_partition(self.partitions.pop(key)[0])
        unopened = [p for p in partitions if (topic, p) not in self.partitions.logs]
        remove_leftover_dirs(self.online_dirs, topic, unopened)

    def add_partitions(self, topic: str, total_partitions: int) -> list[Log]:
        """CreatePartitions: grow ``topic`` to ``total_partitions``."""
        current = self.partitions.partition_count(topic)
        if topic not in self.topics or current == 0:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic}")
        if total_partitions <= current:
            raise StorageError(
                f"topic {topic} has {current} partitions; the new count must be larger, "
                f"got {total_partitions}"
            )
        self.partitions.check_limit(total_partitions - current)
        config = self.effective_config(topic)
        created: list[Log] = []
        try:
            for partition in range(current, total_partitions):
                created.append(self._create_partition(topic, partition, config))
        except Exception:  # all new partitions or none; the topic keeps its old ones
            keys = [(topic, log.partition) for log in created]
            self._undo_creation(topic, keys, range(current, total_partitions))
            raise
        return created

    def _create_partition(self, topic: str, partition: int, config: LogConfig) -> Log:
        online_dirs = self.online_dirs
        if not online_dirs:
            raise LogDirOfflineError(self.log_dirs[0], "every log dir is offline")
        log_dir = self.partitions.next_log_dir(online_dirs)
        topic_id = self.topics[topic].topic_id
        try:
            log = create_partition_dir(
                log_dir, topic, partition, topic_id, config, now_ms=self.clock_ms()
            )
        except OSError as exc:
            if is_resource_exhaustion(exc):  # out of descriptors or memory: the disk is fine
                raise  # create_topic removes what was made
            self.mark_dir_offline(log_dir, str(exc))
            raise LogDirOfflineError(log_dir, str(exc)) from exc
        self.partitions.add((topic, partition), log_dir, log)
        return log

    def alter_topic_configs(self, topic: str, configs: Mapping[str, str]) -> LogConfig:
        """Replace ``topic``'s overrides; takes effect on every partition at once."""
        metadata = self.topics.get(topic)
        if metadata is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic}")
        config = self.default_config.with_overrides(configs)
        metadata.configs = dict(configs)
        self._save_topic_configs()
        for key in self.partitions.online_of(topic):
            self.partitions.logs[key].config = config
        return config

    def delete_topic(self, topic: str) -> None:
        """Close and remove every partition of ``topic`` (rename to ``-delete``, then remove)."""
        if topic not in self.topics:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic}")
        for _, partition in self.partitions.offline_of(topic):
            # its files cannot be removed now; deleting half a topic is worse
            self.partitions.get_log(topic, partition)  # raises why it is offline
        for key in self.partitions.online_of(topic):
            delete_partition_dir(*self.partitions.pop(key))
        del self.topics[topic]
        self._save_topic_configs()

    # -- checkpoints -----------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the recovery point, log start offset, high watermark and cleaner checkpoints."""
        for log_dir in self.online_dirs:
            logs = self.partitions.logs_in(log_dir)
            frozen = self.partitions.damaged_checkpoints_in(log_dir)
            try:
                write_log_dir_checkpoints(log_dir, logs, frozen)
                for log in logs:  # a log start offset moved: the leader epochs follow it
                    log.leader_epochs.flush_if_dirty()
            except OSError as exc:
                with contextlib.suppress(OSError):  # out of resources: the next round retries
                    self._io_failed(log_dir, exc, "writing checkpoints")

    # -- producer ids ------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        """InitProducerId: :meth:`ProducerIdAllocator.allocate`, each block's end written to
        every online root. Call it from the thread that owns the manager's state (the event
        loop); raises :class:`StorageError` if no online root could record a new block."""
        if self._producer_ids is None:
            raise StorageError("the log manager is not started")
        return self._producer_ids.allocate()

    def _persist_producer_id_block(self, next_block_start: int) -> None:
        if not self._write_to_online_dirs(
            PRODUCER_ID_BLOCK, encode_next_block_start(next_block_start)
        ):
            raise StorageError("no online log dir could record a block of producer ids")

    # -- topic configs file ----------------------------------------------------------------

    def _load_topic_configs(self) -> None:
        version, topics = read_topic_configs(self.online_dirs)
        self._topic_configs_version = version
        self.topics.update(topics)

    def _save_topic_configs(self) -> None:
        self._topic_configs_version += 1
        encoded = encode_topic_configs(self._topic_configs_version, self.topics)
        self._write_to_online_dirs(TOPIC_CONFIGS, encoded)

    # -- failures --------------------------------------------------------------------------

    def _write_to_online_dirs(self, name: str, data: bytes) -> bool:
        """Replace ``name`` in every online root (:func:`write_atomically`); a root that fails
        goes offline (:meth:`_io_failed`). True if at least one root holds the new file."""
        written = False
        for log_dir in self.online_dirs:
            try:
                write_atomically(log_dir / name, data)
                written = True
            except OSError as exc:
                self._io_failed(log_dir, exc, f"writing {name}")
        return written

    def _io_failed(self, log_dir: Path, error: OSError, doing: str) -> None:
        """A disk error takes ``log_dir`` offline; running out of descriptors or memory is
        logged and re-raised, for the caller to fail (and undo) the one operation."""
        if is_resource_exhaustion(error):
            logger.error("out of resources %s in %s: %s", doing, log_dir, error)
            raise error
        self.mark_dir_offline(log_dir, str(error))

    def mark_dir_offline(self, log_dir: Path, reason: str) -> None:
        """Stop using ``log_dir``: its partitions become unavailable; the rest keep working.

        The broker calls it when an I/O error hits a log in ``log_dir``.
        """
        if log_dir in self.offline_dirs:
            return
        logger.error("log dir %s is offline: %s", log_dir, reason)
        self.offline_dirs[log_dir] = reason
        for log in self.partitions.take_dir_offline(log_dir):
            for segment in log.segments:
                with contextlib.suppress(OSError):
                    segment.file.close()
        lock = self._locks.pop(log_dir, None)
        if lock is not None:
            lock.release()
