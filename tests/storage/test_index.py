"""Offset and time indexes on real temp files: Kafka's lookup, append, truncate and trim rules."""

from __future__ import annotations

import bisect
import io
import struct
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.storage.index import (
    DEFAULT_MAX_INDEX_BYTES,
    CorruptIndexError,
    IndexFullError,
    OffsetIndex,
    TimeIndex,
)

BASE = 1000


@pytest.fixture
def offset_path(tmp_path: Path) -> Path:
    return tmp_path / f"{BASE:020d}.index"


@pytest.fixture
def time_path(tmp_path: Path) -> Path:
    return tmp_path / f"{BASE:020d}.timeindex"


def _filled_offset_index(path: Path) -> OffsetIndex:
    index = OffsetIndex(path, BASE, 4096)
    for offset, position in [(1005, 0), (1010, 4200), (1020, 9000)]:
        index.append(offset, position)
    return index


# -- offset index: lookups ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (1010, (1010, 4200)),  # exact
        (1005, (1005, 0)),  # exact, first
        (1015, (1010, 4200)),  # between entries
        (1004, (BASE, 0)),  # before the first entry
        (999, (BASE, 0)),  # before the base offset
        (1020, (1020, 9000)),  # exact, last
        (10**12, (1020, 9000)),  # after the last (and past int32)
    ],
)
def test_offset_lookup(offset_path: Path, target: int, expected: tuple[int, int]) -> None:
    with _filled_offset_index(offset_path) as index:
        assert index.lookup(target) == expected


def test_empty_offset_index(offset_path: Path) -> None:
    with OffsetIndex(offset_path, BASE) as index:
        assert len(index) == 0
        assert index.lookup(5000) == (BASE, 0)
        assert index.last_offset == BASE
        assert index.size_bytes == 0
        assert list(index) == []
        index.sanity_check()


def test_entry_and_iteration(offset_path: Path) -> None:
    with _filled_offset_index(offset_path) as index:
        assert index.entry(1) == (1010, 4200)
        assert list(index) == [(1005, 0), (1010, 4200), (1020, 9000)]
        with pytest.raises(IndexError):
            index.entry(3)
        with pytest.raises(IndexError):
            index.entry(-1)


def test_on_disk_bytes_are_kafka_layout(offset_path: Path, time_path: Path) -> None:
    with OffsetIndex(offset_path, BASE) as index:
        index.append(1005, 77)
    assert offset_path.read_bytes() == struct.pack(">ii", 5, 77)
    with TimeIndex(time_path, BASE) as tindex:
        tindex.maybe_append(1_700_000_000_000, 1005)
    assert time_path.read_bytes() == struct.pack(">qi", 1_700_000_000_000, 5)


# -- offset index: append rules ----------------------------------------------------------------
def test_append_rules(offset_path: Path) -> None:
    with _filled_offset_index(offset_path) as index:
        with pytest.raises(ValueError):
            index.append(1020, 9500)  # offset not above the last
        with pytest.raises(ValueError):
            index.append(1019, 9500)  # offset going backwards
        with pytest.raises(ValueError):
            index.append(1030, 9000)  # position not above the last
        with pytest.raises(ValueError):
            index.append(BASE + 2**31, 10_000)  # relative offset overflows int32
        assert not index.can_append_offset(BASE + 2**31)
        assert index.can_append_offset(BASE + 2**31 - 1)
        index.append(BASE + 2**31 - 1, 10_000)
        assert index.last_offset == BASE + 2**31 - 1
        assert len(index) == 4


def test_append_below_base_offset(offset_path: Path) -> None:
    with OffsetIndex(offset_path, BASE) as index, pytest.raises(ValueError):
        index.append(BASE - 1, 0)


def test_full_offset_index(offset_path: Path) -> None:
    with OffsetIndex(offset_path, BASE, 8 * 3 + 5) as index:  # rounded down to 3 entries
        assert index.max_entries == 3
        for i in range(3):
            assert not index.is_full
            index.append(BASE + i, i * 100)
        assert index.is_full
        with pytest.raises(IndexFullError):
            index.append(BASE + 10, 1000)


def test_max_index_bytes_below_one_entry(offset_path: Path) -> None:
    with pytest.raises(ValueError):
        OffsetIndex(offset_path, BASE, 7)


# -- truncation --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("truncate_at", "remaining"),
    [
        (1010, [(1005, 0)]),  # exact entry: dropped with everything after
        (1011, [(1005, 0), (1010, 4200)]),  # between entries
        (1005, []),
        (900, []),
        (5000, [(1005, 0), (1010, 4200), (1020, 9000)]),  # past the end: no effect
    ],
)
def test_offset_truncate_to(
    offset_path: Path, truncate_at: int, remaining: list[tuple[int, int]]
) -> None:
    with _filled_offset_index(offset_path) as index:
        index.truncate_to(truncate_at)
        assert list(index) == remaining
        assert index.last_offset == (remaining[-1][0] if remaining else BASE)
        # Appending resumes right after the kept prefix.
        index.append(truncate_at + 1000, 20_000)
        assert index.lookup(truncate_at + 1000) == (truncate_at + 1000, 20_000)


def test_truncate_drops_everything(offset_path: Path) -> None:
    with _filled_offset_index(offset_path) as index:
        index.truncate()
        assert len(index) == 0
        assert index.lookup(1020) == (BASE, 0)
        index.append(1001, 5)
        assert list(index) == [(1001, 5)]


# -- file management ---------------------------------------------------------------------------
def test_preallocation_and_trim_on_close(offset_path: Path) -> None:
    index = OffsetIndex(offset_path, BASE)
    assert offset_path.stat().st_size == DEFAULT_MAX_INDEX_BYTES
    assert index.max_entries == DEFAULT_MAX_INDEX_BYTES // 8
    index.append(1001, 0)
    index.append(1002, 100)
    index.flush()
    assert index.size_bytes == 16
    index.close()
    assert index.closed
    assert offset_path.stat().st_size == 16
    index.close()  # idempotent


def test_preallocation_rounds_down(time_path: Path) -> None:
    with TimeIndex(time_path, BASE, 100) as index:
        assert time_path.stat().st_size == 96
        assert index.max_entries == 8


def test_reopen_gives_same_entries(offset_path: Path, time_path: Path) -> None:
    _filled_offset_index(offset_path).close()
    with OffsetIndex(offset_path, BASE, 4096) as index:
        assert list(index) == [(1005, 0), (1010, 4200), (1020, 9000)]
        assert index.last_offset == 1020
        assert offset_path.stat().st_size == 4096  # writable: preallocated again
        index.sanity_check()
        index.append(1030, 10_000)
    assert offset_path.stat().st_size == 32

    with TimeIndex(time_path, BASE) as tindex:
        tindex.maybe_append(10, 1001)
        tindex.maybe_append(20, 1003)
    with TimeIndex(time_path, BASE, writable=False) as tindex:
        assert list(tindex) == [(10, 1001), (20, 1003)]
        assert tindex.last_entry == (20, 1003)
        assert tindex.lookup(15) == (10, 1001)
    assert time_path.stat().st_size == 24


def test_read_only(offset_path: Path) -> None:
    _filled_offset_index(offset_path).close()
    index = OffsetIndex(offset_path, BASE, writable=False)
    assert offset_path.stat().st_size == 24  # never extended
    assert index.lookup(1012) == (1010, 4200)
    with pytest.raises(io.UnsupportedOperation):
        index.append(1030, 10_000)
    with pytest.raises(io.UnsupportedOperation):
        index.truncate_to(1010)
    with pytest.raises(io.UnsupportedOperation):
        index.resize(4096)
    index.flush()
    index.close()
    assert offset_path.stat().st_size == 24
    with pytest.raises(ValueError):
        index.lookup(1012)


def test_read_only_empty_file(offset_path: Path, time_path: Path) -> None:
    offset_path.touch()
    with OffsetIndex(offset_path, BASE, writable=False) as index:
        assert len(index) == 0
        assert index.lookup(1012) == (BASE, 0)
        index.sanity_check()
    with TimeIndex(time_path, BASE, writable=False) as tindex:  # created when missing
        assert time_path.stat().st_size == 0
        assert tindex.lookup(5) == (-1, BASE)
        assert tindex.last_entry == (-1, BASE)


def test_trim_then_append_and_resize(offset_path: Path) -> None:
    with OffsetIndex(offset_path, BASE, 4096) as index:
        index.trim_to_valid_size()  # zero entries: zero-length file, no mapping
        assert offset_path.stat().st_size == 0
        assert index.is_full
        with pytest.raises(IndexFullError):
            index.append(1001, 0)
        assert index.resize(4096)
        assert not index.resize(4096 + 7)  # same size once rounded
        index.append(1001, 0)
        index.append(1002, 10)
        index.trim_to_valid_size()
        assert offset_path.stat().st_size == 16
        assert index.is_full
        assert index.lookup(1002) == (1002, 10)
        with pytest.raises(ValueError):
            index.resize(8)  # would drop an entry in use


def test_rename_and_delete(offset_path: Path) -> None:
    index = _filled_offset_index(offset_path)
    deleted = offset_path.with_name(offset_path.name + ".deleted")
    index.rename(deleted)
    assert index.path == deleted
    assert not offset_path.exists()
    assert index.lookup(1015) == (1010, 4200)  # mapping survives the rename
    index.append(1030, 10_000)
    assert index.delete()
    assert not deleted.exists()
    assert not index.delete()


def test_rename_then_close_trims_new_path(offset_path: Path) -> None:
    index = _filled_offset_index(offset_path)
    swap = offset_path.with_name(offset_path.name + ".swap")
    index.rename(swap)
    index.close()
    assert swap.stat().st_size == 24


# -- sanity checks -----------------------------------------------------------------------------
def test_sanity_check_passes_on_good_index(offset_path: Path) -> None:
    with _filled_offset_index(offset_path) as index:
        index.sanity_check()


def test_sanity_check_length_not_multiple(offset_path: Path) -> None:
    offset_path.write_bytes(struct.pack(">ii", 5, 0) + b"\x00\x01\x02")
    for writable in (False, True):
        index = OffsetIndex(offset_path, BASE, writable=writable)
        assert len(index) == 1
        with pytest.raises(CorruptIndexError, match="multiple of 8"):
            index.sanity_check()
        if writable:
            index.truncate()  # emptied for a rebuild: no longer corrupt
            index.sanity_check()
        index.close()


def test_sanity_check_non_monotonic_offsets(offset_path: Path) -> None:
    offset_path.write_bytes(struct.pack(">iiii", 5, 0, 3, 100))
    with (
        OffsetIndex(offset_path, BASE, writable=False) as index,
        pytest.raises(CorruptIndexError, match="offsets do not strictly increase at entry 1"),
    ):
        index.sanity_check()


def test_sanity_check_non_monotonic_positions(offset_path: Path) -> None:
    offset_path.write_bytes(struct.pack(">iiii", 5, 100, 6, 100))
    with (
        OffsetIndex(offset_path, BASE, writable=False) as index,
        pytest.raises(CorruptIndexError, match="positions"),
    ):
        index.sanity_check()


def test_sanity_check_zero_tail(offset_path: Path) -> None:
    """A preallocated file left by a crash: real entries, then zeros read as entries."""
    with _filled_offset_index(offset_path) as index:
        index.flush()
        crashed = offset_path.with_name("crashed.index")
        crashed.write_bytes(offset_path.read_bytes())  # still preallocated, as a crash leaves it
    with OffsetIndex(crashed, BASE, 4096) as reopened:
        assert len(reopened) == 4096 // 8
        assert reopened.is_full
        with pytest.raises(CorruptIndexError, match="all zeros"):
            reopened.sanity_check()
        reopened.truncate()  # what a rebuild starts with
        reopened.sanity_check()


def test_sanity_check_below_base_offset(offset_path: Path) -> None:
    offset_path.write_bytes(struct.pack(">ii", -3, 0))
    with (
        OffsetIndex(offset_path, BASE, writable=False) as index,
        pytest.raises(CorruptIndexError, match="below the base offset"),
    ):
        index.sanity_check()


def test_sanity_check_zero_length_file(offset_path: Path, time_path: Path) -> None:
    offset_path.touch()
    time_path.touch()
    for cls, path in ((OffsetIndex, offset_path), (TimeIndex, time_path)):
        for writable in (False, True):
            with cls(path, BASE, writable=writable) as index:
                assert len(index) == 0
                index.sanity_check()


def test_time_index_sanity_checks(time_path: Path) -> None:
    cases = {
        struct.pack(">qiqi", 20, 1, 10, 2): "timestamps",
        struct.pack(">qiqi", 10, 5, 20, 2): "offsets decrease",
        struct.pack(">qi", 10, 1) + bytes(12): "all zeros",
        struct.pack(">qi", 10, -1): "below the base offset",
        struct.pack(">qi", 10, 1) + b"\x00": "multiple of 12",
    }
    for content, message in cases.items():
        time_path.write_bytes(content)
        with (
            TimeIndex(time_path, BASE, writable=False) as index,
            pytest.raises(CorruptIndexError, match=message),
        ):
            index.sanity_check()
    time_path.write_bytes(struct.pack(">qiqi", 10, 1, 20, 1))  # same offset, later timestamp
    with TimeIndex(time_path, BASE, writable=False) as index:
        index.sanity_check()


# -- time index --------------------------------------------------------------------------------
def test_time_index_monotonic_rule(time_path: Path) -> None:
    with TimeIndex(time_path, BASE) as index:
        assert index.last_entry == (-1, BASE)
        assert not index.maybe_append(-1, 1000)  # no timestamp: never indexed
        assert index.maybe_append(100, 1001)
        assert not index.maybe_append(100, 1001)  # same entry again (segment closing)
        assert not index.maybe_append(100, 1005)  # equal timestamp: skipped
        with pytest.raises(ValueError):
            index.maybe_append(99, 1006)  # timestamp going backwards
        with pytest.raises(ValueError):
            index.maybe_append(200, 1000)  # offset going backwards
        assert index.maybe_append(200, 1001)  # same offset, later timestamp
        assert index.maybe_append(300, 1010)
        assert list(index) == [(100, 1001), (200, 1001), (300, 1010)]
        assert index.last_entry == (300, 1010)
        with pytest.raises(ValueError):
            index.maybe_append(400, BASE + 2**31)


@pytest.mark.parametrize(
    ("target", "expected"),
    [(100, (100, 1001)), (150, (100, 1001)), (99, (-1, BASE)), (10**15, (300, 1010))],
)
def test_time_lookup(time_path: Path, target: int, expected: tuple[int, int]) -> None:
    with TimeIndex(time_path, BASE) as index:
        for timestamp, offset in [(100, 1001), (200, 1004), (300, 1010)]:
            index.maybe_append(timestamp, offset)
        assert index.lookup(target) == expected


def test_time_index_full_keeps_slot_for_roll(time_path: Path) -> None:
    with TimeIndex(time_path, BASE, 12 * 3) as index:
        assert index.max_entries == 3
        index.maybe_append(1, 1001)
        assert not index.is_full
        index.maybe_append(2, 1002)
        assert index.is_full  # two of three slots: the last is kept for the roll
        with pytest.raises(IndexFullError):
            index.maybe_append(3, 1003)
        assert index.maybe_append(3, 1003, skip_full_check=True)
        assert not index.maybe_append(3, 1003, skip_full_check=True)  # no-op, not an error
        with pytest.raises(IndexFullError):
            index.maybe_append(4, 1004, skip_full_check=True)
        assert len(index) == 3


def test_time_truncate_to(time_path: Path) -> None:
    with TimeIndex(time_path, BASE) as index:
        for timestamp, offset in [(10, 1001), (20, 1001), (30, 1005), (40, 1009)]:
            index.maybe_append(timestamp, offset)
        index.truncate_to(1009)
        assert index.last_entry == (30, 1005)
        index.truncate_to(1002)
        assert list(index) == [(10, 1001), (20, 1001)]
        index.truncate_to(1001)  # both entries at the offset go
        assert len(index) == 0
        assert index.last_entry == (-1, BASE)
        assert index.maybe_append(5, 1000)


# -- concurrency contract ----------------------------------------------------------------------
def test_reader_thread_sees_consistent_prefix(offset_path: Path) -> None:
    """One writer appends while another thread looks up: every answer is a whole entry."""
    index = OffsetIndex(offset_path, BASE, 8 * 20_000)
    done = threading.Event()
    bad: list[tuple[int, tuple[int, int]]] = []

    def reader() -> None:
        target = BASE
        while not done.is_set():
            target = BASE + (target * 7919 + 13) % 40_000
            found = index.lookup(target)
            offset, position = found
            if found != (BASE, 0) and (offset > target or position != (offset - BASE) * 10):
                bad.append((target, found))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for relative in range(1, 40_000, 2):
            index.append(BASE + relative, relative * 10)
    finally:
        done.set()
        thread.join()
    assert bad == []
    index.close()
    with pytest.raises(ValueError):
        index.append(BASE + 50_000, 500_000)


# -- property tests against a list model -------------------------------------------------------
@st.composite
def _offset_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    offsets = sorted(draw(st.sets(st.integers(0, 2**31 - 1), max_size=300)))
    positions = sorted(draw(st.sets(st.integers(0, 2**31 - 1), min_size=len(offsets))))
    return [(BASE + o, p) for o, p in zip(offsets, positions[: len(offsets)], strict=True)]


@settings(max_examples=60, deadline=None)
@given(
    entries=_offset_entries(),
    targets=st.lists(st.integers(BASE - 10, BASE + 2**31 + 10), max_size=40),
    warm_small=st.booleans(),
)
def test_offset_lookup_matches_model(
    entries: list[tuple[int, int]], targets: list[int], warm_small: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        index = OffsetIndex(Path(tmp) / "x.index", BASE, 8 * 400)
        if warm_small:
            index._warm_entries = 3  # exercise the warm-section branch with few entries
        for offset, position in entries:
            index.append(offset, position)
        keys = [o for o, _ in entries]
        for target in targets + keys:
            slot = bisect.bisect_right(keys, target) - 1
            assert index.lookup(target) == (entries[slot] if slot >= 0 else (BASE, 0))
        index.sanity_check()
        if targets:
            index.truncate_to(targets[0])
            assert list(index) == [e for e in entries if e[0] < targets[0]]
        index.close()
        reopened = OffsetIndex(Path(tmp) / "x.index", BASE, writable=False)
        assert list(reopened) == [e for e in entries if not targets or e[0] < targets[0]]
        reopened.sanity_check()
        reopened.close()


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 50)), max_size=200),
    targets=st.lists(st.integers(-5, 10**6), max_size=40),
)
def test_time_lookup_matches_model(steps: list[tuple[int, int]], targets: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        index = TimeIndex(Path(tmp) / "x.timeindex", BASE, 12 * 400)
        index._warm_entries = 4
        model: list[tuple[int, int]] = []
        timestamp, offset = -1, BASE
        for dt, doff in steps:  # non-decreasing timestamps and offsets, as a log produces
            timestamp, offset = timestamp + dt, offset + doff
            expected = timestamp > (model[-1][0] if model else -1)
            assert index.maybe_append(timestamp, offset) == expected
            if expected:
                model.append((timestamp, offset))
        assert list(index) == model
        keys = [t for t, _ in model]
        for target in targets + keys:
            slot = bisect.bisect_right(keys, target) - 1
            assert index.lookup(target) == (model[slot] if slot >= 0 else (-1, BASE))
        index.sanity_check()
        index.close()
