"""The accumulator's byte accounting (``buffered_bytes``, the ``buffer_memory`` bound): every
record's estimated bytes are counted once — at a locked append, or for bytes appended
lock-free to a tail, at the batch's next locked append or when it closes — and freed when its
batch settles."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from odradek.client.accumulator import Accumulator
from odradek.client.futures import RecordFuture
from odradek.client.record_buffer import RECORD_OVERHEAD_BYTES, TailAppender
from odradek.protocol.record_batch import Compression

VALUE = bytes(100)
SIZE = RECORD_OVERHEAD_BYTES + len(VALUE)  # a null-key record without headers


def _accumulator(batch_size: int = 10 * SIZE) -> Accumulator:
    return Accumulator(
        batch_size=batch_size,
        linger_s=60.0,
        delivery_timeout_s=60.0,
        compression=Compression.NONE,
        on_batch_closed=lambda tp: None,
    )


def _held_bytes(acc: Accumulator) -> int:
    return sum(b.size_bytes for b in acc.unfinished())


def test_locked_appends_are_counted_at_once_and_freed_on_settle() -> None:
    acc = _accumulator()
    acc.add("t", 0, b"k", VALUE, 0, None, SIZE + 1, 0.0)
    acc.add("t", 1, None, VALUE, 0, [("h", b"1")], 0, 0.0)
    assert acc.buffered_bytes == _held_bytes(acc) > 2 * SIZE
    acc.close_expired(0.0, force=True)
    assert acc.buffered_bytes == _held_bytes(acc)
    batches = acc.take_ready(0.0, 1 << 20)
    acc.settle([], batches)
    assert acc.buffered_bytes == 0


def test_lock_free_bytes_join_at_the_next_locked_append_or_the_close() -> None:
    acc = _accumulator()
    appender = TailAppender(acc.tails, acc.batch_size, RecordFuture)
    tail = acc.add("t", 0, None, VALUE, 0, None, SIZE, 0.0, True)[0]  # type: ignore[index]
    assert acc.tails["t"] is tail and acc.buffered_bytes == SIZE
    for _ in range(3):
        assert appender.append("t", VALUE) is not None
    assert acc.buffered_bytes == SIZE  # the lock-free path counts nothing itself
    again = acc.add("t", 0, None, VALUE, 5, None, SIZE, 0.0, True)  # a timestamp: locked
    assert again is not None and again[0] is tail
    assert acc.buffered_bytes == 5 * SIZE == tail.size_bytes
    assert appender.append("t", VALUE) is not None
    acc.close_expired(0.0, force=True)
    assert list(acc.ready) == [tail] and acc.buffered_bytes == 6 * SIZE == tail.size_bytes
    acc.settle([], [tail])
    assert acc.buffered_bytes == 0


def test_column_appends_are_counted_batch_by_batch() -> None:
    acc = _accumulator(batch_size=4 * SIZE)
    array = pa.array([VALUE] * 10, type=pa.binary())
    validity, offsets, data = array.buffers()
    columns = ((offsets, data, validity, array.offset), None, np.arange(10, dtype=np.int64))
    start = 0
    while start < 10:
        added = acc.add_columns("t", 0, columns, start, 0, 0.0)
        assert added is not None
        start = added[0]
        assert acc.buffered_bytes == _held_bytes(acc) == start * SIZE
    assert [len(b) for b in acc.ready] == [4, 4] and len(acc.open[("t", 0)]) == 2  # type: ignore[index]


def test_a_refused_column_append_opens_no_batch() -> None:
    """As a refused ``add``: columns that ``extend`` refuses leave no empty batch open (the
    next record opens a fresh one, and its ``fresh`` wakes the sender)."""
    acc = _accumulator(batch_size=4 * SIZE)
    bad = (("not", "a", "column", 0), None, np.arange(1, dtype=np.int64))
    with pytest.raises(TypeError):
        acc.add_columns("t", 0, bad, 0, 0, 0.0)
    assert ("t", 0) not in acc.open
    added = acc.add("t", 0, None, VALUE, 0, None, SIZE, 0.0)
    assert added is not None and added[2]  # fresh


def test_ready_batches_past_their_delivery_deadline_are_taken_and_freed() -> None:
    acc = _accumulator()  # linger and delivery timeout: 60 s
    first = acc.add("t", 0, None, VALUE, 0, None, SIZE, 0.0)[0]  # type: ignore[index]
    later = acc.add("t", 1, None, VALUE, 0, None, SIZE, 30.0)[0]  # type: ignore[index]
    acc.close_expired(30.0, force=True)
    assert acc.next_wakeup_s(40.0) == 20.0  # the first one's deadline
    assert acc.take_expired(59.0) == []
    assert acc.take_expired(60.0) == [first]  # wherever it waits: here, for a request slot
    assert list(acc.ready) == [later] and acc.buffered_bytes == later.size_bytes
