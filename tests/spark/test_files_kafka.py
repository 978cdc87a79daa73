"""The file-backed reader on directories no odradek broker wrote as they are: Apache Kafka's own
segments, torn tails, aborted transactions, files a crash leaves behind, stale indexes."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import ATTR_CONTROL, parse_batch_header, recompute_crc
from odradek.protocol.records import decode_records
from tests.spark.files_support import load_files, rows, snapshot

pytestmark = pytest.mark.slow

KAFKA_WRITTEN = Path(__file__).resolve().parent.parent / "testdata" / "kafka-written"
T0 = 1_700_000_000_000


def batch(base: int, count: int, **options: Any) -> bytes:
    records = [(b"k%d" % (base + j), b"v%d" % (base + j), T0 + base + j) for j in range(count)]
    return encode_batch(records, base_offset=base, **options)


def control(base: int, producer_id: int, commit: bool) -> bytes:
    """A transaction marker: control record key (version 0, type 0 abort / 1 commit)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    data = bytearray(
        encode_batch(
            [(key, value, T0)],
            base_offset=base,
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=-1,
            transactional=True,
        )
    )
    struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | ATTR_CONTROL)
    recompute_crc(data)
    return bytes(data)


def segment(directory: Path, base: int, *batches: bytes, suffix: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{base:020d}.log{suffix}"
    path.write_bytes(b"".join(batches))
    return path


def offsets_of(df: Any) -> list[int]:
    return [r[2] for r in rows(df)]


def test_reads_segments_written_by_apache_kafka(spark: Any, tmp_path: Path) -> None:
    first, second = tmp_path / "r1", tmp_path / "r2"
    (first / "__cluster_metadata-0").mkdir(parents=True)
    (second / "kraft-0").mkdir(parents=True)
    shutil.copy(
        KAFKA_WRITTEN / "cluster-metadata-b.log",
        first / "__cluster_metadata-0" / "00000000000000000000.log",
    )
    shutil.copy(
        KAFKA_WRITTEN / "cluster-metadata-a.log", second / "kraft-0" / "00000000000000000000.log"
    )
    before = snapshot([first, second])
    for _root, topic, name, expected_offsets in [
        (first, "__cluster_metadata", "cluster-metadata-b.log", [0, 1, 2, 3]),
        (second, "kraft", "cluster-metadata-a.log", [1, 2, 3]),
    ]:
        data = (KAFKA_WRITTEN / name).read_bytes()
        expected = []
        position = 0
        while position < len(data):  # the README's batches, decoded by the protocol codec
            header = parse_batch_header(data, position)
            for r in decode_records(data[position : position + header.size_bytes]):
                expected.append((topic, 0, r.offset, r.key, r.value))
            position += header.size_bytes
        df = load_files(spark, [first, second], subscribe=topic)
        assert rows(df) == expected
        assert [r[2] for r in expected] == expected_offsets
        assert all(r[3] is None and r[4] for r in expected)  # null keys, binary values
    assert snapshot([first, second]) == before
    # subscribePattern leaves internal topics out, as Kafka's exclude.internal.topics does.
    assert offsets_of(load_files(spark, [first, second], subscribePattern=".*")) == [1, 2, 3]


def test_a_torn_tail_is_never_read(spark: Any, tmp_path: Path) -> None:
    part = tmp_path / "logs" / "torn-0"
    whole = [batch(0, 3), batch(3, 3), batch(6, 3)]
    last = batch(9, 3)
    # A half-written last batch, as a crash or a write in progress leaves it.
    segment(part, 0, *whole, last[: len(last) // 2])
    assert offsets_of(load_files(spark, [tmp_path / "logs"], subscribe="torn")) == list(range(9))
    # A last batch of the right length whose bytes never reached the disk (zeros): bad CRC.
    holed = last[:61] + bytes(len(last) - 61)
    segment(part, 0, *whole, holed)
    assert offsets_of(load_files(spark, [tmp_path / "logs"], subscribe="torn")) == list(range(9))
    # A preallocated index of the active segment (zero entries at its end), plus a stale entry
    # that points past the torn tail: neither changes what is read.
    complete_bytes = sum(len(b) for b in whole)
    index = struct.pack(">ii", 8, len(whole[0]) + len(whole[1]))
    index += struct.pack(">ii", 11, complete_bytes + 4)
    (part / "00000000000000000000.index").write_bytes(index + bytes(1 << 20))
    (part / "00000000000000000000.timeindex").write_bytes(bytes(12 << 10))
    df = load_files(spark, [tmp_path / "logs"], subscribe="torn", endingOffsets="latest")
    assert offsets_of(df) == list(range(9))
    # A torn tail in a segment that is not the last: Kafka's recovery would cut there and
    # delete the later segments, so they are not read.
    segment(part, 9, batch(9, 3))
    assert offsets_of(load_files(spark, [tmp_path / "logs"], subscribe="torn")) == list(range(9))


def test_aborted_transactions_and_markers_are_skipped(spark: Any, tmp_path: Path) -> None:
    part = tmp_path / "logs" / "txn-0"
    segment(
        part,
        0,
        batch(0, 3, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
        batch(3, 2, producer_id=8, producer_epoch=0, base_sequence=0, transactional=True),
        control(5, 7, commit=False),
        control(6, 8, commit=True),
        batch(7, 2),
    )
    # Kafka's .txnindex: version, producer id, first offset, last offset, last stable offset.
    (part / "00000000000000000000.txnindex").write_bytes(struct.pack(">hqqqq", 0, 7, 0, 5, 0))
    roots = [tmp_path / "logs"]
    assert offsets_of(load_files(spark, roots, subscribe="txn")) == [3, 4, 7, 8]
    uncommitted = load_files(
        spark, roots, subscribe="txn", **{"isolation.level": "read_uncommitted"}
    )
    assert offsets_of(uncommitted) == [0, 1, 2, 3, 4, 7, 8]  # markers are never rows


def test_files_a_crash_leaves_behind(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    part = root / "left-0"
    segment(part, 0, *(batch(i, 1) for i in range(10)))
    segment(part, 10, *(batch(i, 1) for i in range(10, 15)))
    segment(part, 15, batch(15, 2), suffix=".deleted")  # retention already removed it
    (part / "00000000000000000100.index").write_bytes(struct.pack(">ii", 1, 1))  # orphan
    (part / "00000000000000000100.timeindex").write_bytes(bytes(12))
    (root / "left-1.0123456789abcdef0123456789abcdef-delete").mkdir()  # a deleted topic's
    assert offsets_of(load_files(spark, [root], subscribe="left")) == list(range(15))
    # A finished cleaning pass that crashed before its swap was renamed: the swap replaces
    # the live segments of its range, as recovery would.
    segment(part, 0, batch(2, 1), batch(5, 1), batch(14, 1), suffix=".swap")
    assert offsets_of(load_files(spark, [root], subscribe="left")) == [2, 5, 14]
    # An unfinished pass (a .cleaned at or below the swap): the swap is ignored.
    segment(part, 0, batch(3, 1), suffix=".cleaned")
    assert offsets_of(load_files(spark, [root], subscribe="left")) == list(range(15))


def test_legacy_message_sets_of_kafka_before_0_11(spark: Any, tmp_path: Path) -> None:
    """v0 and v1 messages, plain and in gzip / snappy / lz4 wrappers (built by kafka-python),
    then a v2 batch: the offsets, keys, values and timestamps the protocol codec decodes."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    from odradek.protocol.legacy import decode_legacy_records

    def legacy(magic: int, codec: int, base: int, count: int) -> bytes:
        builder = LegacyRecordBatchBuilder(magic, codec, 1 << 30)
        for o in range(base, base + count):
            assert builder.append(o, T0 + o, b"k%d" % o, b"v%d" % o) is not None
        data = bytes(builder.build())
        if codec:  # a broker gives a wrapper its last inner offset (bytes 0..7, outside the CRC)
            data = struct.pack(">q", base + count - 1) + data[8:]
        return data

    entries = [
        legacy(0, 0, 0, 2),
        legacy(1, 0, 2, 2),
        legacy(1, 1, 4, 3),  # gzip wrapper
        legacy(1, 2, 7, 2),  # snappy wrapper
        legacy(1, 3, 9, 2),  # lz4 wrapper (v1: the fixed framing)
    ]
    expected = []
    for data in entries:
        position = 0
        while position < len(data):  # a plain set holds one message per entry
            size = struct.unpack_from(">i", data, position + 8)[0] + 12
            for r in decode_legacy_records(data[position : position + size]):
                expected.append((r.offset, r.key, r.value, r.timestamp_ms * 1000))
            position += size
    assert [e[0] for e in expected] == list(range(11))
    segment(tmp_path / "logs" / "old-0", 0, *entries, batch(11, 2))
    df = load_files(spark, [tmp_path / "logs"], subscribe="old")
    got = df.selectExpr("offset", "key", "value", "unix_micros(timestamp)").collect()
    assert sorted(tuple(r) for r in got) == [
        *expected,
        *((o, b"k%d" % o, b"v%d" % o, (T0 + o) * 1000) for o in (11, 12)),
    ]
    assert df.where("offset >= 4").count() == 9  # the count-only path over wrappers
