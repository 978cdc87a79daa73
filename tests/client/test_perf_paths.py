"""The client's record paths against the reference codec in :mod:`odradek.protocol.records`.

The consumer decodes a batch a record at a time (:mod:`odradek.client.record_decoder`, or the C
decoder it twins: ``make test`` runs this file on both), reading varints of one and two bytes
inline; the producer encodes whole columns (:func:`odradek.client.accumulator.encode_batch`).
Hypothesis generates batches that cross every boundary those paths care about (offset deltas of
1, 2 and 3 bytes, timestamp deltas of 1 and more bytes, a record of another size among
same-size ones, null keys and values, headers, gaps in the offset deltas as compaction leaves
them)."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.client import CorruptRecordError
from odradek.client.accumulator import Batch, encode_batch
from odradek.client.records import iter_records
from odradek.client.types import TopicPartition
from odradek.protocol.batch_builder import encode_batch as reference_encode
from odradek.protocol.record_batch import recompute_crc
from odradek.protocol.records import decode_records
from odradek.protocol.varint import encode_varint

Row = tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]

_TAIL = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiibI")


def _payload(draw: st.DrawFn, size: int) -> bytes:
    seed = draw(st.integers(0, 255))
    return bytes((seed + i) & 0xFF for i in range(size))


@st.composite
def rows(draw: st.DrawFn) -> list[Row]:
    """Mostly same-size records (as a producer makes them), with a few of everything else."""
    count = draw(st.sampled_from([1, 7, 8, 63, 64, 65, 200, 8191, 8193, 8300]))
    value_size = draw(st.sampled_from([0, 1, 63, 64, 100, 300]))
    key_size = draw(st.sampled_from([None, 0, 4, 70]))
    ts_step = draw(st.sampled_from([0, 0, 1, 7]))  # deltas above 63 take two bytes
    odd = set(draw(st.lists(st.integers(0, count - 1), max_size=3)))
    out: list[Row] = []
    for i in range(count):
        value: bytes | None = _payload(draw, value_size) if i % 97 else bytes(value_size)
        key = None if key_size is None else bytes((i + j) & 0xFF for j in range(key_size))
        headers: list[tuple[str, bytes | None]] = []
        if i in odd:
            kind = draw(st.sampled_from(["null value", "bigger", "headers", "null key", "ts"]))
            if kind == "null value":
                value = None
            elif kind == "bigger":
                value = bytes(value_size + 200)
            elif kind == "headers":
                headers = [("h", b"x"), ("n", None)]
            elif kind == "null key":
                key = None
            else:
                out.append((key, value, 1_700_000_000_000 + 10_000_000, headers))
                continue
        out.append((key, value, 1_700_000_000_000 + (i * ts_step) // 3, headers))
    return out


def _decoded(data: bytes, position: int = 0) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.timestamp, r.key, r.value)
        for r in iter_records("t", 0, memoryview(data), position)
    ]


def _reference(data: bytes, position: int = 0) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.timestamp_ms, r.key, r.value)
        for r in decode_records(data)
        if r.offset >= position
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows(), st.integers(0, 10))
def test_decoding_matches_the_reference_decoder(records: list[Row], position: int) -> None:
    data = reference_encode([(k, v, ts, h) for k, v, ts, h in records], base_offset=3)
    assert _decoded(data, position) == _reference(data, position)
    got = list(iter_records("t", 0, memoryview(data), 0))
    assert [r.headers for r in got] == [list(h) for _, _, _, h in records]


def _batch_with_gaps(records: list[Row], keep: list[bool]) -> bytes:
    """A batch whose records keep their offset deltas but some are missing (compaction)."""
    parts = []
    base_ts = records[0][2]
    kept = [(i, r) for i, r in enumerate(records) if keep[i % len(keep)]] or [(0, records[0])]
    for delta, (key, value, ts, _) in kept:
        body = b"\x00" + encode_varint(ts - base_ts) + encode_varint(delta)
        body += encode_varint(-1) if key is None else encode_varint(len(key)) + key
        body += encode_varint(-1) if value is None else encode_varint(len(value)) + value
        body += b"\x00"
        parts.append(encode_varint(len(body)) + body)
    body = b"".join(parts)
    max_ts = max(r[2] for _, r in kept)
    tail = _TAIL.pack(0, len(records) - 1, base_ts, max_ts, -1, -1, -1, len(kept))
    crc = crc32c(body, crc32c(tail))
    return _PREFIX.pack(0, 49 + len(body), -1, 2, crc) + tail + body


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows(), st.lists(st.booleans(), min_size=1, max_size=5))
def test_compacted_batches_keep_their_offsets(records: list[Row], keep: list[bool]) -> None:
    data = _batch_with_gaps(records, keep)
    assert _decoded(data) == _reference(data)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows())
def test_the_producer_encoder_matches_the_reference_encoder(records: list[Row]) -> None:
    batch = Batch(TopicPartition("t", 0), 0.0, 1.0)
    for key, value, ts, headers in records:
        batch.records.append(value, key, ts, headers)
    expected = reference_encode([(k, v, ts, h) for k, v, ts, h in records])
    assert b"".join(encode_batch(batch)) == expected


def test_a_corrupt_record_among_same_size_ones_is_reported() -> None:
    records = [(None, bytes(100), 1_700_000_000_000)] * 100
    data = bytearray(reference_encode(records))
    # record 50's header count (its last byte) claims one header: the body no longer parses
    data[len(reference_encode(records[:51])) - 1] = 2
    recompute_crc(data)
    with pytest.raises(CorruptRecordError):
        list(iter_records("t", 0, memoryview(bytes(data)), 0))
