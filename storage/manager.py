"""The logs of every partition across the ``log.dirs`` roots: which exist, where, and why not.

Per root (docs/architecture.md §4)::

    meta.properties, .lock, .kafka_cleanshutdown     :mod:`odradek.storage.log_dir_startup`
    *-offset-checkpoint (four of them)               :mod:`odradek.storage.log_dir_checkpoints`
    topic-configs.json                   odradek's own: topic ids and config overrides
    producer-id-block                    odradek's own: the next unallocated block of producer
                                         ids (:mod:`odradek.storage.producer_ids`)
    <topic>-<partition>/                 one Log each (:mod:`odradek.storage.partition_dirs`)

Topic ids and config overrides live in ``topic-configs.json`` (:mod:`odradek.storage.topic_configs`:
a versioned copy in every online root; the newest wins at start-up).

Start-up opens every root, then loads the partitions of each
(:mod:`odradek.storage.log_dir_startup`). A root that cannot be used (missing and not
creatable, unwritable, locked, I/O error) goes offline with its reason; the others keep
working. Without any online root the start fails.

A partition whose log is damaged (:class:`LogCorruptedError`, the loader's rule) stays offline
alone: its files stay as they are, requests for it get the error, its checkpoint entries are
written back unchanged, and its root gets no clean-shutdown marker, so the next start
re-validates it again (after ``odradek repair-log``, or to find the damage again).

A new partition goes to the online root holding the fewest partitions (ties: config order).
At most ``max_partitions`` partitions exist (``max.broker.partitions``): each holds open
descriptors and mappings, so a request that would pass the limit is refused before any I/O
(:class:`PartitionLimitError`).

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
    LogCorruptedError,
    LogDirOfflineError,
    PartitionLimitError,
    StorageError,
    UnknownTopicOrPartitionError,
    is_resource_exhaustion,
)
from odradek.storage.log import Log
from odradek.storage.log_dir_checkpoints import write_log_dir_checkpoints
from odradek.storage.log_dir_startup import (
    DamagedPartition,
    find_cluster_id,
    load_partitions,
    open_log_dir,
)
from odradek.storage.partition_dirs import (
    create_partition_dir,
    delete_partition_dir,
    discard_partition,
    remove_flat_dir,
)
from odradek.storage.producer_ids import ProducerIdAllocator, write_next_block_start
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

TopicPartition = tuple[str, int]
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
        self.max_partitions = max_partitions
        self.logs: dict[TopicPartition, Log] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.offline_dirs: dict[Path, str] = {}
        # Partitions whose dir went offline while the broker ran: still part of their topic,
        # answering KAFKA_STORAGE_ERROR (Kafka's offline replicas), never re-created elsewhere.
        self.offline_partitions: dict[TopicPartition, Path] = {}
        # Partitions whose log is damaged (a subset of offline_partitions): the error, and the
        # checkpoint entries read at start-up, written back as they were.
        self.damaged_partitions: dict[TopicPartition, LogCorruptedError] = {}
        self._frozen_checkpoints: dict[TopicPartition, dict[str, int]] = {}
        self.cluster_id: str | None = None
        self._locks: dict[Path, DirLock] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
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
            for lock in self._locks.values():
                lock.release()
            self._locks.clear()
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
        try:
            self._producer_ids = ProducerIdAllocator.from_dirs(
                self.online_dirs, self._persist_producer_id_block
            )
        except CheckpointError as exc:  # guessing could hand out an id twice
            raise StorageError(f"cannot allocate producer ids: {exc}") from exc
        for log_dir in self.online_dirs:
            try:
                self._load_log_dir(log_dir, clean_shutdown=clean[log_dir])
            except (OSError, CheckpointError) as exc:
                self._startup_failed(log_dir, exc)
        if not self.offline_dirs:  # a topic whose creation crashed before its partitions
            for topic in [t for t in self.topics if self.partition_count(t) == 0]:
                logger.warning("forgetting topic %s: it has no partition on disk", topic)
                del self.topics[topic]

    def _startup_failed(self, log_dir: Path, exc: Exception) -> None:
        if isinstance(exc, OSError) and is_resource_exhaustion(exc):
            raise StorageError(
                f"cannot load log dir {log_dir}: {exc} (the process ran out of file descriptors "
                "or memory; raise RLIMIT_NOFILE or lower the partition count)"
            ) from exc
        self._take_offline(log_dir, str(exc))

    def _load_log_dir(self, log_dir: Path, *, clean_shutdown: bool) -> None:
        """Register each partition of ``log_dir`` as it is loaded: one that fails part-way
        leaves the ones before it registered, for :meth:`_take_offline` to close."""
        for key, loaded in load_partitions(
            log_dir,
            clean_shutdown=clean_shutdown,
            default_config=self.default_config,
            topics=self.topics,
            loaded=self._log_dir_of,
            clock_ms=self.clock_ms,
        ):
            if isinstance(loaded, DamagedPartition):
                self.offline_partitions[key] = log_dir
                self.damaged_partitions[key] = loaded.error
                self._frozen_checkpoints[key] = loaded.checkpoints
            else:
                self.logs[key] = loaded
                self._log_dir_of[key] = log_dir

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints and the clean-shutdown markers."""
        for key, log in list(self.logs.items()):
            if key not in self.logs:  # its dir went offline while closing an earlier log
                continue
            try:
                log.close()
            except OSError as exc:
                with contextlib.suppress(OSError):  # out of resources: close the others
                    self._io_failed(self._log_dir_of[key], exc, f"closing {log}")
        self.checkpoint()
        damaged_dirs = {self.offline_partitions[key] for key in self.damaged_partitions}
        for log_dir in self.online_dirs:
            if log_dir in damaged_dirs:  # the next start must find (or re-check) the damage
                logger.error("not marking %s cleanly shut down: it holds a damaged log", log_dir)
                continue
            try:
                write_clean_shutdown(log_dir)
            except OSError as exc:
                logger.error("cannot mark %s cleanly shut down: %s", log_dir, exc)
        for lock in self._locks.values():
            lock.release()
        self._locks.clear()
        self.logs.clear()

    # -- partitions and topics -------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log:
        log = self.logs.get((topic, partition))
        if log is None:
            damaged = self.damaged_partitions.get((topic, partition))
            if damaged is not None:
                raise damaged
            offline_dir = self.offline_partitions.get((topic, partition))
            if offline_dir is not None:
                raise LogDirOfflineError(offline_dir, self.offline_dirs[offline_dir])
            raise UnknownTopicOrPartitionError(f"unknown topic-partition {topic}-{partition}")
        return log

    def partition_count(self, topic: str) -> int:
        online = sum(1 for t, _ in self.logs if t == topic)
        return online + sum(1 for t, _ in self.offline_partitions if t == topic)

    def partitions_per_dir(self) -> dict[Path, int]:
        counts = dict.fromkeys(self.online_dirs, 0)
        for log_dir in self._log_dir_of.values():
            if log_dir in counts:
                counts[log_dir] += 1
        return counts

    def next_log_dir(self) -> Path:
        """The online root holding the fewest partitions (ties broken by config order)."""
        counts = self.partitions_per_dir()
        if not counts:
            raise LogDirOfflineError(self.log_dirs[0], "every log dir is offline")
        return min(counts, key=lambda d: (counts[d], self.log_dirs.index(d)))

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
        self.check_partition_limit(partitions)
        self.topics[topic] = TopicMetadata(new_uuid(), configs)
        try:
            self._save_topic_configs()
            return [self._create_partition(topic, p, config) for p in range(partitions)]
        except Exception:
            self._abandon_topic(topic, partitions)  # all partitions or none
            raise

    def check_partition_limit(self, new_partitions: int) -> None:
        """Raise :class:`PartitionLimitError` if ``new_partitions`` more would pass the limit."""
        existing = len(self.logs) + len(self.offline_partitions)
        if existing + new_partitions > self.max_partitions:
            raise PartitionLimitError(
                f"creating {new_partitions} partitions would pass max.broker.partitions="
                f"{self.max_partitions} (the broker has {existing})"
            )

    def _abandon_topic(self, topic: str, partitions: int) -> None:
        """Undo a topic creation that failed part-way (best effort: errors are logged)."""
        for key in [k for k in self.logs if k[0] == topic]:
            self._discard_new_partition(key)
        self._remove_leftover_dirs(topic, range(partitions))
        del self.topics[topic]
        try:
            self._save_topic_configs()
        except OSError as exc:  # the next start forgets a topic without partitions anyway
            logger.error("could not forget the partly created topic %s: %s", topic, exc)

    def _discard_new_partition(self, key: TopicPartition) -> None:
        """Forget and remove a partition this request created (:func:`discard_partition`)."""
        log = self.logs.pop(key)
        self._log_dir_of.pop(key)
        discard_partition(log)

    def _remove_leftover_dirs(self, topic: str, partitions: range) -> None:
        """Remove the directories a failed creation made but never opened as a log."""
        for log_dir in self.online_dirs:
            for partition in partitions:
                leftover = log_dir / f"{topic}-{partition}"
                if (topic, partition) not in self.logs and leftover.exists():
                    remove_flat_dir(leftover)

    def add_partitions(self, topic: str, total_partitions: int) -> list[Log]:
        """CreatePartitions: grow ``topic`` to ``total_partitions``."""
        current = self.partition_count(topic)
        if topic not in self.topics or current == 0:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic}")
        if total_partitions <= current:
            raise StorageError(
                f"topic {topic} has {current} partitions; the new count must be larger, "
                f"got {total_partitions}"
            )
        self.check_partition_limit(total_partitions - current)
        config = self.effective_config(topic)
        created = []
        try:
            for partition in range(current, total_partitions):
                created.append(self._create_partition(topic, partition, config))
        except Exception:  # all new partitions or none; the topic keeps its old ones
            for log in created:
                self._discard_new_partition((topic, log.partition))
            self._remove_leftover_dirs(topic, range(current, total_partitions))
            raise
        return created

    def _create_partition(self, topic: str, partition: int, config: LogConfig) -> Log:
        log_dir = self.next_log_dir()
        topic_id = self.topics[topic].topic_id
        try:
            log = create_partition_dir(
                log_dir, topic, partition, topic_id, config, now_ms=self.clock_ms()
            )
        except OSError as exc:
            if is_resource_exhaustion(exc):  # out of descriptors or memory: the disk is fine
                raise  # create_topic removes what was made
            self._take_offline(log_dir, str(exc))
            raise LogDirOfflineError(log_dir, str(exc)) from exc
        self.logs[(topic, partition)] = log
        self._log_dir_of[(topic, partition)] = log_dir
        return log

    def alter_topic_configs(self, topic: str, configs: Mapping[str, str]) -> LogConfig:
        """Replace ``topic``'s overrides; takes effect on every partition at once."""
        metadata = self.topics.get(topic)
        if metadata is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic}")
        config = self.default_config.with_overrides(configs)
        metadata.configs = dict(configs)
        self._save_topic_configs()
        for (t, _), log in self.logs.items():
            if t == topic:
                log.config = config
        return config

    def delete_topic(self, topic: str) -> None:
        """Close and remove every partition of ``topic`` (rename to ``-delete``, then remove)."""
        if topic not in self.topics:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic}")
        for t, partition in self.offline_partitions:
            if t == topic:  # its files cannot be removed now; deleting half a topic is worse
                self.get_log(t, partition)  # raises why it is offline
        for key in [k for k in self.logs if k[0] == topic]:
            self._remove_partition(key)
        del self.topics[topic]
        self._save_topic_configs()

    def _remove_partition(self, key: TopicPartition) -> None:
        """Close one partition's log and remove its directory (rename to ``-delete`` first)."""
        log = self.logs.pop(key)
        delete_partition_dir(log, self._log_dir_of.pop(key))

    # -- checkpoints -----------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the recovery point, log start offset, high watermark and cleaner checkpoints."""
        for log_dir in self.online_dirs:
            logs = [log for key, log in self.logs.items() if self._log_dir_of.get(key) == log_dir]
            frozen = {
                key: values
                for key, values in self._frozen_checkpoints.items()
                if self.offline_partitions.get(key) == log_dir
            }
            try:
                write_log_dir_checkpoints(log_dir, logs, frozen)
                for log in logs:  # a log start offset moved: the leader epochs follow it
                    log.leader_epochs.flush_if_dirty()
            except OSError as exc:
                with contextlib.suppress(OSError):  # out of resources: the next round retries
                    self._io_failed(log_dir, exc, "writing checkpoints")

    def flush_all(self) -> None:
        for log in self.logs.values():
            log.flush()

    # -- producer ids ------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, across restarts and crashes (InitProducerId).

        Ids come in blocks of 1000 (:mod:`odradek.storage.producer_ids`): the first id of each
        block costs one atomic write of ``producer-id-block`` to every online log dir (two
        fsyncs per dir) on the calling thread, before the id is returned; the other 999 cost
        nothing. Call it from the thread that owns the manager's state (the event loop).
        Raises :class:`LogDirOfflineError` if no log dir could record the block.
        """
        if self._producer_ids is None:
            raise StorageError("the log manager is not started")
        return self._producer_ids.allocate()

    def _persist_producer_id_block(self, next_block_start: int) -> None:
        recorded = False
        for log_dir in self.online_dirs:
            try:
                write_next_block_start(log_dir, next_block_start)
                recorded = True
            except OSError as exc:
                self._io_failed(log_dir, exc, "writing producer-id-block")
        if not recorded:
            raise StorageError("no online log dir could record a block of producer ids")

    # -- topic configs file ----------------------------------------------------------------

    def _load_topic_configs(self) -> None:
        version, topics = read_topic_configs(self.online_dirs)
        self._topic_configs_version = version
        self.topics.update(topics)

    def _save_topic_configs(self) -> None:
        self._topic_configs_version += 1
        encoded = encode_topic_configs(self._topic_configs_version, self.topics)
        for log_dir in self.online_dirs:
            try:
                write_atomically(log_dir / TOPIC_CONFIGS, encoded)
            except OSError as exc:
                self._io_failed(log_dir, exc, f"writing {TOPIC_CONFIGS}")

    # -- failures --------------------------------------------------------------------------

    def _io_failed(self, log_dir: Path, error: OSError, doing: str) -> None:
        """A disk error takes ``log_dir`` offline; running out of descriptors or memory is
        logged and re-raised, for the caller to fail (and undo) the one operation."""
        if is_resource_exhaustion(error):
            logger.error("out of resources %s in %s: %s", doing, log_dir, error)
            raise error
        self._take_offline(log_dir, str(error))

    def _take_offline(self, log_dir: Path, reason: str) -> None:
        """Stop using ``log_dir``: its partitions become unavailable; the rest keep working."""
        if log_dir in self.offline_dirs:
            return
        logger.error("log dir %s is offline: %s", log_dir, reason)
        self.offline_dirs[log_dir] = reason
        for key in [k for k, d in self._log_dir_of.items() if d == log_dir]:
            self._log_dir_of.pop(key)
            self.offline_partitions[key] = log_dir
            log = self.logs.pop(key, None)
            if log is not None:
                for segment in log.segments:
                    with contextlib.suppress(OSError):
                        segment.file.close()
        lock = self._locks.pop(log_dir, None)
        if lock is not None:
            lock.release()

    def mark_dir_offline(self, log_dir: Path, reason: str) -> None:
        """Called by the broker when an I/O error hits a log in ``log_dir``."""
        self._take_offline(log_dir, reason)

    def log_dir_of(self, topic: str, partition: int) -> Path:
        return self._log_dir_of[(topic, partition)]
