"""The producer's metadata, written once for both faces (no I/O here): :class:`TopicPartitionCounts`
and :func:`topic_error`. ``ProducerCore._topic_op`` (the first wait for a topic) and
``ProducerCore._refresh_op`` (the refresh) are the operations that ask the broker.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.client.errors import KafkaError, for_code
from odradek.client.types import TopicMetadata
from odradek.protocol.errors import ErrorCode

__all__ = ["TopicPartitionCounts", "topic_error"]


class TopicPartitionCounts:
    """The producer's metadata cache: the partition count of every topic it has sent to.

    Refreshed every ``metadata_max_age_ms`` (Kafka's ``metadata.max.age.ms``) so that
    partitions added while the producer runs get records: the sender asks :meth:`due` as it
    takes a request (``ProducerCore._sender_round``), and if it answers, asks the broker about
    :attr:`counts`' topics after sending and hands the answer to :meth:`update`. Not
    thread-safe by itself: the blocking producer calls it from its sender thread (``send``
    only reads :attr:`counts`), the async one from its tasks."""

    __slots__ = ("counts", "max_age_s", "refreshed_at_s")

    def __init__(self, metadata_max_age_ms: int, now_s: float) -> None:
        self.counts: dict[str, int] = {}
        self.max_age_s = metadata_max_age_ms / 1000
        self.refreshed_at_s = now_s

    def due(self, now_s: float) -> list[str] | None:
        """The topics to ask about if the cache is older than ``metadata_max_age_ms`` (the
        refresh then counts as done: at most one at a time), else ``None``."""
        if now_s - self.refreshed_at_s <= self.max_age_s:
            return None
        self.refreshed_at_s = now_s
        return list(self.counts) or None

    def update(self, topics: Mapping[str, TopicMetadata]) -> None:
        """Take the partition counts of a Metadata answer (topics in error are kept as were)."""
        for name, info in topics.items():
            if not info.error_code and info.partitions:
                self.counts[name] = len(info.partitions)


def topic_error(topic: str, info: TopicMetadata | None) -> KafkaError | None:
    """The error that keeps records from being sent to ``topic``, if any."""
    if info is None:
        return for_code(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"topic {topic!r} missing from the metadata response",
        )
    if info.error_code:
        return for_code(info.error_code, f"topic {topic!r}")
    if not info.partitions:
        return for_code(ErrorCode.LEADER_NOT_AVAILABLE, f"topic {topic!r} has no partitions yet")
    return None
