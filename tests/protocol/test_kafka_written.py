"""Segments written by a real Apache Kafka broker parse exactly as its README says.

The fixtures live in ``tests/testdata/kafka-written/``.
"""

from __future__ import annotations

import itertools
import struct

import pytest
from kafka.record._crc32c import crc as kafka_crc32c
from kafka.record.default_records import DefaultRecordBatch

from odradek.protocol.record_batch import (
    BatchHeader,
    Compression,
    CorruptRecordError,
    TimestampType,
    validate_batch,
)
from odradek.protocol.records import Record, decode_records
from tests.testdata import kafka_written_dir

# From the README beside the files: bytes, then (base offset, record count) per batch.
EXPECTED = {
    "cluster-metadata-a.log": (258, [(1, 1), (2, 2)]),
    "cluster-metadata-b.log": (331, [(0, 1), (1, 3)]),
}


def read_segment(name: str) -> bytes:
    return (kafka_written_dir() / name).read_bytes()


def scan(data: bytes) -> list[tuple[BatchHeader, list[Record]]]:
    batches = []
    pos = 0
    while pos < len(data):
        header = validate_batch(data, pos)
        batches.append((header, decode_records(data[pos : pos + header.size_bytes])))
        pos += header.size_bytes
    assert pos == len(data)
    return batches


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_batch_parses_with_the_documented_offsets(name: str) -> None:
    data = read_segment(name)
    size, layout = EXPECTED[name]
    assert len(data) == size
    batches = scan(data)
    assert [(h.base_offset, h.record_count) for h, _ in batches] == layout
    for header, records in batches:
        assert header.magic == 2
        assert header.compression is Compression.NONE
        assert header.timestamp_type is TimestampType.CREATE_TIME
        assert not header.is_control
        assert not header.is_transactional
        assert header.producer_id == -1
        assert header.last_offset_delta == header.record_count - 1
        assert header.last_offset == header.base_offset + header.record_count - 1
        assert [r.offset for r in records] == list(
            range(header.base_offset, header.last_offset + 1)
        )
        assert all(r.key is None for r in records)  # KRaft metadata records have null keys
        assert all(isinstance(r.value, bytes) and r.value for r in records)
        assert all(r.headers == () for r in records)
        assert all(r.timestamp_ms == header.base_timestamp for r in records)
    # Offsets are contiguous across batches.
    for (before, _), (after, _) in itertools.pairwise(batches):
        assert after.base_offset == before.next_offset


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_crc_is_valid_by_an_independent_crc32c(name: str) -> None:
    data = read_segment(name)
    pos = 0
    while pos < len(data):
        (batch_length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + batch_length
        (stored,) = struct.unpack_from(">I", data, pos + 17)
        assert stored == kafka_crc32c(data[pos + 21 : end])
        parsed = DefaultRecordBatch(data[pos:end])
        assert parsed.validate_crc()
        assert [r.offset for r in parsed] == [r.offset for r in decode_records(data[pos:end])]
        pos = end
    assert pos == len(data)


def test_kraft_record_contents() -> None:
    # Each value is a KRaft metadata record: frame version 1, api key, version, fields.
    (first, first_records), (_, topic_records) = scan(read_segment("cluster-metadata-a.log"))
    assert first.base_timestamp == first.max_timestamp == 1726045943832
    feature = first_records[0].value
    assert feature == b"\x01\x0c\x00\x11metadata.version\x00\x14\x00"  # FeatureLevelRecord 20
    topic, partition = (r.value for r in topic_records)
    assert topic is not None and partition is not None
    assert topic[:3] == b"\x01\x02\x00"  # TopicRecord
    assert topic[3:8] == b"\x05pear"  # compact string: length + 1, then the name
    assert partition[:3] == b"\x01\x03\x01"  # PartitionRecord v1
    _, (_, records_b) = scan(read_segment("cluster-metadata-b.log"))
    assert [r.value[:3] for r in records_b if r.value] == [
        b"\x01\x02\x00",
        b"\x01\x03\x01",
        b"\x01\x03\x01",
    ]
    assert records_b[0].value is not None and records_b[0].value[3:7] == b"\x04saz"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_damaged_copies_are_caught(name: str) -> None:
    data = read_segment(name)
    # Every truncation inside the last batch, and a flipped bit in every CRC-covered byte of
    # the first batch, is reported as corrupt.
    first = validate_batch(data)
    last_start = first.size_bytes
    for cut in range(last_start + 1, len(data)):
        with pytest.raises(CorruptRecordError):
            validate_batch(data[:cut], last_start)
    for position in range(21, first.size_bytes):
        damaged = bytearray(data)
        damaged[position] ^= 0x10
        with pytest.raises(CorruptRecordError, match="CRC mismatch"):
            validate_batch(damaged)
        validate_batch(damaged, last_start)  # the other batch is untouched
