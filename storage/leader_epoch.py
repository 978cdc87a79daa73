"""The partition's leader epochs: Kafka's ``LeaderEpochFileCache`` over its
``leader-epoch-checkpoint`` file, for a single node whose only leader epoch is 0.

File ``<partition dir>/leader-epoch-checkpoint`` (Kafka's ``LeaderEpochCheckpointFile``,
format version 0; read and written by :mod:`odradek.storage.checkpoints`)::

    0\\n                 version
    1\\n                 entry count
    0 0\\n               <epoch> <start offset>: the first offset written under that epoch

Invariants (Kafka's cache): entries ascend in both epoch and start offset; every start offset
is at or above the log start offset and below the log end offset, except the latest, which
may equal the log end offset (an epoch under which nothing was written yet).

Every batch appended is stamped with :attr:`LeaderEpochCache.latest_epoch` in its
``partitionLeaderEpoch`` field (bytes 12..15; not under the CRC). On one node that is 0 — or
the newest epoch of a checkpoint Kafka wrote, for a directory that came from a Kafka broker:
epochs never go back.

Lifecycle:
1. a new partition: epoch 0 starts at its first offset (0), written when it is created;
2. a partition loaded without the file (written by an odradek that kept none): epoch 0 starts
   at the log end offset — what a Kafka broker does when it becomes leader with an empty cache
   (the batches already stored carry the epoch their producer sent, usually -1);
3. at load, after recovery: entries starting at or past the log end offset are dropped
   (``truncateFromEnd``; a torn tail may have cut the log below them), then the newest epoch
   the file held (0 on odradek) is assigned at the log end offset unless it is still the
   latest entry (a Kafka leader's ``assign`` on becoming leader), then entries below the log
   start offset are folded into one starting there (``truncateFromStart``);
4. the log start offset moves (retention, DeleteRecords): ``truncateFromStart`` in memory;
   :meth:`flush_if_dirty` writes the file with the other checkpoints (Kafka flushes it
   asynchronously too).

Crash safety: the file is replaced atomically; a stale one (an older log start offset) is
corrected by step 3 of the next load. A file that does not parse is logged and rebuilt as if
missing (it is derived data).
"""

from __future__ import annotations

import logging
from pathlib import Path

from odradek.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)

__all__ = ["LEADER_EPOCH_CHECKPOINT", "LeaderEpochCache"]

logger = logging.getLogger(__name__)

LEADER_EPOCH = 0  # the one leader epoch of a single-node broker


class LeaderEpochCache:
    """``[(epoch, start offset), ...]`` of one partition and its checkpoint file."""

    def __init__(self, path: Path, entries: list[tuple[int, int]]) -> None:
        self.path = path
        self.entries = entries
        self.latest_epoch = entries[-1][0]  # stamped into every batch: a plain attribute
        self._dirty = False

    @classmethod
    def load(
        cls, directory: Path, *, log_start_offset: int, log_end_offset: int
    ) -> LeaderEpochCache:
        """Read the checkpoint and reconcile it with the recovered log (module docstring, 3);
        writes the file if that changed it."""
        path = directory / LEADER_EPOCH_CHECKPOINT
        try:
            stored = read_leader_epoch_checkpoint(path)
        except CheckpointError as exc:
            logger.warning("%s; rebuilding it", exc)
            stored = []
        entries = [(e, o) for e, o in stored if o < log_end_offset]
        # Becoming leader again: under the newest epoch ever recorded (0 on a fresh node).
        current = max((e for e, _ in stored), default=LEADER_EPOCH)
        if not entries or entries[-1][0] < current:
            entries.append((current, log_end_offset))
        cache = cls(path, entries)
        cache.truncate_from_start(log_start_offset)
        if cache.entries != stored:
            cache.flush()
        return cache

    def truncate_from_start(self, log_start_offset: int) -> None:
        """Fold the entries at or below ``log_start_offset`` into one starting there."""
        below = [entry for entry in self.entries if entry[1] <= log_start_offset]
        if not below or (below[-1][1] == log_start_offset and len(below) == 1):
            return
        self.entries = [(below[-1][0], log_start_offset), *self.entries[len(below) :]]
        self._dirty = True

    def flush(self) -> None:
        """Write the file. May run in a checkpoint thread while the appending thread moves
        the log start: the flag is cleared before the entries are read, so a change made
        meanwhile leaves it set and is written next time."""
        self._dirty = False
        write_leader_epoch_checkpoint(self.path, self.entries)

    def flush_if_dirty(self) -> None:
        if self._dirty:
            self.flush()
