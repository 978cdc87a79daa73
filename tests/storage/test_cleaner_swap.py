"""Crash safety of the ``.cleaned`` → ``.swap`` → live protocol: every intermediate on-disk
state, recreated file by file, loads as either the old segments or the new ones."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from odradek.protocol.records import Record
from odradek.storage.cleaner.clean import CleaningStats, build_offset_map, clean_group, plan_groups
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.plan import cleanable_log
from tests.storage.cleaner_helpers import consume, expected_after_pass, keyed, wall_ms
from tests.storage.conftest import config, open_log

SUFFIXES = (".index", ".timeindex", ".log")  # the order LogSegment.change_suffix renames in


def _name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def _prepare(directory: Path) -> tuple[list[Record], list[Record], list[tuple[str, str]]]:
    """A log with a cleaned group on disk as ``.cleaned`` files, closed.

    Returns the records before, the records after a completed swap, and the renames
    ``Log.replace_segments`` performs, in order.
    """
    cfg = config(cleanup_policy="compact", min_cleanable_dirty_ratio=0, segment_bytes=160)
    log = open_log(directory, cfg)
    now = wall_ms()
    for i in range(12):
        log.append(keyed([(f"k{i % 3}".encode(), f"v{i}".encode() * 8)]), now_ms=now)
    log.roll(now)
    log.flush()
    log.config = config(cleanup_policy="compact", min_cleanable_dirty_ratio=0)  # one group
    before = consume(log)
    cleanable = cleanable_log(log, now)
    stats = CleaningStats()
    offset_map = OffsetMap(100)
    end = build_offset_map(cleanable, offset_map, stats)
    [group] = plan_groups(log, end)
    assert len(group) >= 4
    cleaned = clean_group(log, group, offset_map, stats, now_ms=now)
    after = expected_after_pass(before, cleanable.first_dirty_offset, end)
    cleaned.close()
    log.close()
    new_base = group[0].base_offset
    renames = [(_name(new_base, s + ".cleaned"), _name(new_base, s + ".swap")) for s in SUFFIXES]
    for segment in group:
        renames += [
            (_name(segment.base_offset, s), _name(segment.base_offset, s + ".deleted"))
            for s in SUFFIXES
        ]
    renames += [(_name(new_base, s + ".swap"), _name(new_base, s)) for s in SUFFIXES]
    return before, after, renames


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, list, list]:
    directory = tmp_path_factory.mktemp("swap") / "t-0"
    before, after, renames = _prepare(directory)
    assert before != after
    return directory, before, after, renames


def test_every_crash_point_recovers_old_or_new(
    prepared: tuple[Path, list, list, list], tmp_path: Path
) -> None:
    pristine, before, after, renames = prepared
    for done in range(len(renames) + 1):
        directory = tmp_path / f"crash-{done}" / "t-0"
        shutil.copytree(pristine, directory)
        for old, new in renames[:done]:
            os.replace(directory / old, directory / new)
        log = open_log(directory, config(cleanup_policy="compact"))
        # Until the .log reaches .swap the pass never happened; from then on it did.
        expected = before if done < len(SUFFIXES) else after
        assert consume(log) == expected, f"crash after {done} renames: {renames[:done]}"
        leftovers = [
            n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap", ".deleted"))
        ]
        assert leftovers == [], (done, leftovers)
        log.close()


def test_a_torn_cleaned_file_is_discarded(
    prepared: tuple[Path, list, list, list], tmp_path: Path
) -> None:
    pristine, before, _, renames = prepared
    directory = tmp_path / "torn" / "t-0"
    shutil.copytree(pristine, directory)
    cleaned_log = directory / renames[2][0]
    os.truncate(cleaned_log, cleaned_log.stat().st_size // 2)
    log = open_log(directory, config(cleanup_policy="compact"))
    assert consume(log) == before


def test_the_live_swap_recovers_to_new_after_a_crash(tmp_path: Path) -> None:
    """Through Log.replace_segments itself, then an unclean reopen."""
    from tests.storage.cleaner_helpers import clean_pass

    directory = tmp_path / "t-0"
    log = open_log(
        directory, config(cleanup_policy="compact", min_cleanable_dirty_ratio=0, segment_bytes=160)
    )
    now = wall_ms()
    for i in range(12):
        log.append(keyed([(f"k{i % 3}".encode(), f"v{i}".encode() * 8)]), now_ms=now)
    log.roll(now)
    log.flush()
    clean_pass(log, now)
    records = consume(log)
    # No close: as if the process died. The .deleted files are still there.
    assert any(n.endswith(".deleted") for n in os.listdir(directory))
    reopened = open_log(directory, log.config)
    assert consume(reopened) == records
    assert not any(n.endswith(".deleted") for n in os.listdir(directory))
