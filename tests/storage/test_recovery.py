"""Crash states recreated on disk, then loaded: Kafka's LogLoader rules (docs/architecture.md §4).

A "crash" here drops a Log without closing it: the ``.log`` files hold what was written, the
active segment's indexes are still preallocated (an untrimmed zero tail), nothing is flushed.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import CorruptRecordError, recompute_crc, validate_batch
from odradek.storage.config import LogConfig
from odradek.storage.errors import LogCorruptedError
from odradek.storage.loader import load_segments
from odradek.storage.log import Log
from odradek.storage.timestamp_lookup import offset_for_timestamp
from tests.storage.conftest import (
    all_records,
    batch,
    config,
    open_log,
    region_bytes,
    segment_files,
)
from tests.testdata import kafka_written_dir


def crash(log: Log) -> None:
    """Stop using ``log`` as a crash would: no flush, no index trim, no final index entries."""
    for segment in log.segments:
        segment.file.close()


def name(base: int, suffix: str = ".log") -> str:
    return f"{base:020d}{suffix}"


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        (byte,) = f.read(1)
        f.seek(position)
        f.write(bytes([byte ^ 0x5A]))


@dataclass
class Batch:
    segment: int  # base offset of its segment
    position: int
    size: int
    base_offset: int
    last_offset: int


def layout(log: Log) -> list[Batch]:
    out = []
    for segment in log.segments:
        data = os.pread(segment.file.fileno(), segment.size_bytes, 0)
        position = 0
        while position < len(data):
            header = validate_batch(data, position)
            out.append(
                Batch(
                    segment.base_offset,
                    position,
                    header.size_bytes,
                    header.base_offset,
                    header.last_offset,
                )
            )
            position += header.size_bytes
    return out


SIZE = len(batch(2))
CFG = config(segment_bytes=4 * SIZE, index_interval_bytes=SIZE, segment_index_bytes=4096)


def build(directory: Path, count: int = 12, cfg: LogConfig = CFG) -> Log:
    """A log of ``count`` two-record batches, 4 per segment, timestamps 1000 + i."""
    log = open_log(directory, cfg)
    for i in range(count):
        log.append(batch(2, ts=[1000 + i, 990 + i], tag=f"r{i}-"), now_ms=0)
    return log


def offsets(log: Log) -> list[int]:
    return [r.offset for r in all_records(log)]


# -- torn and garbage tails (hypothesis) ------------------------------------------------------


class Reference:
    """A crashed log's files (bytes by name) and where its batches were."""

    def __init__(
        self, files: dict[str, bytes], batches: list[Batch], bases: list[int], recovery_point: int
    ) -> None:
        self.files = files
        self.batches = batches
        self.bases = bases
        self.recovery_point = recovery_point

    def __repr__(self) -> str:
        return f"Reference(bases={self.bases}, recovery_point={self.recovery_point})"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    directory = tmp_path_factory.mktemp("reference") / "orders-0"
    log = build(directory, 10)
    log.flush()
    log.append(batch(2, ts=2000), now_ms=0)  # unflushed from here on
    log.append(batch(1, ts=2001), now_ms=0)
    log.append(batch(3, ts=2002), now_ms=0)
    batches = layout(log)
    bases = [s.base_offset for s in log.segments]
    recovery_point = log.recovery_point
    crash(log)
    files = {p.name: p.read_bytes() for p in directory.iterdir()}
    assert len(bases) == 4 and recovery_point == 20
    return Reference(files, batches, bases, recovery_point)


def _restore(ref: Reference, directory: Path) -> None:
    directory.mkdir()
    for file_name, data in ref.files.items():
        (directory / file_name).write_bytes(data)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_torn_tail_truncates_to_the_last_complete_batch(reference: Reference, data) -> None:
    """A cut in the last segment above the recovery point is a torn tail: truncated. A cut
    anywhere else is damage: LogCorruptedError names the file and position, no file changes."""
    ref = reference
    # the segment holding the recovery point and every later one are re-validated
    recovering = max(b for b in ref.bases if b <= ref.recovery_point)
    torn = data.draw(st.sampled_from([b for b in ref.bases if b >= recovering]), label="torn")
    size = len(ref.files[name(torn)])
    cut = data.draw(st.integers(0, size), label="cut position")
    kept_in_torn = [b for b in ref.batches if b.segment == torn and b.position + b.size <= cut]
    boundary = max((b.position + b.size for b in kept_in_torn), default=0)
    prefix_end = kept_in_torn[-1].last_offset + 1 if kept_in_torn else torn
    damaged = cut != boundary and (torn != ref.bases[-1] or prefix_end < ref.recovery_point)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "orders-0"
        _restore(ref, directory)
        os.truncate(directory / name(torn), cut)
        if damaged:
            before = {n: (directory / n).read_bytes() for n in segment_files(directory)}
            with pytest.raises(LogCorruptedError) as raised:
                load_segments(
                    directory,
                    CFG,
                    log_start_offset=0,
                    recovery_point=ref.recovery_point,
                    clean_shutdown=False,
                )
            assert raised.value.log_file == directory / name(torn)
            assert raised.value.position == boundary
            assert {n: (directory / n).read_bytes() for n in segment_files(directory)} == before
            return
        kept = [b for b in ref.batches if b.segment != torn or b.position + b.size <= cut]
        # No invalid byte, so nothing to truncate (Kafka's rule): later segments stay, even if
        # a lost tail leaves a gap before them, as compaction can too.
        truncated = cut - boundary
        expected = [o for b in kept for o in range(b.base_offset, b.last_offset + 1)]
        bases = ref.bases
        expected_end = bases[-1] if kept[-1].segment < bases[-1] else expected[-1] + 1
        loaded = load_segments(
            directory,
            CFG,
            log_start_offset=0,
            recovery_point=ref.recovery_point,
            clean_shutdown=False,
        )
        assert loaded.next_offset == expected_end
        assert loaded.recovery_point == min(ref.recovery_point, expected_end)
        assert loaded.truncated_bytes == truncated
        assert [s.base_offset for s in loaded.segments] == bases
        assert segment_files(directory) == [name(b) for b in bases]
        assert (directory / name(torn)).stat().st_size == boundary
        log = Log(
            directory,
            "orders",
            0,
            CFG,
            loaded.segments,
            log_start_offset=0,
            recovery_point=loaded.recovery_point,
            next_offset=loaded.next_offset,
            now_ms=0,
        )
        assert offsets(log) == expected  # no valid batch before the tear is lost
        assert log.append(batch(1), now_ms=0).first_offset == expected_end
        log.close()


@settings(max_examples=40, deadline=None)
@given(garbage=st.binary(min_size=1, max_size=300))
def test_garbage_tail_is_cut_off(reference: Reference, garbage: bytes) -> None:
    ref = reference
    last = ref.bases[-1]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "orders-0"
        _restore(ref, directory)
        with open(directory / name(last), "ab") as f:
            f.write(garbage)
        loaded = load_segments(
            directory,
            CFG,
            log_start_offset=0,
            recovery_point=ref.recovery_point,
            clean_shutdown=False,
        )
        assert loaded.truncated_bytes == len(garbage)
        assert loaded.next_offset == ref.batches[-1].last_offset + 1
        assert (directory / name(last)).read_bytes() == ref.files[name(last)]
        for segment in loaded.segments:
            segment.close()


def test_truncation_is_logged_with_the_byte_count(
    log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = build(log_dir, 3)
    crash(log)
    with open(log_dir / name(0), "ab") as f:
        f.write(b"\x01" * 37)
    with caplog.at_level(logging.WARNING, logger="odradek.storage.loader"):
        log = open_log(log_dir, CFG)
    assert log.next_offset == 6
    assert any("truncated 37 bytes" in r.getMessage() for r in caplog.records)


# -- corruption in the middle ----------------------------------------------------------------


def test_corrupt_byte_in_an_earlier_segment_is_damage_and_nothing_is_deleted(
    log_dir: Path,
) -> None:
    """Issue 14, finding 1: the later segment may hold acknowledged records; never delete it."""
    log = build(log_dir, 12)  # segments 0, 8, 16
    batches = layout(log)
    crash(log)
    victim = batches[5]  # second batch of segment 8
    assert victim.segment == 8
    flip_byte(log_dir / name(8), victim.position + 61 + 3)
    logs_before = {n: (log_dir / n).read_bytes() for n in segment_files(log_dir)}
    with pytest.raises(LogCorruptedError, match="CRC") as raised:
        open_log(log_dir, CFG, recovery_point=8)
    assert raised.value.log_file == log_dir / name(8)
    assert raised.value.position == victim.position
    assert {n: (log_dir / n).read_bytes() for n in segment_files(log_dir)} == logs_before


def test_a_torn_tail_before_segments_a_power_cut_emptied_is_cut(log_dir: Path) -> None:
    """A power cut right after a roll: the rolled segment's tail and every byte of the new
    one were never written back. Nothing valid follows the torn bytes, so it is a torn tail
    (not damage): cut, the empty segment deleted, the log ends at its last whole batch."""
    log = build(log_dir, 12)  # segments 0, 8, 16
    batches = layout(log)
    crash(log)
    torn = [b for b in batches if b.segment == 8][-1]
    os.truncate(log_dir / name(8), torn.position + torn.size // 2)
    os.truncate(log_dir / name(16), 0)
    reopened = open_log(log_dir, CFG, recovery_point=8)
    assert [s.base_offset for s in reopened.segments] == [0, 8]
    assert reopened.next_offset == torn.base_offset
    assert not (log_dir / name(16)).exists()
    assert not (log_dir / name(16, ".index")).exists()
    assert offsets(reopened) == list(range(torn.base_offset))
    reopened.append(batch(1), now_ms=0)  # the log goes on from there
    assert reopened.next_offset == torn.base_offset + 1
    reopened.close()


def test_a_torn_region_followed_by_valid_batches_is_damage(log_dir: Path) -> None:
    log = build(log_dir, 12)
    batches = layout(log)
    crash(log)
    torn = [b for b in batches if b.segment == 8][-1]
    os.truncate(log_dir / name(8), torn.position + torn.size // 2)
    with pytest.raises(LogCorruptedError, match="other than the last"):
        open_log(log_dir, CFG, recovery_point=8)
    assert (log_dir / name(16)).stat().st_size > 0


def test_damage_below_the_recovery_point_of_the_last_segment_is_not_a_torn_tail(
    log_dir: Path,
) -> None:
    log = build(log_dir, 11)  # segments 0, 8, 16 (offsets 16..21)
    batches = layout(log)
    crash(log)
    victim = batches[-2]  # offsets 18-19, fsynced if the recovery point is 22
    flip_byte(log_dir / name(victim.segment), victim.position + 70)
    with pytest.raises(LogCorruptedError, match="below the recovery point 22"):
        open_log(log_dir, CFG, recovery_point=22)
    assert (log_dir / name(16)).stat().st_size == batches[-1].position + batches[-1].size


def test_a_valid_checksum_failing_another_check_is_damage(log_dir: Path) -> None:
    """A batch whose CRC matches was written whole: if a later check (here an unknown codec)
    fails, that is damage, not a torn tail, even at the end of the last segment."""
    log = build(log_dir, 2)
    tail = log.active_segment.size_bytes
    crash(log)
    bad = bytearray(batch(1))
    bad[22] |= 0x07  # attributes: compression codec 7, which does not exist
    recompute_crc(bad)
    with open(log_dir / name(0), "ab") as f:
        f.write(bad)
    with pytest.raises(LogCorruptedError, match="codec") as raised:
        open_log(log_dir, CFG, recovery_point=4)
    assert raised.value.position == tail
    assert (log_dir / name(0)).stat().st_size == tail + len(bad)


def test_a_valid_checksum_with_offsets_outside_the_segment_is_damage(log_dir: Path) -> None:
    """What a lying batch header (recordCount 2**31-1) leaves: no torn write makes it."""
    log = build(log_dir, 2)
    tail = log.active_segment.size_bytes
    crash(log)
    liar = bytearray(batch(1))
    liar[0:8] = (2**31 + 5).to_bytes(8, "big")  # baseOffset is outside the CRC
    with open(log_dir / name(0), "ab") as f:
        f.write(liar)
    with pytest.raises(LogCorruptedError, match="valid checksum") as raised:
        open_log(log_dir, CFG, recovery_point=4)
    assert raised.value.position == tail


def test_corrupt_byte_in_the_last_segment(log_dir: Path) -> None:
    log = build(log_dir, 11)
    batches = layout(log)
    crash(log)
    victim = batches[-2]
    flip_byte(log_dir / name(victim.segment), victim.position + 70)
    log = open_log(log_dir, CFG, recovery_point=16)
    assert log.next_offset == victim.base_offset
    assert offsets(log) == list(range(victim.base_offset))


def test_unclean_restart_revalidates_from_the_recovery_point_only(log_dir: Path) -> None:
    log = build(log_dir, 12)  # segments 0, 8, 16
    batches = layout(log)
    crash(log)
    early, late = batches[1], batches[10]  # in segments 0 and 16
    flip_byte(log_dir / name(0), early.position + 70)
    flip_byte(log_dir / name(16), late.position + 70)
    log = open_log(log_dir, CFG, recovery_point=17)  # inside segment 16
    assert log.next_offset == late.base_offset == 20
    assert log.recovery_point == 17
    # below the recovery point nothing was rescanned: the corrupt batch is still served
    raw = region_bytes(log.read(early.base_offset, early.size).region)
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batch(raw)
    log.close()
    # with a recovery point of 0 everything is re-validated: segment 0 is damaged (not last)
    with pytest.raises(LogCorruptedError) as raised:
        open_log(log_dir, CFG, recovery_point=0)
    assert (raised.value.log_file, raised.value.position) == (log_dir / name(0), early.position)
    assert segment_files(log_dir) == [name(0), name(8), name(16)]


def test_clean_restart_does_not_rescan(log_dir: Path) -> None:
    log = build(log_dir, 12)
    batches = layout(log)
    end = log.next_offset
    log.close()
    victim = batches[1]
    flip_byte(log_dir / name(0), victim.position + 70)  # bit rot after a clean shutdown
    log = open_log(log_dir, CFG, clean_shutdown=True, recovery_point=5)
    assert log.recovery_point == log.next_offset == end
    assert [s.base_offset for s in log.segments] == [0, 8, 16]
    raw = region_bytes(log.read(victim.base_offset, victim.size).region)
    with pytest.raises(CorruptRecordError):  # proof that the segment was not re-validated
        validate_batch(raw)
    log.close()


def test_unclean_restart_without_damage_keeps_everything(log_dir: Path) -> None:
    log = build(log_dir, 12)
    expected = all_records(log)
    rolled = {s.base_offset: (list(s.offset_index), list(s.time_index)) for s in log.segments}
    active_offsets = list(log.segments[-1].offset_index)
    crash(log)  # the active segment's indexes are left preallocated
    assert (log_dir / name(16, ".index")).stat().st_size == CFG.segment_index_bytes
    log = open_log(log_dir, CFG)
    assert all_records(log) == expected
    assert log.recovery_point == 0 and log.next_offset == 24
    for segment in log.segments[:-1]:  # rebuilt exactly as they were written
        entries = (list(segment.offset_index), list(segment.time_index))
        assert entries == rolled[segment.base_offset]
        assert segment.offset_index.path.stat().st_size == 8 * len(entries[0])
    assert list(log.segments[-1].offset_index) == active_offsets
    log.close()


def test_a_crash_with_multi_batch_appends_and_tiny_indexes_recovers(log_dir: Path) -> None:
    # Recovery indexes every batch, live appends index every request: a segment whose index
    # filled up from requests must still recover when its batches would need more entries.
    cfg = config(segment_index_bytes=24, index_interval_bytes=0)
    log = open_log(log_dir, cfg)
    for i in range(6):
        request = b"".join(batch(1, ts=100 * i + j) for j in range(3))
        log.append(request, now_ms=0)
    assert len(log.segments) > 1
    crash(log)
    log = open_log(log_dir, cfg)
    assert offsets(log) == list(range(18))
    for target in range(0, 600, 50):
        expected = next(((o, t) for o, t in _stamps(6) if t >= target), None)
        assert offset_for_timestamp(log, target) == expected
    log.append(batch(1, ts=10_000), now_ms=0)
    assert log.next_offset == 19


def test_recovery_keeps_batches_above_a_since_lowered_max_message_bytes(log_dir: Path) -> None:
    log = open_log(log_dir, config(max_message_bytes=2_000_000))
    log.append(batch(1, value_bytes=1_200_000), now_ms=0)
    log.append(batch(2), now_ms=0)
    crash(log)
    log = open_log(log_dir, config(max_message_bytes=100))  # lowered by alter configs
    assert log.next_offset == 3
    assert offsets(log) == [0, 1, 2]
    log.close()


def _stamps(requests: int) -> list[tuple[int, int]]:
    out = []
    for i in range(requests):
        for j in range(3):
            out.append((3 * i + j, 100 * i + j))
    return out


# -- indexes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("clean", [True, False])
def test_missing_indexes_are_rebuilt(log_dir: Path, clean: bool) -> None:
    log = build(log_dir, 12)
    originals = {s.base_offset: list(s.offset_index) for s in log.segments}
    times = {s.base_offset: list(s.time_index) for s in log.segments}
    expected = all_records(log)
    log.close()
    (log_dir / name(0, ".index")).unlink()
    (log_dir / name(8, ".timeindex")).unlink()
    (log_dir / name(16, ".index")).unlink()
    (log_dir / name(16, ".timeindex")).unlink()
    log = open_log(log_dir, CFG, clean_shutdown=clean, recovery_point=24)
    assert all_records(log) == expected
    for segment in log.segments:
        assert list(segment.offset_index) == originals[segment.base_offset]
    assert list(log.segments[1].time_index) == times[8]
    for base in (0, 8):  # rebuilt and trimmed
        assert (log_dir / name(base, ".index")).stat().st_size == 8 * len(originals[base])
    for i in range(12):
        assert offset_for_timestamp(log, 1000 + i) == (2 * i, 1000 + i)
    log.close()


@pytest.mark.parametrize(
    ("suffix", "damage"),
    [
        (".index", lambda data: data + bytes(24)),  # untrimmed zero tail
        (".index", lambda data: data + b"\x01\x02\x03"),  # not a multiple of 8
        (".timeindex", lambda data: data + bytes(36)),
        (".timeindex", lambda data: data[:-5]),  # torn entry
        (".index", lambda data: data[8:16] + data[0:8] + data[16:]),  # not increasing
    ],
)
def test_corrupt_index_below_the_recovery_point_is_rebuilt(
    log_dir: Path, suffix: str, damage
) -> None:
    log = build(log_dir, 12, config(segment_bytes=4 * SIZE, index_interval_bytes=0))
    originals = [(list(s.offset_index), list(s.time_index)) for s in log.segments]
    expected = all_records(log)
    log.close()
    path = log_dir / name(8, suffix)
    path.write_bytes(damage(path.read_bytes()))
    log = open_log(log_dir, log.config, recovery_point=24)  # unclean, nothing to re-validate
    segment = log.segments[1]
    assert (list(segment.offset_index), list(segment.time_index)) == originals[1]
    assert path.stat().st_size == (8 if suffix == ".index" else 12) * len(
        originals[1][0 if suffix == ".index" else 1]
    )
    assert all_records(log) == expected
    log.close()


# -- leftover files --------------------------------------------------------------------------


def _three_small_segments(log_dir: Path) -> Log:
    """Segments 0 (offsets 0-2), 3 (3-5) and 6 (6-7), one record per batch."""
    size = len(batch(1))
    cfg = config(segment_bytes=3 * size)
    log = open_log(log_dir, cfg)
    for i in range(8):
        log.append(batch(1, ts=100 + i, tag=f"live{i}"), now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    log.close()
    return log


def _compacted(offsets_and_stamps: list[tuple[int, int]]) -> bytes:
    return b"".join(
        encode_batch([(b"k", f"compacted{o}".encode(), ts)], base_offset=o)
        for o, ts in offsets_and_stamps
    )


def test_deleted_tmp_and_cleaned_leftovers_are_removed(log_dir: Path) -> None:
    log = _three_small_segments(log_dir)
    for leftover in (
        name(0, ".log.deleted"),
        name(0, ".index.deleted"),
        name(0, ".timeindex.deleted"),
        name(3, ".log.cleaned"),
        name(3, ".index.cleaned"),
        "partition.metadata.tmp",
        name(6, ".log.tmp"),
    ):
        (log_dir / leftover).write_bytes(b"leftover")
    log = open_log(log_dir, log.config, clean_shutdown=True)
    # Besides the segments: the (empty) producer snapshots of the two rolls and the close,
    # and the leader epoch checkpoint, as Kafka keeps them.
    assert sorted(p.name for p in log_dir.iterdir()) == sorted(
        [name(b, s) for b in (0, 3, 6) for s in (".log", ".index", ".timeindex")]
        + [name(b, ".snapshot") for b in (3, 6, 8)]
        + ["leader-epoch-checkpoint"]
    )
    assert offsets(log) == list(range(8))
    log.close()


def test_swap_replacing_two_segments_completes(log_dir: Path) -> None:
    log = _three_small_segments(log_dir)
    (log_dir / name(0, ".log.swap")).write_bytes(_compacted([(1, 101), (4, 104), (5, 105)]))
    (log_dir / name(0, ".index.swap")).write_bytes(b"\x00" * 8)
    (log_dir / name(3, ".log.deleted")).write_bytes(b"renamed before the crash")
    log = open_log(log_dir, log.config, clean_shutdown=True)
    assert segment_files(log_dir) == [name(0), name(6)]
    assert not list(log_dir.glob("*.swap")) and not list(log_dir.glob(f"{3:020d}*"))
    assert [s.base_offset for s in log.segments] == [0, 6]
    records = all_records(log, 1)
    assert [r.offset for r in records] == [1, 4, 5, 6, 7]
    assert records[0].value == b"compacted1"
    assert offset_for_timestamp(log, 102) == (4, 104)
    assert log.next_offset == 8
    log.close()


def test_swap_at_or_above_the_lowest_cleaned_is_deleted(log_dir: Path) -> None:
    log = _three_small_segments(log_dir)
    (log_dir / name(0, ".log.swap")).write_bytes(_compacted([(2, 102)]))  # below: completed
    (log_dir / name(3, ".log.cleaned")).write_bytes(_compacted([(5, 105)]))
    (log_dir / name(3, ".log.swap")).write_bytes(_compacted([(4, 104)]))
    (log_dir / name(6, ".log.swap")).write_bytes(_compacted([(7, 107)]))
    log = open_log(log_dir, log.config, clean_shutdown=True)
    assert not list(log_dir.glob("*.swap")) and not list(log_dir.glob("*.cleaned"))
    assert segment_files(log_dir) == [name(0), name(3), name(6)]
    records = all_records(log, 2)
    assert [(r.offset, r.value) for r in records[:1]] == [(2, b"compacted2")]
    assert [r.offset for r in records] == [2, 3, 4, 5, 6, 7]
    assert records[1].value.startswith(b"live3")
    log.close()


def test_orphan_indexes_are_deleted(log_dir: Path) -> None:
    log = _three_small_segments(log_dir)
    for orphan in (name(99, ".index"), name(99, ".timeindex"), name(4, ".index")):
        (log_dir / orphan).write_bytes(b"\x00" * 12)
    log = open_log(log_dir, log.config)
    assert not (log_dir / name(99, ".index")).exists()
    assert not (log_dir / name(99, ".timeindex")).exists()
    assert not (log_dir / name(4, ".index")).exists()
    assert offsets(log) == list(range(8))
    log.close()


def test_empty_directory_starts_at_the_log_start_offset(log_dir: Path) -> None:
    log = open_log(log_dir, log_start_offset=50)
    assert log.next_offset == log.log_start_offset == 50
    assert segment_files(log_dir) == [name(50)]
    assert log.append(batch(1), now_ms=0).first_offset == 50


def test_checkpointed_log_start_offset_beyond_a_truncated_end_is_clamped(log_dir: Path) -> None:
    log = build(log_dir, 4)
    crash(log)
    os.truncate(log_dir / name(0), SIZE)
    log = open_log(log_dir, CFG, log_start_offset=6)
    assert log.next_offset == 2 and log.log_start_offset == 2
    assert log.read(2, 100).region is None


def test_kafka_written_segment_loads(log_dir: Path) -> None:
    source = kafka_written_dir()
    log_dir.mkdir()
    shutil.copyfile(source / "cluster-metadata-a.log", log_dir / name(0))
    log = open_log(log_dir)  # unclean: re-validated batch by batch
    assert log.next_offset == 4
    assert offsets(log)[-3:] == [1, 2, 3]
    assert log.append(batch(1), now_ms=0).first_offset == 4
    log.close()
