"""Compaction: the last value per key survives, offsets never change, tombstones expire."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.record_batch import (
    Compression,
    CorruptRecordError,
    parse_batch_header,
    validate_batch,
)
from odradek.storage.cleaner.clean import (
    CleaningStats,
    build_offset_map,
    clean_group,
    commit_group,
    plan_groups,
)
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.plan import cleanable_log
from odradek.storage.log import Log
from odradek.storage.retention import apply_retention
from tests.storage.cleaner_helpers import (
    clean_pass,
    consume,
    expected_after_pass,
    keyed,
    wall_ms,
)
from tests.storage.conftest import config, open_log, region_bytes, segment_files, split_batches

COMPACT = {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0}


def _compact_log(log_dir: Path, **overrides: object) -> Log:
    return open_log(log_dir, config(**{**COMPACT, **overrides}))


def _roll_and_flush(log: Log, now_ms: int) -> None:
    log.roll(now_ms)
    log.flush()


# -- the model test --------------------------------------------------------------------------

_KEYS = [f"key{i}".encode() for i in range(6)]
_record = st.tuples(st.sampled_from(_KEYS), st.one_of(st.none(), st.binary(max_size=12)))
_batch = st.tuples(
    st.lists(_record, min_size=1, max_size=6),
    st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD]),
    st.booleans(),  # run a cleaning pass after this batch
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(_batch, min_size=1, max_size=30), segment_bytes=st.integers(300, 900))
def test_compaction_matches_a_dict_model(
    batches: list[tuple[list[tuple[bytes, bytes | None]], Compression, bool]],
    segment_bytes: int,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = _compact_log(Path(tmp) / "t-0", segment_bytes=segment_bytes)
        now_ms = wall_ms()
        model: dict[bytes, bytes | None] = {}
        originals = {}
        for items, codec, clean_now in batches:
            info = log.append(keyed(items, compression=codec), now_ms=now_ms)
            for n, (key, value) in enumerate(items):
                model[key] = value
                originals[info.first_offset + n] = (key, value)
            if clean_now:
                log.flush()
                before = consume(log)
                first_dirty = cleanable_log(log, now_ms).first_dirty_offset
                stats = clean_pass(log, now_ms)
                after = consume(log)
                assert after == expected_after_pass(before, first_dirty, stats.end_offset)
                assert log.first_dirty_offset == stats.end_offset
        log.flush()
        clean_pass(log, now_ms)
        records = consume(log)
        # Offsets never change: every record is the one originally written at its offset.
        assert all(originals[r.offset] == (r.key, r.value) for r in records)
        assert [r.offset for r in records] == sorted({r.offset for r in records})
        # The last record of every key is the model's value (tombstones kept: they are young).
        last = {}
        for r in records:
            last[r.key] = r.value
        assert last == model
        # Below the cleaned point, every key appears once.
        cleaned = [r.key for r in records if r.offset < log.first_dirty_offset]
        assert len(cleaned) == len(set(cleaned))
        # A consumer starting at any offset (gaps included) reads the next kept record.
        kept = [r.offset for r in records]
        for offset in range(log.log_start_offset, log.next_offset):
            following = [o for o in kept if o >= offset]
            got = consume(log, offset)
            assert [r.offset for r in got] == following
        log.close()


# -- tombstones ------------------------------------------------------------------------------


def test_tombstones_vanish_after_delete_retention_ms(log_dir: Path) -> None:
    log = _compact_log(log_dir, delete_retention_ms=60_000)
    now = wall_ms()
    log.append(keyed([(b"a", b"1"), (b"b", b"1")]), now_ms=now)
    log.append(keyed([(b"a", None)]), now_ms=now)  # tombstone for a
    _roll_and_flush(log, now)
    clean_pass(log, now)
    assert [(r.key, r.value) for r in consume(log)] == [(b"b", b"1"), (b"a", None)]
    # A later pass within delete.retention.ms keeps the tombstone.
    log.append(keyed([(b"c", b"1")]), now_ms=now)
    _roll_and_flush(log, now)
    clean_pass(log, now + 59_000)
    assert (b"a", None) in [(r.key, r.value) for r in consume(log)]
    # Once the tombstone's segment is older than delete.retention.ms, the next pass drops it.
    log.append(keyed([(b"d", b"1")]), now_ms=now)
    _roll_and_flush(log, now)
    stats = clean_pass(log, now + 61_000)
    assert stats.tombstones_removed == 1
    assert [(r.key, r.value) for r in consume(log)] == [(b"b", b"1"), (b"c", b"1"), (b"d", b"1")]


def test_cleaned_segment_keeps_the_newest_mtime_of_its_sources(log_dir: Path) -> None:
    log = _compact_log(log_dir, segment_bytes=200)
    now = wall_ms()
    for i in range(4):
        log.append(keyed([(b"k", str(i).encode() * 40)]), now_ms=now)
    _roll_and_flush(log, now)
    for n, segment in enumerate(log.segments[:-1]):
        segment.set_last_modified_ms(now - 100_000 + n)
    newest = max(s.last_modified_ms for s in log.segments[:-1])
    log.config = config(**COMPACT, segment_bytes=10_000)  # one group for all four
    clean_pass(log, now)
    assert len(log.segments) == 2
    assert log.segments[0].last_modified_ms == newest


# -- batches: offsets, codecs, empty batches, grouping ---------------------------------------


def test_cleaned_batches_keep_offsets_codec_and_last_offset(log_dir: Path) -> None:
    log = _compact_log(log_dir)
    now = wall_ms()
    log.append(
        keyed([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], compression=Compression.GZIP), now_ms=now
    )
    log.append(keyed([(b"b", b"2")], compression=Compression.ZSTD), now_ms=now)
    log.append(keyed([(b"c", b"2"), (b"a", b"2")]), now_ms=now)  # last batch: all kept
    _roll_and_flush(log, now)
    clean_pass(log, now)
    segment = log.segments[0]
    data = region_bytes(segment.read(0, 1 << 20))  # type: ignore[arg-type]
    headers = [validate_batch(raw) for raw in split_batches(data)]
    # The first batch lost a and b and c... all three are superseded: it is gone entirely;
    # the second batch (b=2) survives with its codec; the third is copied unchanged.
    assert [(h.base_offset, h.last_offset, h.record_count, h.compression) for h in headers] == [
        (3, 3, 1, Compression.ZSTD),
        (4, 5, 2, Compression.NONE),
    ]


def test_partially_kept_batch_is_rebuilt_with_its_offset_range(log_dir: Path) -> None:
    log = _compact_log(log_dir)
    now = wall_ms()
    log.append(
        keyed([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], compression=Compression.GZIP), now_ms=now
    )
    log.append(keyed([(b"a", b"2")]), now_ms=now)
    _roll_and_flush(log, now)
    clean_pass(log, now)
    data = region_bytes(log.segments[0].read(0, 1 << 20))  # type: ignore[arg-type]
    first = validate_batch(split_batches(data)[0])
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 2, 2)
    assert first.compression == Compression.GZIP
    assert [(r.offset, r.key) for r in consume(log)] == [(1, b"b"), (2, b"c"), (3, b"a")]


def test_a_group_whose_last_batch_is_emptied_keeps_its_offset_range(log_dir: Path) -> None:
    log = _compact_log(log_dir, segment_bytes=100)
    now = wall_ms()
    log.append(keyed([(b"a", b"1")]), now_ms=now)  # segment 0
    log.append(keyed([(b"b", b"1")]), now_ms=now)  # segment 1
    log.append(keyed([(b"b", b"2")]), now_ms=now)  # segment 2
    log.append(keyed([(b"z", b"1")]), now_ms=now)  # segment 3 (then active 4)
    _roll_and_flush(log, now)
    stats = CleaningStats()
    offset_map = OffsetMap(100)
    end = build_offset_map(cleanable_log(log, now), offset_map, stats)
    group = log.segments[0:2]  # offsets 0 and 1: b=1 at offset 1 is superseded
    cleaned = clean_group(log, group, offset_map, stats, now_ms=now)
    assert cleaned.next_offset_from_data() == 2  # an empty batch still covers offset 1
    assert commit_group(log, cleaned, group, stats, now_ms=now)
    assert end == 4
    assert [(r.offset, r.key) for r in consume(log)] == [(0, b"a"), (2, b"b"), (3, b"z")]
    assert [s.base_offset for s in log.segments] == [0, 2, 3, 4]


def test_small_cleaned_segments_are_grouped(log_dir: Path) -> None:
    log = _compact_log(log_dir, segment_bytes=400)
    now = wall_ms()
    for i in range(40):
        log.append(keyed([(f"k{i % 3}".encode(), b"x" * 60)]), now_ms=now)
    _roll_and_flush(log, now)
    before = len(log.segments)
    assert before >= 12
    # Groups are cut by the sources' sizes (Kafka's groupSegmentsBySize): full segments stay
    # apart in the first pass, which leaves many tiny ones...
    clean_pass(log, now)
    assert len(log.segments) == before
    assert sum(s.size_bytes for s in log.segments) < 5 * 400
    # ...and the next pass merges them, up to segment.bytes per segment.
    log.append(keyed([(b"k0", b"y")]), now_ms=now)
    _roll_and_flush(log, now)
    clean_pass(log, now)
    assert len(log.segments) <= 5
    assert all(s.size_bytes <= 400 for s in log.segments)
    assert sorted({r.key for r in consume(log)}) == [b"k0", b"k1", b"k2"]


def test_offset_map_capacity_limits_a_pass_to_whole_segments(log_dir: Path) -> None:
    log = _compact_log(log_dir, segment_bytes=200)
    now = wall_ms()
    for i in range(12):
        log.append(keyed([(f"k{i}".encode(), b"v" * 50)]), now_ms=now)
    _roll_and_flush(log, now)
    stats = clean_pass(log, now, capacity=3)
    assert stats.keys_mapped >= 3
    assert stats.end_offset < log.next_offset
    assert stats.end_offset in {s.base_offset for s in log.segments}
    while log.first_dirty_offset < log.segments[-1].base_offset:
        clean_pass(log, now, capacity=3)
    assert len(consume(log)) == 12


# -- keyless records ---------------------------------------------------------------------------


def test_compacted_topic_refuses_keyless_records(log_dir: Path) -> None:
    log = _compact_log(log_dir)
    with pytest.raises(CorruptRecordError, match="without key"):
        log.append(keyed([(b"a", b"1"), (None, b"2")]), now_ms=0)
    assert log.next_offset == 0


def test_cleaner_drops_keyless_records_written_before_compaction(log_dir: Path) -> None:
    log = open_log(log_dir, config(cleanup_policy="delete"))
    now = wall_ms()
    log.append(keyed([(None, b"1"), (b"a", b"1")], compression=Compression.LZ4), now_ms=now)
    log.append(keyed([(None, b"2")]), now_ms=now)
    log.config = config(**COMPACT)  # AlterConfigs to cleanup.policy=compact
    _roll_and_flush(log, now)
    stats = clean_pass(log, now)
    assert stats.keyless_removed == 2
    assert [(r.offset, r.key) for r in consume(log)] == [(1, b"a")]


# -- concurrency with readers and retention -----------------------------------------------------


def test_a_reader_across_a_swap_sees_latest_values_and_no_stale_ones(log_dir: Path) -> None:
    log = _compact_log(log_dir, segment_bytes=300)
    now = wall_ms()
    for i in range(30):
        log.append(keyed([(f"k{i % 5}".encode(), str(i).encode())]), now_ms=now)
    _roll_and_flush(log, now)
    latest = {f"k{i % 5}".encode(): i for i in range(30)}
    # The reader got through the first 10 offsets before the pass and holds a region.
    seen = consume(log)[:10]
    held = log.read(10, 1 << 20).region
    assert held is not None
    held_bytes = region_bytes(held)
    stats = clean_pass(log, now)
    assert region_bytes(held) == held_bytes  # old files stay readable until the delay passes
    rest = consume(log, 10)
    # After the resume point, nothing but latest values below the cleaned point...
    assert all(latest[r.key] == r.offset for r in rest if r.offset < stats.end_offset)
    # ...and no key's latest value is missing overall.
    got = {r.key: r.offset for r in seen + rest}
    assert got == latest


def test_commit_is_abandoned_if_retention_removed_the_group(log_dir: Path) -> None:
    log = _compact_log(log_dir, segment_bytes=100, cleanup_policy="compact,delete", retention_ms=1)
    now = wall_ms()
    for i in range(4):
        log.append(keyed([(b"k", str(i).encode())], ts=now - 10_000), now_ms=now)
    _roll_and_flush(log, now)
    stats = CleaningStats()
    offset_map = OffsetMap(100)
    end = build_offset_map(cleanable_log(log, now), offset_map, stats)
    group = plan_groups(log, end)[0]
    cleaned = clean_group(log, group, offset_map, stats, now_ms=now)
    assert apply_retention(log, now_ms=now)  # retention got there first
    assert not commit_group(log, cleaned, group, stats, now_ms=now)
    assert stats.aborted
    assert not segment_files(log_dir, ".cleaned") and not segment_files(log_dir, ".swap")
    assert log.first_dirty_offset <= log.log_start_offset or log.first_dirty_offset == 0


def test_active_segment_is_never_cleaned(log_dir: Path) -> None:
    log = _compact_log(log_dir)
    now = wall_ms()
    for i in range(5):
        log.append(keyed([(b"k", str(i).encode())]), now_ms=now)
    log.flush()
    stats = clean_pass(log, now)
    assert stats.segments_before == 0
    assert len(consume(log)) == 5
    assert [p for p in log_dir.iterdir() if p.suffix == ".log"] == [log.active_segment.log_path]


def test_log_records_batch_count_after_clean(log_dir: Path) -> None:
    """A cleaned log reopens (after a crash) with the same records: the files are valid."""
    log = _compact_log(log_dir, segment_bytes=250)
    now = wall_ms()
    for i in range(20):
        log.append(
            keyed([(f"k{i % 4}".encode(), str(i).encode())], compression=Compression.SNAPPY),
            now_ms=now,
        )
    _roll_and_flush(log, now)
    clean_pass(log, now)
    records = consume(log)
    reopened = open_log(log_dir, log.config)  # unclean: every segment is re-validated
    assert consume(reopened) == records
    for segment in reopened.segments:
        data = (
            region_bytes(segment.read(segment.base_offset, 1 << 20)) if segment.size_bytes else b""
        )
        for raw in split_batches(data):
            parse_batch_header(raw)
