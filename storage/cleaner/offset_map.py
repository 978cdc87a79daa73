"""The cleaner's key -> latest offset map (Kafka's ``SkimpyOffsetMap``), bounded in entries.

Kafka sizes its map from ``log.cleaner.dedupe.buffer.size`` (shared by the cleaner threads) at
24 bytes per entry (a 16-byte MD5 of the key and an 8-byte offset) and fills it to
``log.cleaner.io.buffer.load.factor`` (0.9). This map takes the same number of entries from the
same setting, so a pass covers as many keys as Kafka's would; it stores the keys themselves
(a Python dict: exact, no hash collisions), which takes more memory per entry than Kafka's.

When the map is full, the pass ends at the last segment it covers completely
(:func:`odradek.storage.cleaner.clean.build_offset_map`); the rest of the dirty section waits for
the next pass.
"""

from __future__ import annotations

__all__ = ["BYTES_PER_ENTRY", "LOAD_FACTOR", "OffsetMap"]

BYTES_PER_ENTRY = 24
LOAD_FACTOR = 0.9


class OffsetMap:
    """Latest offset per key among the records put so far, up to ``capacity`` keys."""

    __slots__ = ("_offsets", "capacity", "latest_offset")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    @classmethod
    def for_buffer(cls, dedupe_buffer_bytes: int, threads: int = 1) -> OffsetMap:
        """A map as large as Kafka's for ``log.cleaner.dedupe.buffer.size`` over ``threads``."""
        per_thread = dedupe_buffer_bytes // max(1, threads)
        return cls(int(per_thread // BYTES_PER_ENTRY * LOAD_FACTOR))

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` for ``key`` (offsets are put in increasing order)."""
        self._offsets[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``, or -1."""
        return self._offsets.get(key, -1)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.capacity

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._offsets)
