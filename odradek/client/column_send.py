"""``Producer.send_columns``: many records from Arrow-layout columns, a batch at a time.

The bulk twin of ``send()`` for callers that already hold their records as columns (the Spark
sink): the values and keys of the rows named by ``rows`` are encoded straight from the
column buffers into the partition's open batch by ``RecordBuffer.extend`` (C, or its
pure-Python twin; :mod:`odradek.client.record_buffer`), so no Python object is made per record.
The rules are ``send()``'s (the wait for ``buffer_memory`` included), per batch instead of per
record: each batch goes to the given partition or, if it is ``None``, to the one the configured
partitioner picks for a null key, asked again for each batch (the default partitioner's sticky
partition moves on each time a batch of the topic closes, KIP-480, as for null-key records
sent one by one).

One :class:`~odradek.client.futures.RecordFuture` per batch used (its first record's)
is returned: a batch succeeds or fails as a whole. Records carry no headers and the time of
the call as their timestamp. A record above ``max_request_size`` is not refused here: it
goes alone in a batch and the broker answers MESSAGE_TOO_LARGE through its future.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from odradek.client.errors import UnknownTopicOrPartitionError  # type: ignore[attr-defined]
from odradek.client.futures import record_future
from odradek.client.record_buffer import Column

if TYPE_CHECKING:
    from odradek.client.producer import Producer

__all__ = ["send_columns"]


def send_columns(
    self: Producer,
    topic: str,
    partition: int | None,
    values: Column | None,
    keys: Column | None,
    rows: Any,
) -> list[Future[Any]]:
    """``Producer.send_columns``: queue the records of ``rows`` (a buffer of int64 row numbers
    into the Arrow-layout columns ``values`` and ``keys``), a batch at a time; returns one
    future per batch used (see :mod:`odradek.client.column_send`). Raises what ``send()``
    would put in a failed future: an unknown topic, a partition out of range, a closed
    producer."""
    count = len(self.partitions_for(topic))
    if partition is not None and not 0 <= partition < count:
        raise UnknownTopicOrPartitionError(f"{topic} has {count} partitions, not {partition}")
    total = len(memoryview(rows).cast("B")) // 8
    timestamp_ms = time.time_ns() // 1_000_000
    acc = self._acc
    futures: list[Future[Any]] = []
    start = 0
    while start < total:
        with self._appending():
            target = (
                self._partitioner.partition(topic, None, count) if partition is None else partition
            )
            added = acc.add_columns(
                topic, target, (values, keys, rows), start, timestamp_ms, time.monotonic()
            )
        if added is None:  # the tail is held by a lock-free append: let it finish
            time.sleep(0)  # (it needs the GIL, not our lock)
            continue
        start, batch, first, fresh = added
        if len(batch.records) > first:
            futures.append(record_future(batch, first))
        if fresh or start < total:
            with self._lock:
                self._wake.notify()
    return futures
