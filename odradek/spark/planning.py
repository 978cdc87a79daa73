"""Planning: offset ranges, their split into Spark partitions, and the per-trigger rate limit.

Pure functions over plain data (no broker, no Spark session), so every rule is unit-tested:

* :func:`split_ranges` is Spark's ``KafkaOffsetRangeCalculator`` (Spark 4's, with
  ``maxRecordsPerPartition``): by default one range per topic-partition, as Spark does; with
  ``maxRecordsPerPartition`` each range is first cut into ``ceil(size / max)`` equal pieces;
  then, with ``minPartitions`` above the number of ranges, each range is cut into pieces in
  proportion to its size (rounded, at least one). Pieces differ by at most one offset; empty
  ranges are dropped. Each piece is one Spark task, so a single-partition topic reads in
  parallel once either option asks for it.
* :func:`rate_limit` spreads ``maxOffsetsPerTrigger`` over the partitions in proportion to
  how many offsets each has available. Unlike Spark's rounding, which can overshoot the
  limit, the shares are floored and the leftover offsets go one by one to the partitions with
  the largest remainders (then in topic-partition order), so a micro-batch holds exactly
  ``min(limit, available)`` offsets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from odradek.spark.option_values import TopicPartition

__all__ = [
    "OffsetRange",
    "offsets_from_json",
    "offsets_to_json",
    "rate_limit",
    "split_ranges",
]


@dataclass(frozen=True, eq=True)
class OffsetRange(InputPartition):
    """Records ``from_offset <= offset < until_offset`` of one topic-partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Non-empty ranges, each at most ``max_records_per_partition`` offsets long, then cut so
    that there are about ``min_partitions`` of them (Spark's rules)."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        ranges = [
            piece for r in ranges for piece in _cut(r, -(-r.size // max_records_per_partition))
        ]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    return [
        piece
        for r in ranges
        for piece in _cut(r, max(_round_half_up(r.size * min_partitions, total), 1))
    ]


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` in ``parts`` consecutive non-empty pieces whose sizes differ by at most one."""
    result = []
    remaining = r.size
    start = r.from_offset
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.until_offset)
        if end > start:
            result.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return result


def _round_half_up(numerator: int, denominator: int) -> int:
    """``round(numerator / denominator)`` with halves up (Scala's ``math.round``), exactly."""
    return (2 * numerator + denominator) // (2 * denominator)


def rate_limit(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], max_offsets: int
) -> dict[TopicPartition, int]:
    """The end offsets of a micro-batch of at most ``max_offsets`` offsets from ``start``.

    ``end`` holds the latest offsets and ``start`` where each of its partitions starts (a new
    partition at its earliest offset); every partition of ``end`` is in the result.
    """
    sizes = {tp: max(0, end[tp] - start[tp]) for tp in end}
    total = sum(sizes.values())
    if total <= max_offsets:
        return dict(end)
    shares = {tp: size * max_offsets // total for tp, size in sizes.items()}
    leftover = max_offsets - sum(shares.values())
    # Largest remainder first; ties in topic-partition order (deterministic).
    by_remainder = sorted(sizes, key=lambda tp: (-(sizes[tp] * max_offsets % total), tp))
    for tp in by_remainder:
        if leftover == 0:
            break
        if shares[tp] < sizes[tp]:
            shares[tp] += 1
            leftover -= 1
    return {tp: start[tp] + shares[tp] if sizes[tp] else end[tp] for tp in end}


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{("t", 0): 5}`` → ``{"t": {"0": 5}}``: the checkpoint form (Spark's Kafka source's)."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }
