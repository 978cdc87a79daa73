"""What is cleanable (dirty ratio, compaction lags, recovery point), the throttle, the map size
and the cleaner-offset-checkpoint."""

from __future__ import annotations

from pathlib import Path

from odradek.storage.checkpoints import read_offset_checkpoint
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.plan import choose_log, cleanable_log
from odradek.storage.cleaner.throttle import Throttler
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from tests.storage.cleaner_helpers import clean_pass, keyed, wall_ms
from tests.storage.conftest import config, open_log


def _log(log_dir: Path, segments: int, ts: int, **overrides: object) -> Log:
    cfg = config(**{"cleanup_policy": "compact", "segment_bytes": 100, **overrides})
    log = open_log(log_dir, cfg)
    for i in range(segments):
        log.append(keyed([(b"k", str(i).encode())], ts=ts + i), now_ms=ts)
    log.roll(ts)
    log.flush()
    return log


def test_dirty_section_and_ratio(log_dir: Path) -> None:
    now = wall_ms()
    log = _log(log_dir, 4, now, min_cleanable_dirty_ratio=0.5)
    c = cleanable_log(log, now)
    assert (c.first_dirty_offset, c.first_uncleanable_offset) == (0, 4)
    assert c.clean_bytes == 0 and c.dirty_bytes == log.size_bytes
    assert c.cleanable_ratio == 1.0 and c.cleanable
    clean_pass(log, now)
    c = cleanable_log(log, now)
    assert c.first_dirty_offset == 4 and c.dirty_bytes == 0 and not c.cleanable
    log.append(keyed([(b"k", b"x")]), now_ms=now)
    log.roll(now)
    log.flush()
    c = cleanable_log(log, now)
    assert 0 < c.cleanable_ratio < 1
    # cleanable when the ratio is above min.cleanable.dirty.ratio (strictly, as Kafka)
    log.config = config(cleanup_policy="compact", min_cleanable_dirty_ratio=c.cleanable_ratio)
    assert not cleanable_log(log, now).cleanable
    log.config = config(cleanup_policy="compact", min_cleanable_dirty_ratio=0)
    assert cleanable_log(log, now).cleanable


def test_only_flushed_segments_are_cleanable(log_dir: Path) -> None:
    now = wall_ms()
    log = _log(log_dir, 3, now)
    log.append(keyed([(b"k", b"x")]), now_ms=now)  # rolls: segment 3 holds offset 3
    log.append(keyed([(b"k", b"y")]), now_ms=now)  # not flushed
    assert log.recovery_point == 3
    assert cleanable_log(log, now).first_uncleanable_offset == 3


def test_min_compaction_lag_holds_back_recent_segments(log_dir: Path) -> None:
    now = 10_000_000
    log = _log(log_dir, 4, now - 10_000, min_compaction_lag_ms=9_999)
    # Segment i has largest timestamp now - 10000 + i; it waits while that is after
    # now - min.compaction.lag.ms = now - 9999: segments 0 and 1 are old enough.
    c = cleanable_log(log, now)
    assert c.first_uncleanable_offset == 2


def test_max_compaction_lag_forces_cleaning(log_dir: Path) -> None:
    now = 10_000_000
    log = _log(log_dir, 2, now - 5_000, min_cleanable_dirty_ratio=1)
    assert not cleanable_log(log, now).cleanable  # ratio 1.0 is not above 1
    log.config = config(
        cleanup_policy="compact", min_cleanable_dirty_ratio=1, max_compaction_lag_ms=4_000
    )
    c = cleanable_log(log, now)
    assert c.must_clean and c.cleanable


def test_choose_log_prefers_the_filthiest_compacted_log(tmp_path: Path) -> None:
    now = wall_ms()
    a = _log(tmp_path / "a-0", 3, now, min_cleanable_dirty_ratio=0)
    b = _log(tmp_path / "b-0", 3, now, min_cleanable_dirty_ratio=0)
    deleted = _log(tmp_path / "c-0", 3, now, cleanup_policy="delete")
    clean_pass(a, now)
    a.append(keyed([(b"k", b"x")]), now_ms=now)
    a.roll(now)
    a.flush()
    chosen = choose_log([a, b, deleted], now)
    assert chosen is not None and chosen.log is b  # b is all dirty, a only partly
    assert choose_log([deleted], now) is None


def test_throttler_sleeps_to_hold_the_rate() -> None:
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    throttler = Throttler(1000, clock_s=lambda: clock[0], sleep_s=sleep, check_interval_s=0.1)
    throttler(500)  # no time has passed: below the check interval
    assert slept == []
    clock[0] = 0.2
    throttler(500)  # 1000 bytes in 0.2 s wants 1.0 s: sleep 0.8
    assert slept == [0.8]
    clock[0] += 2.0
    throttler(100)  # well below the rate
    assert slept == [0.8]
    unlimited = Throttler(1.7976931348623157e308, clock_s=lambda: clock[0], sleep_s=sleep)
    unlimited(10**12)
    assert slept == [0.8]


def test_offset_map_is_sized_like_kafkas() -> None:
    assert OffsetMap.for_buffer(128 * 1024 * 1024).capacity == int(128 * 1024 * 1024 // 24 * 0.9)
    assert OffsetMap.for_buffer(2400, threads=2).capacity == 45
    m = OffsetMap(2)
    m.put(b"a", 1)
    m.put(b"a", 5)
    assert m.get(b"a") == 5 and m.get(b"b") == -1 and not m.full
    m.put(b"b", 6)
    assert m.full and m.latest_offset == 6


def test_cleaner_offset_checkpoint_round_trips(tmp_path: Path) -> None:
    now = wall_ms()
    manager = LogManager([tmp_path / "logs"], LogConfig(), node_id=1, clock_ms=lambda: now)
    manager.startup()
    [log] = manager.create_topic(
        "compacted", 1, {"cleanup.policy": "compact", "segment.bytes": "100"}
    )
    manager.create_topic("plain", 1)
    for i in range(4):
        log.append(keyed([(b"k", str(i).encode())]), now_ms=now)
    log.roll(now)
    log.flush()
    log.config = manager.effective_config("compacted").with_overrides(
        {"min.cleanable.dirty.ratio": "0"}
    )
    clean_pass(log, now)
    assert log.first_dirty_offset == 4
    manager.shutdown()
    assert read_offset_checkpoint(tmp_path / "logs" / "cleaner-offset-checkpoint") == {
        ("compacted", 0): 4
    }
    again = LogManager([tmp_path / "logs"], LogConfig(), node_id=1, clock_ms=lambda: now)
    again.startup()
    assert again.partitions.get_log("compacted", 0).first_dirty_offset == 4
    again.shutdown()
