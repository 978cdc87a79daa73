"""LogSegment and storage.scan on real files: append, read, indexes, truncate, recover."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.protocol.record_batch import parse_batch_header
from odradek.storage.scan import EntryInfo, InvalidEntry, scan_entries, validated_entries
from odradek.storage.segment import LogSegment, segment_path
from odradek.storage.timestamp_lookup import segment_offset_for_timestamp
from tests.storage.conftest import batch, region_bytes, split_batches

BASE = 100


def _segment(directory: Path, *, interval: int = 0, max_index_bytes: int = 4096) -> LogSegment:
    return LogSegment.create(
        directory, BASE, index_interval_bytes=interval, max_index_bytes=max_index_bytes
    )


def _append(segment: LogSegment, data: bytes, base_offset: int) -> int:
    """Append one client batch at ``base_offset`` the way Log.append does (patched prefix)."""
    header = parse_batch_header(data)
    return segment.append(
        [base_offset.to_bytes(8, "big"), memoryview(data)[8:]],
        [(len(data), base_offset + header.last_offset_delta, header.max_timestamp)],
    )


def _filled(directory: Path, count: int = 12, *, interval: int = 0) -> LogSegment:
    segment = _segment(directory, interval=interval)
    offset = BASE
    for i in range(count):
        _append(segment, batch(2, ts=[1000 + 10 * i, 995 + 10 * i]), offset)
        offset += 2
    return segment


def test_file_names_are_twenty_digit_base_offsets(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    assert segment_path(tmp_path, 42, ".log").name == "00000000000000000042.log"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "00000000000000000100.timeindex",
    ]
    assert segment.size_bytes == 0 and segment.next_offset_from_data() == BASE
    assert segment.read(BASE, 100) is None
    assert segment.first_batch_timestamp() == -1


def test_append_positions_and_read(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    first, second = batch(1), batch(3)
    assert _append(segment, first, BASE) == 0
    assert _append(segment, second, BASE + 1) == len(first)
    assert segment.size_bytes == len(first) + len(second)
    assert os.path.getsize(segment.log_path) == segment.size_bytes
    assert segment.next_offset_from_data() == BASE + 4
    region = segment.read(BASE + 2, 1 << 20)
    assert (region.position, region.length) == (len(first), len(second))
    assert split_batches(region_bytes(region))[0][8:] == second[8:]
    # max_position hides what lies beyond it (a reader's snapshot)
    assert segment.read(BASE + 2, 1 << 20, max_position=len(first)) is None
    assert segment.read(BASE + 4, 1 << 20) is None
    assert segment.first_batch_timestamp() == 1000


def test_scan_and_validated_entries_agree_on_a_clean_file(tmp_path: Path) -> None:
    segment = _filled(tmp_path, 5)
    fd = segment.file.fileno()
    scanned = list(scan_entries(fd, 0, segment.size_bytes))
    validated = list(validated_entries(fd, 0, segment.size_bytes))
    assert scanned == validated
    assert all(isinstance(e, EntryInfo) for e in scanned)
    assert [e.base_offset for e in scanned] == [BASE + 2 * i for i in range(5)]
    assert scanned[1].max_timestamp == 1010
    # a range that ends inside an entry: scan stops quietly, validation says where and why
    end = scanned[2].position + 30
    assert list(scan_entries(fd, 0, end)) == scanned[:2]
    last = list(validated_entries(fd, 0, end))[-1]
    assert isinstance(last, InvalidEntry) and last.position == scanned[2].position


def test_index_entries_and_live_vs_recovered_indexes_agree(tmp_path: Path) -> None:
    size = len(batch(2))
    segment = _filled(tmp_path, 20, interval=2 * size)
    offsets = list(segment.offset_index)
    times = list(segment.time_index)
    assert offsets and times
    for offset, position in offsets:  # offset -> the start of the batch holding it
        region = segment.read(offset, 1)
        assert region.position == position
        assert parse_batch_header(region_bytes(region)).last_offset == offset
    max_ts = segment.max_timestamp
    assert max_ts == 1000 + 10 * 19
    result = segment.recover()
    assert result[:3] == (segment.size_bytes, 0, None)
    assert list(segment.offset_index) == offsets  # derived data: rebuilt identically
    assert list(segment.time_index) == times
    assert segment.max_timestamp == max_ts


def test_find_offset_by_timestamp_in_a_segment(tmp_path: Path) -> None:
    segment = _filled(tmp_path, 10, interval=0)
    # batch i (offsets BASE+2i, BASE+2i+1) carries timestamps 1000+10i, 995+10i
    assert segment_offset_for_timestamp(segment, 1000, BASE) == (BASE, 1000)
    assert segment_offset_for_timestamp(segment, 1001, BASE) == (BASE + 2, 1010)
    assert segment_offset_for_timestamp(segment, 1005, BASE) == (BASE + 2, 1010)
    assert segment_offset_for_timestamp(segment, 1006, BASE) == (BASE + 2, 1010)
    assert segment_offset_for_timestamp(segment, 1085, BASE) == (BASE + 18, 1090)
    assert segment_offset_for_timestamp(segment, 1091, BASE) is None
    assert segment_offset_for_timestamp(segment, 0, BASE + 5) == (BASE + 5, 1015)


def test_recover_truncates_at_the_first_invalid_byte(tmp_path: Path) -> None:
    size = len(batch(2))
    segment = _filled(tmp_path, 6)
    with open(segment.log_path, "r+b") as f:
        f.seek(3 * size + 70)
        byte = f.read(1)
        f.seek(3 * size + 70)
        f.write(bytes([byte[0] ^ 1]))
    result = segment.recover()
    assert result.valid_bytes == 3 * size and result.truncated_bytes == 3 * size
    assert "CRC" in result.reason
    assert segment.next_offset_from_data() == BASE + 6


def test_recover_rejects_offsets_out_of_order_or_outside_the_segment(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    _append(segment, batch(2), BASE + 10)
    _append(segment, batch(1), BASE + 5)  # goes backwards
    result = segment.recover()
    assert result.valid_bytes == len(batch(2))
    assert "out of order" in result.reason
    other = LogSegment.create(tmp_path, 0, index_interval_bytes=0, max_index_bytes=4096)
    _append(other, batch(1), 2**31)  # relative offset overflows int32
    assert other.recover().valid_bytes == 0


def test_close_appends_the_final_time_entry_and_trims(tmp_path: Path) -> None:
    segment = _filled(tmp_path, 3, interval=10**6)  # no index entry from appends
    assert len(segment.time_index) == 0
    segment.close()
    segment.close()  # idempotent
    with pytest.raises(ValueError):
        segment.file.fileno()  # a region's file fails loudly once closed
    index_path = segment_path(tmp_path, BASE, ".index")
    time_path = segment_path(tmp_path, BASE, ".timeindex")
    assert index_path.stat().st_size == 0
    assert time_path.read_bytes() == (1020).to_bytes(8, "big") + (5).to_bytes(4, "big")
    reopened = LogSegment(
        tmp_path, BASE, index_interval_bytes=0, max_index_bytes=4096, writable=False
    )
    assert reopened.max_timestamp == 1020
    assert reopened.next_offset_from_data() == BASE + 6
    reopened.close()


def test_change_suffix_and_delete_files(tmp_path: Path) -> None:
    segment = _filled(tmp_path, 2)
    segment.change_suffix(".deleted")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00000000000000000100.index.deleted",
        "00000000000000000100.log.deleted",
        "00000000000000000100.timeindex.deleted",
    ]
    assert segment.read(BASE, 1 << 20) is not None  # still readable while being deleted
    segment.delete_files()
    assert list(tmp_path.iterdir()) == []


def test_create_replaces_stale_files(tmp_path: Path) -> None:
    for suffix in (".log", ".index", ".timeindex"):
        segment_path(tmp_path, BASE, suffix).write_bytes(b"stale" * 10)
    segment = _segment(tmp_path)
    assert segment.size_bytes == 0 and len(segment.offset_index) == 0


def test_scan_across_read_chunks_and_large_entries(tmp_path: Path) -> None:
    segment = _segment(tmp_path, interval=4096)
    offset = BASE
    sizes = [10, 100_000, 7, 70_000, 1, 65_000] + [3] * 1500 + [200_000, 5]
    for i, size in enumerate(sizes):
        _append(segment, batch(1, value_bytes=size, ts=i), offset)
        offset += 1
    fd = segment.file.fileno()
    scanned = list(scan_entries(fd, 0, segment.size_bytes))
    assert scanned == list(validated_entries(fd, 0, segment.size_bytes))
    assert [e.base_offset for e in scanned] == list(range(BASE, offset))
    assert scanned[-1].next_position == segment.size_bytes
    for target in (BASE, BASE + 1, BASE + 700, offset - 2, offset - 1):
        entry = segment.find_entry(target)
        assert entry.base_offset == target
    assert segment_offset_for_timestamp(segment, 1000, BASE) == (BASE + 1000, 1000)


def test_a_failed_open_leaves_no_descriptor_behind(tmp_path: Path) -> None:
    """Opening a segment whose time index cannot be opened (here a directory stands where the
    file should be; in production: out of descriptors) raises and closes the ``.log`` it had
    opened, so a rollback that follows has that descriptor to work with."""
    segment_path(tmp_path, 0, ".timeindex").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError) as caught:
        LogSegment(tmp_path, 0, index_interval_bytes=4096, max_index_bytes=1024, writable=True)
    # still inside the failure, as a rollback is: its traceback keeps the half-made segment
    assert caught.traceback
    assert len(os.listdir("/proc/self/fd")) == before
    assert segment_path(tmp_path, 0, ".log").exists()  # closed, not deleted: the data stays
