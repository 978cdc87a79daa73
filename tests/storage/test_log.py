"""Log: appends (offsets, validation, rolls, indexes), reads, timestamps, log start offset."""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import (
    ATTR_CONTROL,
    Compression,
    CorruptRecordError,
    TimestampType,
    parse_batch_header,
    recompute_crc,
    validate_batch,
)
from odradek.protocol.records import decode_records
from odradek.storage.errors import OffsetOutOfRangeError, RecordTooLargeError
from odradek.storage.log import Log
from odradek.storage.scan import scan_entries
from odradek.storage.segment import INT32_MAX
from odradek.storage.timestamp_lookup import offset_for_timestamp
from tests.storage.conftest import (
    all_records,
    append_all,
    batch,
    config,
    open_log,
    region_bytes,
    segment_files,
    split_batches,
)

_BASE_OFFSET = struct.Struct(">q")


def _batch_positions(log: Log) -> list[tuple[int, int, int, int]]:
    """``(segment base, position, base offset, last offset)`` of every stored batch."""
    out = []
    for segment in log.segments:
        data = os.pread(segment.file.fileno(), segment.size_bytes, 0)
        position = 0
        for raw in split_batches(data):
            header = parse_batch_header(raw)
            out.append((segment.base_offset, position, header.base_offset, header.last_offset))
            position += len(raw)
    return out


# -- appending: offsets and bytes ------------------------------------------------------------


def test_append_assigns_dense_offsets_and_stores_the_client_bytes(log_dir: Path) -> None:
    log = open_log(log_dir)
    sent = [batch(3, base_offset=77), batch(1, base_offset=5), batch(5, tag="x")]
    infos = [log.append(data, now_ms=0) for data in sent]

    assert [(i.first_offset, i.last_offset, i.record_count) for i in infos] == [
        (0, 2, 3),
        (3, 3, 1),
        (4, 8, 5),
    ]
    assert all(i.log_append_time_ms == -1 and not i.rolled for i in infos)
    assert [i.size_bytes for i in infos] == [len(d) for d in sent]
    assert log.next_offset == log.high_watermark == 9
    info = log.read(0, 1 << 20)
    assert info.high_watermark == 9 and info.log_start_offset == 0
    stored = split_batches(region_bytes(info.region))  # validates every CRC
    assert len(stored) == 3
    for raw, client, base in zip(stored, sent, (0, 3, 4), strict=True):
        assert raw[:8] == _BASE_OFFSET.pack(base)
        assert client[12:16] == b"\xff\xff\xff\xff"  # the client sent no leader epoch
        assert raw[8:12] == client[8:12] and raw[12:16] == b"\x00\x00\x00\x00"  # epoch 0
        assert raw[16:] == client[16:]  # never re-encoded
    assert [r.offset for r in all_records(log)] == list(range(9))
    assert os.path.getsize(log_dir / f"{0:020d}.log") == sum(map(len, sent))


def test_multi_batch_append_is_one_request(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append(batch(2), now_ms=0)
    request = batch(1, ts=5) + batch(3, ts=9) + batch(2, ts=7)
    info = log.append(bytearray(request), now_ms=0)
    assert (info.first_offset, info.last_offset, info.record_count) == (2, 7, 6)
    assert info.max_timestamp == 9
    stored = split_batches(region_bytes(log.read(2, 1 << 20).region))
    assert [parse_batch_header(b).base_offset for b in stored] == [2, 3, 6]
    assert [r.offset for r in all_records(log)] == list(range(8))


def _with_crc(data: bytes, patch) -> bytes:
    buf = bytearray(data)
    patch(buf)
    recompute_crc(buf)
    return bytes(buf)


def _zero_count(buf: bytearray) -> None:
    struct.pack_into(">i", buf, 57, 0)


def _control(buf: bytearray) -> None:
    struct.pack_into(">h", buf, 21, ATTR_CONTROL)


def _flip_body_byte(data: bytes) -> bytes:
    buf = bytearray(data)
    buf[70] ^= 0xFF
    return bytes(buf)


@pytest.mark.parametrize(
    ("name", "records", "error"),
    [
        ("bad crc", _flip_body_byte(batch(2)), CorruptRecordError),
        ("count 0", _with_crc(batch(1), _zero_count), CorruptRecordError),
        ("control batch", _with_crc(batch(1), _control), CorruptRecordError),
        ("over max.message.bytes", batch(1, value_bytes=600), RecordTooLargeError),
        ("garbage", os.urandom(300), CorruptRecordError),
        ("empty", b"", CorruptRecordError),
        ("truncated", batch(2)[:-1], CorruptRecordError),
        ("good then bad", batch(1) + _flip_body_byte(batch(1)), CorruptRecordError),
        ("good then garbage", batch(1) + b"\x00" * 20, CorruptRecordError),
        ("good then too large", batch(1) + batch(1, value_bytes=600), RecordTooLargeError),
        ("magic 1", b"\x00" * 16 + b"\x01" + batch(1)[17:], CorruptRecordError),
        ("over segment.bytes", batch(1, value_bytes=300) * 4, RecordTooLargeError),
    ],
)
def test_invalid_append_writes_nothing(
    log_dir: Path, name: str, records: bytes, error: type[Exception]
) -> None:
    log = open_log(log_dir, config(max_message_bytes=500, segment_bytes=1000))
    log.append(batch(2), now_ms=0)
    path = log_dir / f"{0:020d}.log"
    size_before = path.stat().st_size
    with pytest.raises(error):
        log.append(records, now_ms=0)
    assert path.stat().st_size == size_before, name
    assert log.next_offset == 2
    assert log.active_segment.size_bytes == size_before
    assert segment_files(log_dir) == [f"{0:020d}.log"]
    # and the log still takes good appends
    assert log.append(batch(1), now_ms=0).first_offset == 2


# -- rolling ---------------------------------------------------------------------------------


def test_roll_by_segment_bytes(log_dir: Path) -> None:
    size = len(batch(1))
    log = open_log(log_dir, config(segment_bytes=3 * size + 5))
    rolled = [log.append(batch(1), now_ms=0).rolled for _ in range(10)]
    assert rolled == [False, False, False, True, False, False, True, False, False, True]
    bases = [0, 3, 6, 9]
    for suffix in (".log", ".index", ".timeindex"):
        assert segment_files(log_dir, suffix) == [f"{b:020d}{suffix}" for b in bases]
    assert [s.base_offset for s in log.segments] == bases
    for segment, following in zip(log.segments, log.segments[1:], strict=False):
        assert segment.size_bytes == 3 * size  # never above segment.bytes
        assert segment.next_offset_from_data() == following.base_offset
        # rolled segments have trimmed indexes
        assert segment.offset_index.path.stat().st_size == len(segment.offset_index) * 8
        assert segment.time_index.path.stat().st_size == len(segment.time_index) * 12
    for base, _, first, _ in _batch_positions(log):
        assert first >= base
    assert [r.offset for r in all_records(log)] == list(range(10))


def test_append_that_fills_the_segment_exactly_does_not_roll(log_dir: Path) -> None:
    size = len(batch(1))
    log = open_log(log_dir, config(segment_bytes=2 * size))
    assert not log.append(batch(1), now_ms=0).rolled
    assert not log.append(batch(1), now_ms=0).rolled
    assert log.append(batch(1), now_ms=0).rolled
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_by_segment_ms_uses_batch_timestamps(log_dir: Path) -> None:
    log = open_log(log_dir, config(segment_ms=100), now_ms=0)
    far_future = 10**12  # the wall clock is irrelevant while batches carry timestamps
    assert not log.append(batch(1, ts=1000), now_ms=far_future).rolled
    assert not log.append(batch(1, ts=1050), now_ms=far_future).rolled
    assert not log.append(batch(1, ts=1100), now_ms=far_future).rolled  # waited 100: not > 100
    assert log.append(batch(1, ts=1101), now_ms=far_future).rolled
    assert not log.append(batch(1, ts=1150), now_ms=far_future).rolled
    assert log.append(batch(2, ts=[1000, 1202]), now_ms=0).rolled  # the batch max timestamp
    assert [s.base_offset for s in log.segments] == [0, 3, 5]


def test_roll_by_segment_ms_falls_back_to_the_clock_without_timestamps(log_dir: Path) -> None:
    log = open_log(log_dir, config(segment_ms=100), now_ms=5000)
    assert not log.append(batch(1, ts=-1), now_ms=5050).rolled
    assert not log.append(batch(1, ts=-1), now_ms=5100).rolled
    assert log.append(batch(1, ts=-1), now_ms=5101).rolled
    # the new segment's age counts from its creation
    assert not log.append(batch(1, ts=-1), now_ms=5201).rolled
    assert log.append(batch(1, ts=-1), now_ms=5202).rolled


def test_roll_when_the_offset_index_is_full(log_dir: Path) -> None:
    # 48 bytes: 6 offset entries; a constant timestamp leaves the time index at one entry.
    log = open_log(log_dir, config(segment_index_bytes=48, index_interval_bytes=0))
    rolled = [log.append(batch(1, ts=7), now_ms=0).rolled for _ in range(15)]
    assert rolled.count(True) == 2
    first = log.segments[0]
    assert first.offset_index.is_full and len(first.offset_index) == 6
    assert [s.base_offset for s in log.segments] == [0, 7, 14]
    assert [r.offset for r in all_records(log)] == list(range(15))


def test_roll_when_the_time_index_is_full(log_dir: Path) -> None:
    # 36 bytes: 3 time index slots, one kept for the roll: full at 2 entries.
    log = open_log(log_dir, config(segment_index_bytes=36, index_interval_bytes=0))
    for i in range(10):
        log.append(batch(1, ts=100 + i), now_ms=0)
    assert len(log.segments) > 1
    for segment in log.segments[:-1]:
        assert segment.time_index.is_full or segment.offset_index.is_full
        # the final entry written on roll holds the segment's max timestamp
        assert segment.time_index.last_entry[0] == segment.max_timestamp
    assert [r.offset for r in all_records(log)] == list(range(10))
    for i in range(10):
        assert offset_for_timestamp(log, 100 + i) == (i, 100 + i)


def test_tiny_segment_index_bytes_rolls_every_append(log_dir: Path) -> None:
    log = open_log(log_dir, config(segment_index_bytes=12, index_interval_bytes=0))
    for i in range(4):
        log.append(batch(1, ts=i), now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 1, 2, 3]
    assert [r.offset for r in all_records(log)] == [0, 1, 2, 3]


def test_roll_before_relative_offsets_overflow_int32(log_dir: Path) -> None:
    log_dir.mkdir()
    # A segment based at 0 whose last offset is the largest one it can hold.
    (log_dir / f"{0:020d}.log").write_bytes(batch(2, base_offset=INT32_MAX - 1))
    log = open_log(log_dir)
    assert log.next_offset == INT32_MAX + 1
    info = log.append(batch(2), now_ms=0)
    assert info.rolled and info.first_offset == INT32_MAX + 1
    assert [s.base_offset for s in log.segments] == [0, INT32_MAX + 1]
    assert [r.offset for r in all_records(log)] == [INT32_MAX - 1 + i for i in range(4)]


def test_index_entry_after_more_than_index_interval_bytes(log_dir: Path) -> None:
    size = len(batch(1))
    interval = 2 * size
    log = open_log(log_dir, config(index_interval_bytes=interval))
    expected = []
    since = 0
    for i in range(20):
        if since > interval:
            expected.append((i, i * size))
            since = 0
        since += size
        log.append(batch(1), now_ms=0)
    assert list(log.active_segment.offset_index) == expected
    assert expected  # the rule fired


def test_index_entries_of_a_multi_batch_append_are_per_batch(log_dir: Path) -> None:
    log = open_log(log_dir, config(index_interval_bytes=0))
    log.append(batch(1), now_ms=0)
    position = log.active_segment.size_bytes
    log.append(batch(2) + batch(3), now_ms=0)
    second = position + len(batch(2))
    assert list(log.active_segment.offset_index) == [(2, position), (5, second)]
    for offset, batch_position in [(1, position), (2, position), (3, position + len(batch(2)))]:
        assert log.read(offset, 1 << 20).region.position == batch_position


# -- reading ---------------------------------------------------------------------------------


@pytest.fixture
def multi_segment_log(log_dir: Path) -> Log:
    size = len(batch(2))
    log = open_log(log_dir, config(segment_bytes=4 * size, index_interval_bytes=size))
    for i in range(30):
        log.append(batch(1 + i % 4, ts=1000 + i, tag=f"b{i}-"), now_ms=0)
    assert len(log.segments) >= 5
    return log


def test_read_from_every_offset_starts_at_the_batch_holding_it(multi_segment_log: Log) -> None:
    log = multi_segment_log
    batches = _batch_positions(log)
    for offset in range(log.next_offset):
        info = log.read(offset, 1 << 20)
        region = info.region
        assert region is not None
        (base, position, first, last) = next(b for b in batches if b[2] <= offset <= b[3])
        assert region.position == position
        segment = next(s for s in log.segments if s.base_offset == base)
        assert region.file is segment.file
        raw = split_batches(region_bytes(region))
        header = validate_batch(raw[0])
        assert header.base_offset == first and header.last_offset == last
        # a read returns what is left of that segment, never more
        assert region.position + region.length == segment.size_bytes


def test_read_max_bytes_cuts_and_min_one_message(log_dir: Path) -> None:
    log = open_log(log_dir)
    small, large = batch(1), batch(1, value_bytes=500)
    append_all(log, [small, small, large, small])
    info = log.read(0, len(small) + 10)
    assert (info.region.position, info.region.length) == (0, len(small) + 10)  # cut mid-batch
    assert split_batches(region_bytes(info.region)[: len(small)])  # first batch whole

    info = log.read(2, 100)  # the batch at offset 2 is larger than max_bytes
    assert info.region.position == 2 * len(small)
    assert info.region.length == len(large)
    assert region_bytes(info.region)[16:] == large[16:]  # bytes 12..15: leader epoch 0

    info = log.read(2, 100, min_one_message=False)
    assert info.region.length == 100


def test_read_at_the_end_and_out_of_range(multi_segment_log: Log) -> None:
    log = multi_segment_log
    end = log.next_offset
    info = log.read(end, 1 << 20)
    assert info.region is None and info.high_watermark == end
    for offset in (-1, end + 1, end + 1000):
        with pytest.raises(OffsetOutOfRangeError) as caught:
            log.read(offset, 1 << 20)
        assert caught.value.log_end_offset == end


def test_read_an_empty_log(log_dir: Path) -> None:
    log = open_log(log_dir)
    assert log.read(0, 100).region is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)


def test_reads_after_advance_log_start_offset(multi_segment_log: Log) -> None:
    log = multi_segment_log
    end = log.next_offset
    assert log.advance_log_start_offset(17) == 17
    assert log.advance_log_start_offset(3) == 17  # never moves back
    with pytest.raises(OffsetOutOfRangeError) as caught:
        log.read(16, 1 << 20)
    assert caught.value.log_start_offset == 17
    info = log.read(17, 1 << 20)
    assert info.log_start_offset == 17
    first = parse_batch_header(region_bytes(info.region))
    assert first.base_offset <= 17 <= first.last_offset
    assert [r.offset for r in all_records(log)] == list(range(17, end))
    assert offset_for_timestamp(log, -2) == (17, -1)
    assert offset_for_timestamp(log, 0)[0] == 17  # earlier records are gone
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start_offset(end + 1)
    assert log.advance_log_start_offset(end) == end
    assert log.read(end, 100).region is None


# -- offset index lookups through the log ------------------------------------------------------


def test_index_lookups_exact_between_before_and_after(log_dir: Path) -> None:
    size = len(batch(3))
    log = open_log(log_dir, config(index_interval_bytes=2 * size))
    for _ in range(20):
        log.append(batch(3), now_ms=0)
    segment = log.active_segment
    entries = list(segment.offset_index)
    assert len(entries) >= 3
    first_entry, last_entry = entries[0][0], entries[-1][0]
    cases = {
        "exact": entries[1][0],
        "between": entries[1][0] + 4,
        "before first": first_entry - 4,
        "at base": 0,
        "after last": last_entry + 2,
        "last offset": log.next_offset - 1,
    }
    assert entries[1][0] + 4 < entries[2][0]
    assert last_entry + 2 < log.next_offset
    for name, target in cases.items():
        region = log.read(target, 1 << 20).region
        start = target - target % 3  # every batch holds 3 records
        assert region.position == (start // 3) * size, name
        assert parse_batch_header(region_bytes(region)).base_offset == start, name


# -- timestamps ------------------------------------------------------------------------------


def test_offset_for_timestamp_with_out_of_order_timestamps(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append(batch(3, ts=[100, 300, 200]), now_ms=0)
    log.append(batch(2, ts=[250, 260]), now_ms=0)
    log.append(batch(1, ts=500), now_ms=0)
    assert offset_for_timestamp(log, 100) == (0, 100)  # exact, first
    assert offset_for_timestamp(log, 50) == (0, 100)  # before first
    assert offset_for_timestamp(log, 150) == (1, 300)  # first record at or above, in offset order
    assert offset_for_timestamp(log, 200) == (1, 300)
    assert offset_for_timestamp(log, 300) == (1, 300)
    assert offset_for_timestamp(log, 301) == (5, 500)  # between
    assert offset_for_timestamp(log, 500) == (5, 500)  # exact, last
    assert offset_for_timestamp(log, 501) is None  # after last
    assert offset_for_timestamp(log, -1) == (6, -1)  # latest
    assert offset_for_timestamp(log, -2) == (0, -1)  # earliest
    assert offset_for_timestamp(log, -3) == (5, 500)  # the largest timestamp (KIP-734)
    log.append(batch(2, ts=[400, 500]), now_ms=0)
    assert offset_for_timestamp(log, -3) == (5, 500)  # the first record holding it


def test_max_timestamp_of_an_empty_log_is_none(log_dir: Path) -> None:
    assert offset_for_timestamp(open_log(log_dir), -3) is None


def test_offset_for_timestamp_across_segments(multi_segment_log: Log) -> None:
    log = multi_segment_log
    # batch i holds 1 + i % 4 records, all stamped 1000 + i
    first_offsets = []
    offset = 0
    for i in range(30):
        first_offsets.append(offset)
        offset += 1 + i % 4
    for i in range(30):
        assert offset_for_timestamp(log, 1000 + i) == (first_offsets[i], 1000 + i)
    assert offset_for_timestamp(log, 0) == (0, 1000)
    assert offset_for_timestamp(log, 1030) is None
    assert offset_for_timestamp(log, -1) == (log.next_offset, -1)


def _brute_force(stamps: list[list[int]], target: int) -> tuple[int, int] | None:
    offset = 0
    for batch_stamps in stamps:
        for ts in batch_stamps:
            if ts >= target:
                return offset, ts
            offset += 1
    return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stamps=st.lists(st.lists(st.integers(0, 60), min_size=1, max_size=4), min_size=1, max_size=25),
    segment_batches=st.integers(1, 6),
    interval_batches=st.integers(0, 3),
    reopen=st.sampled_from(["no", "clean", "unclean"]),
)
def test_offset_for_timestamp_matches_a_scan(
    stamps: list[list[int]], segment_batches: int, interval_batches: int, reopen: str
) -> None:
    size = len(batch(4))
    cfg = config(segment_bytes=segment_batches * size, index_interval_bytes=interval_batches * size)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = open_log(directory, cfg)
        for batch_stamps in stamps:
            log.append(batch(len(batch_stamps), ts=batch_stamps), now_ms=0)
        if reopen != "no":
            log.close()
            log = open_log(directory, cfg, clean_shutdown=reopen == "clean")
        for target in range(62):
            assert offset_for_timestamp(log, target) == _brute_force(stamps, target), target
        largest = max(ts for batch_stamps in stamps for ts in batch_stamps)
        assert offset_for_timestamp(log, -3) == _brute_force(stamps, largest)  # KIP-734
        log.close()


def test_log_append_time_stamps_the_batch_and_keeps_the_crc_valid(log_dir: Path) -> None:
    log = open_log(log_dir, config(message_timestamp_type="LogAppendTime"))
    client = bytearray(batch(2, ts=[5, 9]) + batch(1, ts=7))
    original = bytes(client)
    info = log.append(client, now_ms=123_456)
    assert client == original  # the caller's buffer is not modified
    assert info.log_append_time_ms == 123_456 and info.max_timestamp == 123_456
    log.append(batch(1, ts=5), now_ms=200_000)
    stored = split_batches(region_bytes(log.read(0, 1 << 20).region))  # CRCs valid
    assert len(stored) == 3
    for raw, stamp in zip(stored, (123_456, 123_456, 200_000), strict=True):
        header = validate_batch(raw)
        assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
        assert header.max_timestamp == stamp
        assert all(r.timestamp_ms == stamp for r in decode_records(raw))
    assert [r.offset for r in all_records(log)] == [0, 1, 2, 3]
    assert offset_for_timestamp(log, 9) == (0, 123_456)
    assert offset_for_timestamp(log, 123_457) == (3, 200_000)


# -- flush, recovery point, reopen -----------------------------------------------------------


def test_flush_advances_the_recovery_point(log_dir: Path) -> None:
    log = open_log(log_dir, config(flush_messages=5))
    log.append(batch(3), now_ms=0)
    assert log.recovery_point == 0
    log.append(batch(2), now_ms=0)  # 5 unflushed messages: flushed
    assert log.recovery_point == 5
    log.append(batch(1), now_ms=0)
    assert log.recovery_point == 5
    log.flush()
    assert log.recovery_point == 6


def test_clean_reopen_keeps_everything(multi_segment_log: Log, log_dir: Path) -> None:
    log = multi_segment_log
    before = all_records(log)
    bases = [s.base_offset for s in log.segments]
    end = log.next_offset
    log.close()
    reopened = open_log(log_dir, log.config, clean_shutdown=True, recovery_point=end)
    assert reopened.next_offset == end and reopened.recovery_point == end
    assert [s.base_offset for s in reopened.segments] == bases
    assert all_records(reopened) == before
    info = reopened.append(batch(1), now_ms=0)
    assert info.first_offset == end


# -- a model-based run: random appends, reads, restarts ------------------------------------------

_record = st.tuples(st.integers(0, 120), st.integers(0, 50))  # (value bytes, timestamp)
_request = st.lists(st.lists(_record, min_size=1, max_size=4), min_size=1, max_size=3)
_op = st.one_of(
    st.tuples(st.just("append"), _request),
    st.tuples(st.just("read"), st.floats(0, 1), st.integers(0, 1200), st.booleans()),
    st.tuples(st.just("advance"), st.floats(0, 1)),
    st.tuples(st.just("reopen"), st.sampled_from(["clean", "crash"])),
    st.tuples(st.just("flush")),
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_op, min_size=1, max_size=25),
    segment_bytes=st.integers(1700, 3000),
    interval=st.sampled_from([0, 150, 4096]),
    index_bytes=st.sampled_from([24, 60, 4096]),
)
def test_log_matches_a_model(
    ops: list, segment_bytes: int, interval: int, index_bytes: int
) -> None:
    cfg = config(
        segment_bytes=segment_bytes,
        index_interval_bytes=interval,
        segment_index_bytes=index_bytes,
    )
    model: list[tuple[int, bytes, int]] = []  # (offset, value, timestamp)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = open_log(directory, cfg)
        for op in ops:
            start = log.log_start_offset
            if op[0] == "append":
                data = b""
                expected = []
                for records in op[1]:
                    batch_records = []
                    for size, ts in records:
                        value = f"{len(model) + len(expected)}".encode().ljust(size, b".")
                        expected.append((len(model) + len(expected), value, ts))
                        batch_records.append((None, value, ts))
                    data += encode_batch(batch_records)
                info = log.append(data, now_ms=0)
                assert info.first_offset == len(model)
                model.extend(expected)
            elif op[0] == "read":
                _, where, max_bytes, min_one = op
                offset = start + int(where * (len(model) - start))
                info = log.read(offset, max_bytes, min_one_message=min_one)
                if offset == len(model):
                    assert info.region is None
                    continue
                region = info.region
                raw = region_bytes(region)
                if len(raw) >= 61:
                    header = parse_batch_header(raw)
                    assert header.base_offset <= offset <= header.last_offset
                if min_one:
                    assert len(raw) >= parse_batch_header(raw).size_bytes
            elif op[0] == "advance":
                target = start + int(op[1] * (len(model) - start))
                assert log.advance_log_start_offset(target) == target
            elif op[0] == "reopen":
                end, recovery_point = log.next_offset, log.recovery_point
                if op[1] == "clean":
                    log.close()
                    recovery_point = end
                else:
                    for segment in log.segments:
                        segment.file.close()
                log = open_log(
                    directory,
                    cfg,
                    clean_shutdown=op[1] == "clean",
                    recovery_point=recovery_point,
                    log_start_offset=start,
                )
                assert log.next_offset == end
            else:
                log.flush()
                assert log.recovery_point == log.next_offset
            start = log.log_start_offset
            assert log.next_offset == len(model)
            got = [(r.offset, r.value, r.timestamp_ms) for r in all_records(log)]
            assert got == model[start:]
        for target in range(0, 52, 3):
            expected = next(((o, ts) for o, _, ts in model[start:] if ts >= target), None)
            assert offset_for_timestamp(log, target) == expected
        log.close()


def test_index_entries_are_per_batch_in_multi_batch_appends(log_dir: Path) -> None:
    """Every offset index entry names the last offset of the batch that starts at its position
    (Kafka 3.7+), also when one append carries several batches."""
    log = open_log(log_dir, config(index_interval_bytes=1))
    for _ in range(5):
        log.append(batch(3) + batch(2) + batch(4), now_ms=0)
    segment = log.active_segment
    starts = {
        e.position: e.last_offset
        for e in scan_entries(segment.file.fileno(), 0, segment.size_bytes)
    }
    entries = list(segment.offset_index)
    assert len(entries) > 5  # more than one entry per append
    for offset, position in entries:
        assert starts[position] == offset


@pytest.mark.parametrize(
    ("compression_type", "sent_codec", "stored_codec"),
    [
        ("gzip", Compression.NONE, Compression.GZIP),
        ("uncompressed", Compression.ZSTD, Compression.NONE),
        ("lz4", Compression.SNAPPY, Compression.LZ4),
        ("zstd", Compression.ZSTD, Compression.ZSTD),  # already right: stored as sent
        ("producer", Compression.SNAPPY, Compression.SNAPPY),
    ],
)
def test_topic_compression_type_reencodes_other_codecs(
    log_dir: Path, compression_type: str, sent_codec: Compression, stored_codec: Compression
) -> None:
    log = open_log(log_dir, config(compression_type=compression_type))
    sent = [
        encode_batch([(b"k", b"a" * 50, 1), (None, None, 2)], compression=sent_codec),
        encode_batch([(b"k2", b"b" * 50, 3)], compression=sent_codec),
    ]
    info = log.append(b"".join(sent), now_ms=0)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    stored = split_batches(region_bytes(log.read(0, 1 << 20).region))  # validates every CRC
    assert [parse_batch_header(raw).compression for raw in stored] == [stored_codec] * 2
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in all_records(log)] == [
        (0, b"k", b"a" * 50, 1),
        (1, None, None, 2),
        (2, b"k2", b"b" * 50, 3),
    ]
    if sent_codec == stored_codec:
        # never re-encoded (bytes 12..15 carry the stamped leader epoch)
        assert [raw[16:] for raw in stored] == [data[16:] for data in sent]
    assert log.next_offset == 3
    assert os.path.getsize(log_dir / f"{0:020d}.log") == sum(map(len, stored))
