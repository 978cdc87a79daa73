"""Driver-side questions to the broker: which partitions a subscription covers, and what an
offset specification means right now.

:class:`Cluster` is the small interface the planning code needs (topics and partition counts,
ListOffsets); :class:`odradek.spark.connection.ClientCluster` implements it with the blocking
:class:`odradek.client.Client`, and tests pass a fake. Nothing here creates a topic: unknown topics
are found by listing, never by a Metadata request that could auto-create them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from odradek.spark.option_values import EARLIEST, LATEST, OdradekOptionError, TopicPartition
from odradek.spark.options import OffsetSpec, ReadOptions, Subscription
from odradek.spark.planning import OffsetRange

__all__ = [
    "Cluster",
    "DataLossError",
    "batch_ranges",
    "bounds",
    "discover",
    "report_data_loss",
    "resolve",
]

log = logging.getLogger("odradek.spark")


class DataLossError(RuntimeError):
    """Records a query should read are gone (retention, deleted topic) and
    ``failOnDataLoss`` is true."""


class Cluster(Protocol):
    def topics(self) -> dict[str, int]:
        """Every topic and its number of partitions."""
        ...

    def list_offsets(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """ListOffsets: -2 earliest, -1 latest, else the first offset with timestamp >= it
        (None when no record is that recent)."""
        ...

    def close(self) -> None: ...


def report_data_loss(fail: bool, message: str) -> None:
    """Spark's ``failOnDataLoss``: raise when true, log a warning and go on when false."""
    hint = (
        " Some data may have been lost because they are not available in the broker any more:"
        " either aged out by retention or the topic was deleted before all of it was processed."
    )
    if fail:
        raise DataLossError(
            message + hint + " If you want the query to go on, set failOnDataLoss=false."
        )
    log.warning("%s%s Going on because failOnDataLoss=false.", message, hint)


def discover(cluster: Cluster, subscription: Subscription, *, strict: bool) -> list[TopicPartition]:
    """The topic-partitions the subscription covers now, sorted.

    ``strict`` (when a query starts): a subscribed or assigned topic or partition that does
    not exist is an error naming the option. Otherwise missing ones are left out.
    """
    topics = cluster.topics()
    if subscription.kind == "subscribe":
        missing = [t for t in subscription.topics if t not in topics]
        if missing and strict:
            raise OdradekOptionError(
                "subscribe", f"unknown topic{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
            )
        return sorted((t, p) for t in subscription.topics if t in topics for p in range(topics[t]))
    if subscription.kind == "subscribePattern":
        return sorted(
            (t, p) for t, n in topics.items() if subscription.matches(t) for p in range(n)
        )
    missing_tps = [(t, p) for t, p in subscription.assigned if p >= topics.get(t, 0)]
    if missing_tps and strict:
        raise OdradekOptionError(
            "assign", "unknown topic-partition " + ", ".join(f"{t}-{p}" for t, p in missing_tps)
        )
    return sorted(tp for tp in subscription.assigned if tp not in missing_tps)


def bounds(
    cluster: Cluster, tps: Iterable[TopicPartition]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """The log start and log end offsets of ``tps``."""
    tps = list(tps)
    found = cluster.list_offsets({tp: EARLIEST for tp in tps})
    earliest = {tp: v for tp, v in found.items() if v is not None}
    found = cluster.list_offsets({tp: LATEST for tp in tps})
    latest = {tp: v for tp, v in found.items() if v is not None}
    return earliest, latest


def resolve(
    cluster: Cluster,
    spec: OffsetSpec,
    tps: Iterable[TopicPartition],
    *,
    no_match: str = "latest",
) -> dict[TopicPartition, int]:
    """Concrete offsets of ``spec`` for ``tps`` (at their current earliest/latest).

    For a timestamp with no record that recent, ``no_match`` says what to do: ``"latest"``
    (the log end offset) or ``"error"`` (Spark's ``startingOffsetsByTimestampStrategy``).
    """
    tps = sorted(tps)
    _check_named(spec, tps)
    if spec.default is not None:
        query = {tp: spec.default for tp in tps}
    elif spec.by_timestamp:
        query = {
            tp: spec.timestamp if spec.timestamp is not None else spec.timestamps[tp] for tp in tps
        }
    else:
        query = {tp: spec.offsets[tp] for tp in tps}
    ask = {tp: v for tp, v in query.items() if v < 0 or spec.by_timestamp}
    answers = cluster.list_offsets(ask) if ask else {}
    result: dict[TopicPartition, int] = {}
    unmatched = []
    for tp, value in query.items():
        if tp not in ask:
            result[tp] = value
        elif answers.get(tp) is not None:
            result[tp] = answers[tp]  # type: ignore[assignment]
        else:
            unmatched.append(tp)
    if unmatched and spec.by_timestamp:
        if no_match == "error":
            raise OdradekOptionError(
                spec.option,
                "no record at or after the timestamp in "
                + ", ".join(f"{t}-{p}" for t, p in unmatched)
                + " (set startingOffsetsByTimestampStrategy=latest to start at the end)",
            )
        latest = cluster.list_offsets({tp: LATEST for tp in unmatched})
        for tp in unmatched:
            result[tp] = latest.get(tp) or 0
    elif unmatched:
        raise OdradekOptionError(
            spec.option, "unknown topic-partition " + ", ".join(f"{t}-{p}" for t, p in unmatched)
        )
    return result


def batch_ranges(
    cluster: Cluster, options: ReadOptions, tps: list[TopicPartition]
) -> list[OffsetRange]:
    """A batch query's offset range per partition of ``tps``: ``startingOffsets`` to
    ``endingOffsets`` resolved against ``cluster`` (the broker, or the log dirs), checked as
    Spark's Kafka source checks them: a start before the log start is data loss
    (``failOnDataLoss``), an end past the log end or before the start is an option error."""
    earliest, latest = bounds(cluster, tps)
    start = resolve(cluster, options.starting, tps, no_match=options.starting_by_timestamp_strategy)
    assert options.ending is not None  # batch queries always have one
    end = resolve(cluster, options.ending, tps, no_match="latest")
    ranges = []
    for tp in tps:
        low, high = start[tp], end[tp]
        if low < earliest[tp]:
            report_data_loss(
                options.fail_on_data_loss,
                f"{options.starting.option}: {tp[0]}-{tp[1]} starts at {low}, "
                f"but its earliest offset is {earliest[tp]}.",
            )
            low = earliest[tp]
        if high > latest[tp]:
            raise OdradekOptionError(
                options.ending.option,
                f"{tp[0]}-{tp[1]} ends at {high}, after its latest offset {latest[tp]}",
            )
        if high < low:
            raise OdradekOptionError(
                options.ending.option,
                f"{tp[0]}-{tp[1]} ends at {high}, before where it starts ({low})",
            )
        ranges.append(OffsetRange(tp[0], tp[1], low, high))
    return ranges


def _check_named(spec: OffsetSpec, tps: list[TopicPartition]) -> None:
    """Spark's rule: specific offsets (or timestamps) must name exactly the query's partitions."""
    if spec.default is not None or spec.timestamp is not None:
        return
    named = spec.named_partitions()
    wanted = set(tps)
    unknown = sorted(named - wanted)
    if unknown:
        raise OdradekOptionError(
            spec.option,
            "names topic-partitions the query does not read: "
            + ", ".join(f"{t}-{p}" for t, p in unknown),
        )
    missing = sorted(wanted - named)
    if missing:
        raise OdradekOptionError(
            spec.option,
            "must give every topic-partition the query reads (-2 earliest, -1 latest); missing "
            + ", ".join(f"{t}-{p}" for t, p in missing),
        )
