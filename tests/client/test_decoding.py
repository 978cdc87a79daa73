"""The consumer's decoder on inputs a producer of ours never writes: legacy v0/v1 message sets
(kafka-python's builder as the oracle), control batches, corrupt batches."""

from __future__ import annotations

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from odradek.client import CorruptRecordError
from odradek.client.accumulator import Batch, encode_batch
from odradek.client.records import BatchCursor, iter_records
from odradek.client.types import TopicPartition
from odradek.protocol.record_batch import recompute_crc


def legacy(magic: int, codec: int, records: list[tuple[int, bytes | None, bytes]]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for offset, key, value in records:
        builder.append(offset, timestamp=1000 + offset if magic else None, key=key, value=value)
    data = bytearray(builder.build())
    if codec:  # a broker stores a wrapper under its last inner offset (not under the CRC)
        data[0:8] = records[-1][0].to_bytes(8, "big")
    return bytes(data)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2])  # none, gzip, snappy
def test_legacy_message_sets(magic: int, codec: int) -> None:
    records = [(i, None if i % 2 else b"k%d" % i, b"v%d" % i) for i in range(5)]
    data = legacy(magic, codec, records)
    got = list(iter_records("t", 0, memoryview(data), 2))
    assert [(r.offset, r.key, r.value) for r in got] == [(o, k, v) for o, k, v in records[2:]]
    assert [r.timestamp for r in got] == ([1002, 1003, 1004] if magic else [-1, -1, -1])
    assert all(r.headers == [] and r.timestamp_type == 0 for r in got)


def make_batch(count: int, base_ts: int = 50) -> bytearray:
    batch = Batch(TopicPartition("t", 0), 0.0, 1.0)
    for i in range(count):
        batch.records.append(b"%d" % i, None, base_ts + i, None)
    return bytearray(b"".join(encode_batch(batch)))


def test_control_batches_are_skipped_but_advance_the_position() -> None:
    control = make_batch(1)
    control[22] |= 0x20  # attributes low byte: the control bit
    recompute_crc(control)
    data = make_batch(3)
    data[0:8] = (1).to_bytes(8, "big")  # base offset 1, after the control batch at 0
    cursor = BatchCursor("t", 0, memoryview(bytes(control + data)), 0)
    assert cursor.next_records() == []
    assert cursor.position == 1
    records = cursor.next_records()
    assert records is not None and [r.offset for r in records] == [1, 2, 3]
    assert cursor.next_records() is None and cursor.position == 4


def test_a_partial_tail_stops_the_cursor_and_corruption_raises() -> None:
    data = bytes(make_batch(4))
    cursor = BatchCursor("t", 0, memoryview(data + data[:70]), 0)
    assert len(cursor.next_records() or []) == 4
    assert cursor.next_records() is None and cursor.position == 4
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        BatchCursor("t", 0, memoryview(bytes(corrupt)), 0).next_records()
