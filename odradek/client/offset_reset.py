"""Where a consumer group's committed offsets go when they are reset, as Kafka's
``kafka-consumer-groups --reset-offsets`` decides it, without I/O: ``odradek groups
reset-offsets`` (blocking) and the web console (async) ask the broker for the inputs and
commit the result themselves.

Targets: ``earliest`` (each log's start), ``latest`` (each log's end), ``offset`` (one offset
for every partition), ``timestamp`` (the first record at or after a time; the log end where
there is none), ``shift`` (the committed offset plus ``value``, which may be negative; a
partition with no committed offset is an error). Every result is clamped to the log's
[start, end], as Kafka's tool clamps it. Only an inactive group (no members: ``Empty`` or
``Dead``) may be reset: Kafka refuses otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from odradek.client.types import TopicPartition

__all__ = ["INACTIVE_GROUP_STATES", "RESET_TARGETS", "plan_reset"]

INACTIVE_GROUP_STATES = ("Empty", "Dead")
RESET_TARGETS = ("earliest", "latest", "offset", "timestamp", "shift")


def plan_reset(
    target: str,
    partitions: Iterable[TopicPartition],
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    *,
    value: int | None = None,
    found: Mapping[TopicPartition, int | None] | None = None,
    committed: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, int]:
    """The new offset of each partition. ``value``: the offset (``offset``) or the shift
    (``shift``); ``found``: each partition's offset for the timestamp (``timestamp``; None
    or absent: no record at or after it); ``committed``: the group's offsets (``shift``).
    ``ValueError`` names what is missing or wrong."""
    tps = list(partitions)
    if target not in RESET_TARGETS:
        raise ValueError(f"reset target must be one of {', '.join(RESET_TARGETS)}")
    if target in ("offset", "shift") and value is None:
        raise ValueError(f"a reset to an {target} needs a value")
    if target == "earliest":
        wanted = {tp: starts[tp] for tp in tps}
    elif target == "latest":
        wanted = {tp: ends[tp] for tp in tps}
    elif target == "offset":
        wanted = dict.fromkeys(tps, value)
    elif target == "timestamp":
        hits = found or {}
        wanted = {tp: ends[tp] if hits.get(tp) is None else hits[tp] for tp in tps}
    else:
        have = committed or {}
        missing = [f"{tp.topic}-{tp.partition}" for tp in tps if tp not in have]
        if missing:
            raise ValueError(f"cannot shift {missing}: the group has no committed offset there")
        wanted = {tp: have[tp] + value for tp in tps}  # type: ignore[operator]
    return {tp: min(max(off, starts[tp]), ends[tp]) for tp, off in wanted.items()}  # type: ignore[type-var]
