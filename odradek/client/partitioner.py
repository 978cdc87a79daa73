"""Partitioners: Kafka's default (murmur2 of the key; sticky for null keys), round robin,
random, or a user callable ``f(key_bytes, all_partitions, available_partitions) -> int``.

Default, as Kafka's ``BuiltInPartitioner``/``DefaultPartitioner``: a keyed record goes to
``(murmur2(key) & 0x7fffffff) % num_partitions`` over *all* partitions, so a key always maps to
the same partition while the count is unchanged. A record with a null key goes to the topic's
*sticky* partition (KIP-480): it stays the same until the producer closes the batch it was
filling (the accumulator calls :meth:`Partitioner.on_new_batch`), then a different partition
is picked at random, so null-key records still fill whole batches.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

__all__ = ["Partitioner", "murmur2"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2, seed 0x9747b28c, as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length & ~3
    for i in range(0, end, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


UserPartitioner = Callable[[bytes | None, Sequence[int], Sequence[int]], int]


class Partitioner:
    """Chooses the partition of records sent without an explicit one (one per producer)."""

    def __init__(self, kind: str | UserPartitioner = "default", rng: random.Random | None = None):
        if not (callable(kind) or kind in ("default", "round_robin", "random")):
            raise ValueError(
                f"partitioner must be 'default', 'round_robin', 'random' or a callable: {kind!r}"
            )
        self.kind = kind
        self._rng = rng or random.Random()
        self.sticky: dict[str, int] = {}
        self._counters: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        kind = self.kind
        if kind == "default":
            if key is None:
                sticky = self.sticky.get(topic)
                if sticky is None or sticky >= num_partitions:
                    sticky = self.sticky[topic] = self._rng.randrange(num_partitions)
                return sticky
            return (murmur2(key) & 0x7FFFFFFF) % num_partitions
        if kind == "round_robin":
            n = self._counters.get(topic, 0)
            self._counters[topic] = n + 1
            return n % num_partitions
        if kind == "random":
            return self._rng.randrange(num_partitions)
        partitions = range(num_partitions)
        chosen = kind(key, partitions, partitions)  # type: ignore[operator]
        if not 0 <= chosen < num_partitions:
            raise ValueError(f"partitioner returned {chosen} for a topic of {num_partitions}")
        return chosen

    def on_new_batch(self, topic: str, previous: int, num_partitions: int) -> None:
        """The batch of ``topic``'s sticky partition ``previous`` was closed: switch to another
        partition (KIP-480), if there is one."""
        if self.kind != "default" or self.sticky.get(topic) != previous:
            return
        if num_partitions > 1:
            choice = self._rng.randrange(num_partitions - 1)
            self.sticky[topic] = choice if choice < previous else choice + 1
