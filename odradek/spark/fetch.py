"""Executor side of a read: one offset range of one topic-partition → Arrow record batches.

Each Spark task opens one blocking :class:`odradek.client.Client` and fetches its range with
``fetch_raw``; the raw RecordBatch bytes go straight to :func:`decode_fetch` (columnar, no
per-record request/response, no per-record Python objects for keys and values). The loop:

1. Fetch from ``position`` (at most ``fetch.max.bytes`` per request); decode the complete
   batches, keep the records in ``[position, until_offset)``, yield them, and move
   ``position`` to the offset after the last complete batch.
2. No complete batch and the high watermark above ``position``: the next batch is larger than
   the per-partition limit; double the limit and fetch again.
3. No data at all (high watermark at or below ``position``): long-poll until the planned end
   shows up, for at most ``kafkaConsumer.pollTimeoutMs``, then fail with a clear error.
4. ``OFFSET_OUT_OF_RANGE`` (retention or DeleteRecords moved the log start past
   ``position``): with ``failOnDataLoss`` the task fails with :class:`DataLossError`; without
   it the read skips to the new log start offset (and ends if that is past the range).

The task never reads past ``until_offset``, so a range is read exactly once per attempt; a
retried task re-reads the same range (Spark's at-least-once input with exactly-once output
by the sink's own idempotence, as with Spark's Kafka source).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa

from odradek.client import Client, KafkaError, TopicPartition
from odradek.client.errors import OffsetOutOfRangeError
from odradek.spark.decode import decode_fetch
from odradek.spark.metadata import report_data_loss
from odradek.spark.option_values import EARLIEST
from odradek.spark.options import ReadOptions
from odradek.spark.planning import OffsetRange

__all__ = ["read_range"]

_MAX_WAIT_MS = 500
_LARGEST_PARTITION_FETCH_BYTES = 1 << 30


def read_range(options: ReadOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``offset_range`` as Arrow batches in the Kafka source's schema."""
    with Client(options.bootstrap_servers, **dict(options.client_options)) as client:
        yield from _read(client, options, offset_range)


def _read(
    client: Client, options: ReadOptions, offset_range: OffsetRange
) -> Iterator[pa.RecordBatch]:
    topic, partition = offset_range.topic, offset_range.partition
    tp = TopicPartition(topic, partition)
    until = offset_range.until_offset
    position = offset_range.from_offset
    partition_max_bytes = options.fetch_max_bytes
    timeout_s = options.poll_timeout_ms / 1000
    deadline = time.monotonic() + timeout_s
    while position < until:
        fetched = client.fetch_raw(
            {tp: position},
            max_wait_ms=_MAX_WAIT_MS,
            max_bytes=partition_max_bytes,
            partition_max_bytes=partition_max_bytes,
        )[tp]
        if fetched.error is not None:
            if isinstance(fetched.error, OffsetOutOfRangeError):
                position = _skip_lost(client, options, tp, position, until)
                continue
            raise _as_exception(fetched.error, f"fetching {topic}-{partition} at {position}")
        batches, next_offset = decode_fetch(
            fetched.records,
            topic=topic,
            partition=partition,
            from_offset=position,
            until_offset=until,
            include_headers=options.include_headers,
        )
        yield from batches
        if next_offset > position:
            position = next_offset
            deadline = time.monotonic() + timeout_s
            continue
        if fetched.high_watermark > position and len(fetched.records):
            if partition_max_bytes >= _LARGEST_PARTITION_FETCH_BYTES:
                raise RuntimeError(
                    f"{topic}-{partition}: the record batch at offset {position} is larger "
                    f"than {partition_max_bytes} bytes"
                )
            partition_max_bytes *= 2
            continue
        if fetched.log_start_offset is not None and fetched.log_start_offset > position:
            position = _skip_lost(client, options, tp, position, until)
            continue
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{topic}-{partition}: no record at offset {position} after "
                f"{options.poll_timeout_ms} ms (high watermark {fetched.high_watermark}, "
                f"the range ends at {until}); set kafkaConsumer.pollTimeoutMs to wait longer"
            )


def _skip_lost(
    client: Client, options: ReadOptions, tp: TopicPartition, position: int, until: int
) -> int:
    """Where to go on after ``position`` was deleted (or fail, with ``failOnDataLoss``)."""
    earliest_answer = client.list_offsets({tp: EARLIEST})[tp]
    earliest = getattr(earliest_answer, "offset", None)
    # Past the log start: the records were deleted. At or before it: the log end went back
    # below ``position`` (the topic was recreated or truncated), so the rest of the range is gone.
    resume = min(earliest, until) if earliest is not None and earliest > position else until
    report_data_loss(
        options.fail_on_data_loss,
        f"Cannot fetch offset {position} of {tp.topic}-{tp.partition} (its earliest offset is "
        f"now {earliest}): offsets {position} to {resume - 1} are lost.",
    )
    return resume


def _as_exception(error: object, doing: str) -> BaseException:
    if isinstance(error, BaseException):
        return error
    return KafkaError(f"{doing}: {error}")  # type: ignore[call-arg]
