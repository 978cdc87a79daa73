"""What a Produce answer means for its batches (:func:`handle_produce_response`) and when a
failed one is sent again (:func:`retry_at_s`), for both faces: ``ProducerCore._complete`` calls
them (no I/O here).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from odradek.client.accumulator import Batch
from odradek.client.config import ProducerConfig
from odradek.client.errors import for_code
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

__all__ = ["handle_produce_response", "retry_at_s"]


def handle_produce_response(
    batches: list[Batch], response: Any, error: BaseException | None
) -> Iterator[tuple[Batch, BaseException | None]]:
    """Complete every successful batch; yield ``(batch, None)`` for those and
    ``(batch, error)`` for the failed ones (the caller retries or fails them).

    ``response`` is ``None`` with ``error`` for a failed request (it fails every batch), and
    ``None`` without an error for acks=0 (the batches complete with offset -1)."""
    if response is not None and response.error_code:  # the whole request failed
        error = for_code(response.error_code, response.error_message)
    if error is not None or response is None:  # failed, or acks=0: offsets unknown
        for batch in batches:
            if error is None:
                batch.complete()
            yield batch, error
        return
    assert isinstance(response, m.ProduceResponse)
    results = {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}
    for batch in batches:
        part = results.get(batch.tp)
        if part is None:
            error = for_code(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"no result for {batch.tp} in the Produce response"
            )
        elif part.error_code:
            error = for_code(
                part.error_code, f"{batch.tp.topic}-{batch.tp.partition}: {part.error_message}"
            )
        else:
            batch.complete(part.base_offset, part.log_append_time_ms)
            error = None
        yield batch, error


def retry_at_s(
    config: ProducerConfig, batch: Batch, error: BaseException, now_s: float
) -> float | None:
    """When to send ``batch`` again after ``error``, or ``None`` if it must fail: the error is
    not retriable, the batch has had ``retries`` retries, or the backoff (``retry_backoff_ms``
    doubling per attempt up to ``retry_backoff_max_ms``) would end past its delivery
    deadline (``delivery_timeout_ms`` after it was created), or it has failed already (its
    deadline passed while it was in flight)."""
    if batch.is_done or not getattr(error, "retriable", False) or batch.attempts > config.retries:
        return None
    at_s = now_s + config.backoff_s(batch.attempts - 1)
    return at_s if at_s < batch.deadline_s else None
