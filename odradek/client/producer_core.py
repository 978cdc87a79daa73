"""Producer logic shared by the blocking and async producers, written once and driven by both
(no I/O here): configuration, record value checks, the topic metadata cache and when to
refresh it, the retry decision, and the handling of Produce responses."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.client.accumulator import Batch
from odradek.client.core import backoff_ms
from odradek.client.errors import KafkaError, for_code
from odradek.client.types import TopicMetadata
from odradek.protocol import messages as m
from odradek.protocol.records import Compression

__all__ = [
    "ProducerConfig",
    "TopicPartitionCounts",
    "as_bytes",
    "handle_produce_response",
    "retry_at_s",
    "topic_error",
]

_CODECS = {
    None: Compression.NONE,
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


@dataclass(frozen=True)
class ProducerConfig:
    acks: int
    linger_ms: int
    batch_size: int
    buffer_memory: int
    compression: Compression
    max_request_size: int
    max_in_flight: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    max_block_ms: int
    metadata_max_age_ms: int

    @classmethod
    def make(
        cls, *, acks: int | str, compression_type: str | None, **values: int
    ) -> ProducerConfig:
        if acks == "all":
            acks = -1
        if acks not in (0, 1, -1):
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        if compression_type not in _CODECS:
            raise ValueError(
                f"compression_type must be None, 'gzip', 'snappy', 'lz4' or 'zstd', "
                f"not {compression_type!r}"
            )
        for name, value in values.items():
            if value < 0 or (value == 0 and name in ("batch_size", "max_in_flight")):
                raise ValueError(f"{name} must be positive, not {value}")
        return cls(acks=int(acks), compression=_CODECS[compression_type], **values)


def as_bytes(data: Any, what: str) -> bytes:
    """A key or value that is not ``bytes`` (nor ``None``) as ``bytes``: a ``bytearray`` or a
    ``memoryview`` is copied. Raises ``TypeError`` for anything else (serialize it first)."""
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"{what} must be bytes or None, not {type(data).__name__} (serialize it first)")


class TopicPartitionCounts:
    """The producer's metadata cache: the partition count of every topic it has sent to.

    Refreshed every ``metadata_max_age_ms`` (Kafka's ``metadata.max.age.ms``) so that
    partitions added while the producer runs get records: the driver asks :meth:`due` after
    sending, and if it answers, asks the broker about :attr:`counts`' topics and hands the
    answer to :meth:`update`. Not thread-safe by itself: the blocking producer calls it from
    its sender thread (``send`` only reads :attr:`counts`), the async one from its tasks."""

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


def retry_at_s(
    config: ProducerConfig, batch: Batch, error: BaseException, now_s: float
) -> float | None:
    """When to send ``batch`` again after ``error``, or ``None`` if it must fail: the error is
    not retriable, the batch has had ``retries`` retries, or the backoff (``retry_backoff_ms``
    doubling per attempt up to ``retry_backoff_max_ms``) would end past its delivery
    deadline (``delivery_timeout_ms`` after it was created)."""
    if not getattr(error, "retriable", False) or batch.attempts > config.retries:
        return None
    delay_ms = backoff_ms(batch.attempts - 1, config.retry_backoff_ms, config.retry_backoff_max_ms)
    at_s = now_s + delay_ms / 1000
    return at_s if at_s < batch.deadline_s else None


def topic_error(topic: str, info: TopicMetadata | None) -> KafkaError | None:
    """The error that keeps records from being sent to ``topic``, if any."""
    if info is None:
        return for_code(3, f"topic {topic!r} missing from the metadata response")
    if info.error_code:
        return for_code(info.error_code, f"topic {topic!r}")
    if not info.partitions:
        return for_code(5, f"topic {topic!r} has no partitions yet")
    return None


def handle_produce_response(
    batches: list[Batch], response: Any, error: BaseException | None
) -> Iterator[tuple[Batch, BaseException | None]]:
    """Complete every successful batch; yield ``(batch, None)`` for those and
    ``(batch, error)`` for the failed ones (the caller retries or fails them).

    ``response`` is ``None`` with ``error`` for a failed request, and ``None`` without an error
    for acks=0 (the batches complete with offset -1)."""
    if error is not None:
        for batch in batches:
            yield batch, error
        return
    if response is None:
        for batch in batches:
            batch.complete()
            yield batch, None
        return
    assert isinstance(response, m.ProduceResponse)
    if response.error_code:
        top = for_code(response.error_code, response.error_message)
        for batch in batches:
            yield batch, top
        return
    results = {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}
    for batch in batches:
        part = results.get(batch.tp)
        if part is None:
            yield batch, for_code(-1, f"no result for {batch.tp} in the Produce response")
        elif part.error_code:
            yield (
                batch,
                for_code(
                    part.error_code, f"{batch.tp.topic}-{batch.tp.partition}: {part.error_message}"
                ),
            )
        else:
            batch.complete(part.base_offset, part.log_append_time_ms)
            yield batch, None
