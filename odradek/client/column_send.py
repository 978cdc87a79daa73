"""``Producer.send_columns``: many records from Arrow-layout columns, a batch at a time.

The bulk twin of ``send()`` for callers that already hold their records as columns (the Spark
sink): the values and keys of the rows named by ``rows`` are encoded straight from the
column buffers into the partition's open batch by ``RecordBuffer.extend`` (C, or its
pure-Python twin; :mod:`odradek.client.record_buffer`), so no Python object is made per record.
The rules are ``send()``'s, per batch instead of per record:

1. The partition is the given one, or (``None``) the default partitioner's sticky choice for
   the topic, which moves on each time a batch of the topic closes (KIP-480), as for null-key
   records sent one by one.
2. Under the producer's append lock, take the partition's open batch (a lock-free *tail*
   batch is first owned and closed, so the two paths never share a batch), append rows up to
   ``batch_size`` of estimated bytes, count them in ``buffered_bytes``; when rows are left,
   close the batch and go on with a new one (step 1 again).
3. Before each batch, wait while ``buffer_memory`` is full (up to ``max_block_ms``), as
   ``send()`` does.

One :class:`~odradek.client.accumulator.RecordFuture` per batch used (its first record's)
is returned: a batch succeeds or fails as a whole. Records carry no headers and the time of
the call as their timestamp. A record above ``max_request_size`` is not refused here: it
goes alone in a batch and the broker answers MESSAGE_TOO_LARGE through its future.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from odradek.client.accumulator import record_future
from odradek.client.errors import KafkaError, UnknownTopicOrPartitionError  # type: ignore[attr-defined]
from odradek.client.record_buffer import Column
from odradek.client.types import TopicPartition

if TYPE_CHECKING:
    from odradek.client.producer import Producer

__all__ = ["send_columns"]


def send_columns(
    producer: Producer,
    topic: str,
    partition: int | None,
    values: Column | None,
    keys: Column | None,
    rows: Any,
) -> list[Future[Any]]:
    """Queue the records of ``rows`` (a buffer of int64 row numbers into the columns); see
    the module docstring. Raises what ``send()`` would put in a failed future: an unknown
    topic, a partition out of range, a closed producer."""
    count = producer._partition_counts.get(topic)
    if count is None:
        count = producer._wait_for_topic(topic)
    if partition is not None and not 0 <= partition < count:
        raise UnknownTopicOrPartitionError(f"{topic} has {count} partitions, not {partition}")
    total = len(memoryview(rows).cast("B")) // 8
    timestamp_ms = time.time_ns() // 1_000_000
    acc = producer._acc
    futures: list[Future[Any]] = []
    start = 0
    held = False  # the last try found the tail held by a lock-free append
    while start < total:
        if held:
            time.sleep(0)  # let that append finish (it needs the GIL, not our lock)
            held = False
        if acc.buffered_bytes >= producer._buffer_memory:
            with producer._lock:
                producer._wait_for_memory()
        with producer._append_lock:
            if producer._closing:
                raise KafkaError("producer is closed")
            target = partition
            if target is None:
                sticky = producer._sticky
                target = sticky.get(topic) if sticky is not None else None
                if target is None:
                    target = producer._partitioner.partition(topic, None, count)
            batch = acc.open.get((topic, target))
            if batch is not None and batch.is_tail:
                if not acc.own_tail(batch):
                    held = True
                    continue
                acc.close(batch)
                batch = None
            fresh = False
            if batch is None:
                batch = acc.new_batch(TopicPartition(topic, target), time.monotonic())
                fresh = True
            records = batch.records
            first, before = len(records), records.size_bytes
            start = records.extend(values, keys, rows, start, timestamp_ms, producer._batch_size)
            added = records.size_bytes - before
            batch.accounted_bytes += added
            acc.buffered_bytes += added
            if len(records) > first:
                futures.append(record_future(batch, first))
            if start < total:
                acc.close(batch)  # full: the next rows go to a new batch
        if fresh or start < total:
            with producer._lock:
                producer._wake.notify()
    return futures
