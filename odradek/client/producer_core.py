"""Producer logic shared by the blocking and async producers: configuration and the
handling of Produce responses (pure functions, no I/O)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from odradek.client.accumulator import Batch
from odradek.client.errors import KafkaError, for_code
from odradek.client.types import TopicMetadata
from odradek.protocol import messages as m
from odradek.protocol.records import Compression

__all__ = ["ProducerConfig", "handle_produce_response", "topic_error"]

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
