"""Retention with fake clocks: exactly the right segments go, by time, size and log start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.log import Log
from odradek.storage.retention import apply_retention
from tests.storage.conftest import batch, config, open_log, region_bytes, segment_files


def _log_with_segments(log_dir: Path, timestamps: list[int], **overrides: object) -> Log:
    """One single-record batch per segment (segment.bytes fits one), max timestamps given."""
    one = len(batch(1, ts=0))
    cfg = config(segment_bytes=one + 1, **overrides)
    log = open_log(log_dir, cfg)
    for ts in timestamps:
        log.append(batch(1, ts=ts), now_ms=ts)
    return log


def _bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_time_retention_deletes_exactly_the_expired_segments(log_dir: Path) -> None:
    log = _log_with_segments(log_dir, [1_000, 2_000, 3_000, 4_000], retention_ms=1_500)
    assert _bases(log) == [0, 1, 2, 3]  # 3 is the active segment
    # now - 1000 and now - 2000 exceed 1500; now - 3000 = 1000 does not.
    results = apply_retention(log, now_ms=4_000)
    assert [(r.reason, r.segments, r.base_offsets) for r in results] == [
        ("retention-ms", 2, (0, 1))
    ]
    assert _bases(log) == [2, 3]
    assert log.log_start_offset == 2
    assert results[0].log_start_offset == 2
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1 << 20)
    assert log.read(2, 1 << 20).region is not None
    assert segment_files(log_dir, ".log.deleted") == [f"{b:020d}.log.deleted" for b in (0, 1)]
    # Exactly at the boundary (now - ts == retention.ms) a segment stays.
    assert apply_retention(log, now_ms=4_500) == []
    assert _bases(log) == [2, 3]


def test_files_are_deleted_after_file_delete_delay(log_dir: Path) -> None:
    log = _log_with_segments(
        log_dir, [1_000, 2_000, 9_000], retention_ms=1_000, file_delete_delay_ms=5_000
    )
    region = log.read(0, 1 << 20).region
    assert region is not None
    before = region_bytes(region)
    apply_retention(log, now_ms=9_000)
    # A region handed out before the deletion still reads the same bytes.
    assert region_bytes(region) == before
    assert log.take_due_deletions(13_999) == []
    due = log.take_due_deletions(14_000)
    assert sorted(s.base_offset for s in due) == [0, 1]
    for segment in due:
        segment.delete_files()
    assert not [p for p in os.listdir(log_dir) if p.endswith(".deleted")]
    assert log.take_due_deletions(99_000) == []


def test_all_segments_expired_rolls_and_keeps_an_empty_active_segment(log_dir: Path) -> None:
    log = _log_with_segments(log_dir, [1_000, 2_000, 3_000], retention_ms=100)
    results = apply_retention(log, now_ms=10_000)
    assert results[0].base_offsets == (0, 1, 2)
    assert _bases(log) == [3]
    assert log.active_segment.size_bytes == 0
    assert log.log_start_offset == log.next_offset == 3
    # The log goes on at the same offsets.
    assert log.append(batch(1, ts=10_000), now_ms=10_000).first_offset == 3
    # An empty active segment is never deleted.
    log2 = open_log(log_dir.with_name("empty-0"), config(retention_ms=0))
    assert apply_retention(log2, now_ms=10**12) == []


def test_segment_without_timestamps_ages_by_file_mtime(log_dir: Path) -> None:
    log = _log_with_segments(log_dir, [-1, -1, -1], retention_ms=60_000)
    old = log.segments[0]
    mtime_ms = old.last_modified_ms
    old.set_last_modified_ms(mtime_ms - 3_600_000)
    results = apply_retention(log, now_ms=mtime_ms)
    assert [r.base_offsets for r in results] == [(0,)]


def test_size_retention_keeps_at_least_retention_bytes(log_dir: Path) -> None:
    one = len(batch(1, ts=0))
    # Five segments of `one` bytes each (the fifth active).
    log = _log_with_segments(log_dir, [1, 2, 3, 4, 5], retention_bytes=2 * one + 1)
    assert log.size_bytes == 5 * one
    results = apply_retention(log, now_ms=10)
    # Deleting a segment is allowed only while the rest stays >= retention.bytes:
    # 5 -> 4 -> 3 segments (3*one >= 2*one+1), but not to 2 (2*one < 2*one+1).
    assert [(r.reason, r.base_offsets) for r in results] == [("retention-bytes", (0, 1))]
    assert log.size_bytes == 3 * one
    log2 = _log_with_segments(log_dir.with_name("b-0"), [1, 2, 3], retention_bytes=one)
    apply_retention(log2, now_ms=10)
    assert _bases(log2) == [2]


def test_log_start_offset_deletes_whole_segments_below_it(log_dir: Path) -> None:
    log = _log_with_segments(log_dir, [1, 2, 3, 4], cleanup_policy="compact")
    log.advance_log_start_offset(2)
    results = apply_retention(log, now_ms=10**15)  # compact only: no time rule
    assert [(r.reason, r.base_offsets) for r in results] == [("log-start-offset", (0, 1))]
    assert log.log_start_offset == 2
    log.advance_log_start_offset(3)  # the active segment's base: segment 2 goes
    apply_retention(log, now_ms=10**15)
    assert _bases(log) == [3]
    log.advance_log_start_offset(4)  # inside the (only, active) segment: nothing goes
    assert apply_retention(log, now_ms=10**15) == []
    assert _bases(log) == [3]


def test_unlimited_and_compact_only_retention_delete_nothing(log_dir: Path) -> None:
    log = _log_with_segments(log_dir, [1, 2, 3], retention_ms=-1, retention_bytes=-1)
    assert apply_retention(log, now_ms=10**15) == []
    log2 = _log_with_segments(
        log_dir.with_name("c-0"), [1, 2, 3], cleanup_policy="compact", retention_ms=1
    )
    assert apply_retention(log2, now_ms=10**15) == []
    log3 = _log_with_segments(
        log_dir.with_name("d-0"), [1, 2, 3], cleanup_policy="compact,delete", retention_ms=1
    )
    assert [r.base_offsets for r in apply_retention(log3, now_ms=10**15)] == [(0, 1, 2)]


def test_runtime_config_change_takes_effect(log_dir: Path) -> None:
    log = _log_with_segments(log_dir, [1_000, 2_000, 3_000])
    assert apply_retention(log, now_ms=5_000) == []  # 7 days
    log.config = config(retention_ms=2_500)
    assert [r.base_offsets for r in apply_retention(log, now_ms=5_000)] == [(0, 1)]


def test_deleted_files_left_by_a_crash_are_removed_at_start(log_dir: Path) -> None:
    log = _log_with_segments(log_dir, [1_000, 2_000, 3_000], retention_ms=1_500)
    apply_retention(log, now_ms=3_000)
    start = log.log_start_offset
    assert segment_files(log_dir, ".deleted")
    log.close()
    reopened = open_log(log_dir, log.config, log_start_offset=start)
    assert not segment_files(log_dir, ".deleted")
    assert _bases(reopened) == [1, 2]
    assert reopened.log_start_offset == 1


def test_a_crash_before_the_rename_deletes_again_by_log_start_offset(log_dir: Path) -> None:
    """The checkpointed log start offset is ahead of the files: the next pass deletes them."""
    log = _log_with_segments(log_dir, [1_000, 2_000, 3_000])
    log.close()
    reopened = open_log(log_dir, log.config, log_start_offset=2)
    results = apply_retention(reopened, now_ms=3_000)
    assert [(r.reason, r.base_offsets) for r in results] == [("log-start-offset", (0, 1))]
