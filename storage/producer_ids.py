"""Producer id allocation in blocks, unique across restarts and crashes (the single-node form
of Kafka's ``ProducerIdManager``, whose blocks live in the metadata log).

File ``<log.dir>/producer-id-block``, in every online log dir (odradek's own; the framing of
:mod:`odradek.storage.checkpoints`)::

    0\\n           version
    3000\\n        the first producer id of the next unallocated block

Invariants:
- every id below the stored value may have been handed out; none at or above it ever was.
- ids are handed out in blocks of :data:`BLOCK_SIZE` (1000, Kafka's block size); an id of a
  block is handed out only after the block's end is durable in the file.
- at start the allocator resumes at the largest value found in any online log dir, so a
  block survives as long as one dir that recorded it stays online.

Crash safety:
1. the new end is written with :func:`odradek.storage.atomic.write_atomically` (``.tmp``,
   fsync, rename, fsync dir) to every online dir *before* the first id of the block is used;
2. a crash between blocks wastes at most the unused rest of a block (ids are never reused);
3. a file that does not parse is fatal (:meth:`ProducerIdAllocator.from_dirs` raises):
   guessing could reuse ids.

Cost: one write (two fsyncs per dir) per 1000 ids, on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.storage.checkpoints import CheckpointError, parse_int, read_lines
from odradek.storage.errors import StorageError

__all__ = [
    "BLOCK_SIZE",
    "PRODUCER_ID_BLOCK",
    "ProducerIdAllocator",
    "encode_next_block_start",
    "read_next_block_start",
]

PRODUCER_ID_BLOCK = "producer-id-block"
BLOCK_SIZE = 1000
_VERSION = 0
_INT64_MAX = 0x7FFF_FFFF_FFFF_FFFF


def read_next_block_start(path: Path) -> int:
    """The stored next block start; 0 if the file is missing."""
    lines = read_lines(path)
    if lines is None:
        return 0
    if len(lines) != 2:
        raise CheckpointError(path, 1, f"expected 2 lines, found {len(lines)}")
    try:
        version = parse_int(lines[0], "version", 0, 0x7FFF_FFFF)
    except ValueError as exc:
        raise CheckpointError(path, 1, str(exc)) from None
    if version != _VERSION:
        raise CheckpointError(path, 1, f"unsupported version {version}, expected 0")
    try:
        return parse_int(lines[1], "next block start", 0, _INT64_MAX)
    except ValueError as exc:
        raise CheckpointError(path, 2, str(exc)) from None


def encode_next_block_start(value: int) -> bytes:
    return f"{_VERSION}\n{value}\n".encode()


class ProducerIdAllocator:
    """Hands out producer ids; ``persist(value)`` must make ``value`` durable or raise."""

    def __init__(self, next_block_start: int, persist: Callable[[int], None]) -> None:
        self._next_id = next_block_start
        self._block_end = next_block_start
        self._persist = persist

    @classmethod
    def from_dirs(
        cls, log_dirs: Sequence[Path], persist: Callable[[int], None]
    ) -> ProducerIdAllocator:
        """Resume at the largest block start recorded in ``log_dirs``. Raises
        :class:`StorageError` if a file does not parse: guessing could hand out an id twice."""
        try:
            start = max((read_next_block_start(d / PRODUCER_ID_BLOCK) for d in log_dirs), default=0)
        except CheckpointError as exc:
            raise StorageError(f"cannot allocate producer ids: {exc}") from exc
        return cls(start, persist)

    def allocate(self) -> int:
        """A producer id never handed out before, across restarts and crashes; the first of
        a block persists the block's end first (if that raises, no id is handed out)."""
        if self._next_id >= self._block_end:
            new_end = self._block_end + BLOCK_SIZE
            self._persist(new_end)  # durable before any id of the block is used
            self._block_end = new_end
        producer_id = self._next_id
        self._next_id += 1
        return producer_id
