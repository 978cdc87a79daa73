"""The partition table: which partitions exist, which are online, and which log dir holds each.

One table per :class:`~odradek.storage.manager.LogManager`, which decides what goes in and out
of it and does the file work (loading, creating and removing partition directories, taking a
log dir offline). The table itself touches no file: it is the manager's map, in memory, and
changes on the thread that owns the manager's state (the event loop; start-up and shutdown
before and after it runs). Read its dicts freely; change them only through its methods. Why a
log dir is offline it reads from the manager's ``offline_dirs``.

By partition ``(topic, partition)``::

    logs        online partition  -> its open Log
    log_dir_of  online partition  -> the log dir holding it
    offline     offline partition -> the log dir holding it
    damaged     damaged partition -> why it is offline, and its checkpoint entries

Invariants:
1. ``logs`` and ``log_dir_of`` have the same keys; a partition is online (there) or offline
   (in ``offline``), never both, and lives in one log dir.
2. An offline partition stays in the table for the life of the process: it counts in its
   topic's partition count and against ``max.broker.partitions``, and it is never created
   again in another log dir (Kafka's offline replicas).
3. ``damaged`` is a subset of ``offline``: a damaged partition failed to load at start-up
   (:mod:`odradek.storage.log_dir_startup`) in a log dir that stayed online. Every other
   offline partition was online until its log dir went offline (:meth:`take_dir_offline`).
4. A new partition goes to the online log dir holding the fewest partitions, the first in
   ``log.dirs`` order on a tie (:meth:`next_log_dir`).
5. At most ``max_partitions`` partitions exist (``max.broker.partitions``): each holds open
   descriptors and mappings, so a creation that would pass the limit is refused before any
   I/O (:meth:`check_limit`). The partitions found at start-up are all loaded, whatever
   their number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from odradek.storage.errors import (
    LogDirOfflineError,
    PartitionLimitError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.log import Log
from odradek.storage.log_dir_startup import DamagedPartition

__all__ = ["PartitionTable", "TopicPartition"]

TopicPartition = tuple[str, int]


class PartitionTable:
    """Every partition of the broker, online or offline, by log dir (see the module docstring)."""

    def __init__(self, max_partitions: int, offline_dirs: Mapping[Path, str]) -> None:
        self.max_partitions = max_partitions
        self._offline_dirs = offline_dirs  # the manager's: why each offline log dir is offline
        self.logs: dict[TopicPartition, Log] = {}
        self.log_dir_of: dict[TopicPartition, Path] = {}
        self.offline: dict[TopicPartition, Path] = {}
        self.damaged: dict[TopicPartition, DamagedPartition] = {}

    def __len__(self) -> int:
        """Every partition, online and offline: what ``max.broker.partitions`` limits."""
        return len(self.logs) + len(self.offline)

    # -- reading ---------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log:
        """The partition's log; raises why it has none: damaged, its log dir offline, unknown."""
        key = (topic, partition)
        log = self.logs.get(key)
        if log is None:
            damaged = self.damaged.get(key)
            if damaged is not None:
                raise damaged.error
            offline_dir = self.offline.get(key)
            if offline_dir is not None:
                raise LogDirOfflineError(offline_dir, self._offline_dirs[offline_dir])
            raise UnknownTopicOrPartitionError(f"unknown topic-partition {topic}-{partition}")
        return log

    def partition_count(self, topic: str) -> int:
        """``topic``'s partitions, online and offline (0 for a topic the table does not know)."""
        online = sum(1 for t, _ in self.logs if t == topic)
        return online + sum(1 for t, _ in self.offline if t == topic)

    def online_of(self, topic: str) -> list[TopicPartition]:
        return [key for key in self.logs if key[0] == topic]

    def offline_of(self, topic: str) -> list[TopicPartition]:
        return [key for key in self.offline if key[0] == topic]

    def logs_in(self, log_dir: Path) -> list[Log]:
        """The online partitions' logs in ``log_dir``."""
        return [log for key, log in self.logs.items() if self.log_dir_of[key] == log_dir]

    def damaged_checkpoints_in(self, log_dir: Path) -> dict[TopicPartition, dict[str, int]]:
        """The checkpoint entries of the damaged partitions in ``log_dir``, as read at start-up."""
        return {
            key: damaged.checkpoints
            for key, damaged in self.damaged.items()
            if self.offline[key] == log_dir
        }

    def dirs_with_damage(self) -> set[Path]:
        return {self.offline[key] for key in self.damaged}

    def partitions_per_dir(self, log_dirs: Sequence[Path]) -> dict[Path, int]:
        """How many online partitions each of ``log_dirs`` holds, in their order."""
        counts = dict.fromkeys(log_dirs, 0)
        for log_dir in self.log_dir_of.values():
            if log_dir in counts:
                counts[log_dir] += 1
        return counts

    def next_log_dir(self, online_dirs: Sequence[Path]) -> Path:
        """Where a new partition goes: the one of ``online_dirs`` (non-empty, in ``log.dirs``
        order) holding the fewest partitions; the first of them on a tie."""
        counts = self.partitions_per_dir(online_dirs)
        return min(counts, key=counts.__getitem__)

    def check_limit(self, new_partitions: int) -> None:
        """Raise :class:`PartitionLimitError` if ``new_partitions`` more would pass the limit."""
        existing = len(self)
        if existing + new_partitions > self.max_partitions:
            raise PartitionLimitError(
                f"creating {new_partitions} partitions would pass max.broker.partitions="
                f"{self.max_partitions} (the broker has {existing})"
            )

    # -- changing --------------------------------------------------------------------------

    def add(self, key: TopicPartition, log_dir: Path, loaded: Log | DamagedPartition) -> None:
        """A partition loaded or created in ``log_dir``: online, or offline if its log is
        damaged (it failed to load)."""
        if isinstance(loaded, DamagedPartition):
            self.offline[key] = log_dir
            self.damaged[key] = loaded
        else:
            self.logs[key] = loaded
            self.log_dir_of[key] = log_dir

    def pop(self, key: TopicPartition) -> tuple[Log, Path]:
        """Forget an online partition (deleted, or its creation undone): its log and log dir."""
        return self.logs.pop(key), self.log_dir_of.pop(key)

    def take_dir_offline(self, log_dir: Path) -> list[Log]:
        """Every online partition in ``log_dir`` becomes offline; returns their logs."""
        taken = []
        for key in [k for k, d in self.log_dir_of.items() if d == log_dir]:
            taken.append(self.logs.pop(key))
            del self.log_dir_of[key]
            self.offline[key] = log_dir
        return taken

    def forget_online(self) -> None:
        """At shutdown, once every log is closed: no online partition is served any more."""
        self.logs.clear()
        self.log_dir_of.clear()
