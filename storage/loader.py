"""Loading a partition directory at start-up: Kafka's ``LogLoader`` rules.

Files a crash can leave behind and what happens to them, in order:

1. ``*.deleted``: segments retention or compaction already removed from the log; deleted.
   ``*.tmp``: half-written replacements of small files (partition.metadata); deleted.
2. ``*.cleaned``: output of a cleaning pass that never reached the swap step; deleted. A
   ``*.swap`` whose base offset is at or above the lowest ``.cleaned`` offset belongs to the
   same unfinished pass (a split); deleted too.
3. The remaining ``*.swap`` segments are complete replacements: every live segment file whose
   base offset lies in ``[lowest swap base offset, highest swap next offset)`` is deleted, then
   each ``.swap`` is renamed to its live name. A crash anywhere in this step repeats it.
   The cleaner ends every cleaned segment at the last offset of the segments it replaces
   (with an empty batch if need be, :func:`odradek.storage.cleaner.records.empty_batch`), so this
   range is exactly theirs: recovery yields the old segments or the new one, never a mix.
4. Index files without a ``.log`` (orphans) are deleted; missing indexes are rebuilt.
5. After an unclean shutdown, every segment from the one holding the recovery point onwards is
   re-validated entry by entry (:meth:`LogSegment.recover`), and so is any segment whose
   indexes are missing. Segments below the recovery point keep their data; their indexes are
   sanity-checked and rebuilt if wrong. After a clean shutdown nothing is rescanned.
6. An empty directory gets one empty segment at the log start offset.
7. What is derived from the segments is rebuilt (:func:`load_log`): the producer state from
   its newest usable snapshot and the batches after it
   (:func:`odradek.storage.producer_snapshot.rebuild`), and the leader epochs from their
   checkpoint, clamped to the log's offsets.

Torn tail or damage (rule 5 found an invalid byte). On one node there is no replica to refill
lost records, so recovery only drops bytes a crash can have torn:

- **Torn tail**, truncated automatically (a warning names the file, position, byte count and
  reason): the invalid entry is in the *last non-empty* segment (every later segment holds no
  byte), it starts at or above the recovery point (no fsync covered it, so no ``acks=all``
  produce was acknowledged for it), and it is one a cut-short write can leave: incomplete, an
  implausible size or a bad checksum. Empty segments after a truncated one are deleted: they
  hold nothing, and the log must end where its data ends.
- **Damage**, anything else: an invalid entry in an earlier segment, below the recovery point
  (fsynced bytes do not tear), or a complete batch whose checksum matches but which fails
  another check (offsets out of order or outside the segment, an unknown codec...): it was
  written whole, so no torn write made it. :func:`load_segments` raises
  :class:`LogCorruptedError` naming the file and position, with every ``.log`` left as it is;
  the manager keeps that one partition offline and ``odradek repair-log`` repairs it on request.

A roll fsyncs the rolled segment before the new one takes a byte (:meth:`Log.roll`), so a
power cut tears at most the last segment. (Before that, a cut soon after a roll could tear the
rolled segment while the new one had data: valid batches after a torn region, which bit rot
also makes, so the partition stayed offline: tests/reliability/test_powercut_regressions.py.)
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.config import LogConfig
from odradek.storage.errors import LogCorruptedError
from odradek.storage.index import CorruptIndexError
from odradek.storage.leader_epoch import LeaderEpochCache
from odradek.storage.producer_snapshot import rebuild
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.scan import scan_entries
from odradek.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment

__all__ = ["LoadResult", "LoadedLog", "load_log", "load_segments"]

logger = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TMP_SUFFIX = ".tmp"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


@dataclass
class LoadResult:
    segments: list[LogSegment]
    next_offset: int
    recovery_point: int
    truncated_bytes: int


@dataclass
class LoadedLog:
    """A partition as the loader leaves it: its segments, offsets and derived state."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    next_offset: int
    producer_state: ProducerStateManager
    leader_epochs: LeaderEpochCache


def _base_offset(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def _segment_kind(name: str) -> str | None:
    """The live suffix (``.log``, ``.index``, ``.timeindex``) of a segment file name."""
    rest = "." + name.split(".", 1)[1] if "." in name else ""
    for suffix in (SWAP_SUFFIX, CLEANED_SUFFIX, DELETED_SUFFIX):
        rest = rest.removesuffix(suffix)
    return rest if rest in _SEGMENT_SUFFIXES else None


def _next_offset_of_file(path: Path, base_offset: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        last = base_offset - 1
        for entry in scan_entries(fd, 0, os.fstat(fd).st_size):
            last = entry.last_offset
        return last + 1
    finally:
        os.close(fd)


def _remove_temp_files_and_complete_swaps(directory: Path) -> None:
    names = sorted(os.listdir(directory))
    cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX) and _base_offset(n) is not None]
    min_cleaned = min((_base_offset(n) for n in cleaned), default=None)
    swaps = []
    for name in names:
        path = directory / name
        base = _base_offset(name)
        if name.endswith((DELETED_SUFFIX, TMP_SUFFIX)) or name in cleaned:
            logger.info("deleting leftover file %s", path)
            path.unlink(missing_ok=True)
        elif name.endswith(SWAP_SUFFIX) and base is not None:
            if min_cleaned is not None and base >= min_cleaned:
                logger.info("deleting %s: part of an unfinished cleaning pass", path)
                path.unlink(missing_ok=True)
            else:
                swaps.append(name)
    swap_logs = [n for n in swaps if n == f"{_base_offset(n):020d}{LOG_SUFFIX}{SWAP_SUFFIX}"]
    if not swap_logs:
        for name in swaps:  # swap indexes without their log: nothing to complete
            (directory / name).unlink(missing_ok=True)
        return
    low = min(_base_offset(n) for n in swap_logs)
    high = max(_next_offset_of_file(directory / n, _base_offset(n)) for n in swap_logs)
    for name in os.listdir(directory):
        base = _base_offset(name)
        kind = _segment_kind(name)
        if name.endswith(SWAP_SUFFIX) or base is None or kind is None:
            continue
        if low <= base < high:
            logger.info("deleting %s: replaced by a completed swap", directory / name)
            (directory / name).unlink(missing_ok=True)
    for name in swaps:
        live = name.removesuffix(SWAP_SUFFIX)
        if name.endswith(INDEX_SUFFIX + SWAP_SUFFIX) or name.endswith(
            TIME_INDEX_SUFFIX + SWAP_SUFFIX
        ):
            (directory / name).unlink(missing_ok=True)  # indexes are rebuilt below
            continue
        logger.info("completing swap: renaming %s to %s", name, live)
        os.replace(directory / name, directory / live)


def _recover_segment(segment: LogSegment, *, last: bool, recovery_point: int) -> int:
    """Re-validate ``segment``: truncate a torn tail (returns the bytes dropped), raise
    :class:`LogCorruptedError` for damage (the module docstring's rule), leaving the ``.log``."""
    # No max.message.bytes cap, as in Kafka: it may have been lowered since the entries were
    # written, and an entry running past the end of the file is caught anyway.
    result = segment.recover(truncate=False)
    if not result.truncated_bytes:
        return 0
    assert result.reason is not None
    if not last:
        why = "a segment other than the last"
    elif result.next_offset < recovery_point:
        why = f"offsets below the recovery point {recovery_point}, which were fsynced"
    elif not result.torn_write_possible:
        why = "an entry with a valid checksum, which no torn write produces"
    else:
        segment.drop_invalid_tail(result)
        logger.warning(
            "recovery truncated %d bytes at position %d of %s (a torn tail): %s",
            result.truncated_bytes,
            result.valid_bytes,
            segment.log_path,
            result.reason,
        )
        return result.truncated_bytes
    logger.error(
        "damaged log %s at byte %d (%d bytes from there on): %s, in %s; partition offline, "
        "files untouched",
        segment.log_path,
        result.valid_bytes,
        result.truncated_bytes,
        result.reason,
        why,
    )
    raise LogCorruptedError(segment.log_path, result.valid_bytes, f"{result.reason} ({why})")


def _delete_empty_segments(directory: Path, bases: list[int]) -> None:
    for base in bases:
        for suffix in _SEGMENT_SUFFIXES:
            (directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
        logger.warning(
            "recovery deleted empty segment %s after a torn tail", directory / f"{base:020d}.log"
        )


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    log_start_offset: int,
    recovery_point: int,
    clean_shutdown: bool,
) -> LoadResult:
    """Open every segment of the partition in ``directory``, recovering as Kafka does."""
    _remove_temp_files_and_complete_swaps(directory)
    names = set(os.listdir(directory))
    log_bases = sorted(
        b for n in names if n.endswith(LOG_SUFFIX) and (b := _base_offset(n)) is not None
    )
    for name in names:  # orphan indexes
        base = _base_offset(name)
        orphan = base is not None and f"{base:020d}{LOG_SUFFIX}" not in names
        if orphan and name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
            logger.info("deleting orphan index %s", directory / name)
            (directory / name).unlink(missing_ok=True)

    def indexes_missing(base: int) -> bool:
        return any(
            f"{base:020d}{suffix}" not in names for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        )

    # The segment holding the recovery point and everything after it are re-validated.
    recover_from = 0
    for i, base in enumerate(log_bases):
        if base <= recovery_point:
            recover_from = i
    # Where the data ends: segments after the last non-empty one hold no byte (a roll whose
    # new segment a power cut emptied), so a torn tail may end the one before them.
    sizes = [os.path.getsize(directory / f"{base:020d}{LOG_SUFFIX}") for base in log_bases]
    data_end = max((i for i, size in enumerate(sizes) if size), default=len(log_bases) - 1)
    segments: list[LogSegment] = []
    truncated_total = 0
    try:
        for i, base in enumerate(log_bases):
            last = i == len(log_bases) - 1
            unflushed = not clean_shutdown and i >= recover_from
            needs_recovery = unflushed or indexes_missing(base)
            segment = LogSegment(
                directory,
                base,
                index_interval_bytes=config.index_interval_bytes,
                max_index_bytes=config.segment_index_bytes,
                writable=last or needs_recovery or not clean_shutdown,
            )
            segments.append(segment)
            if not needs_recovery and not clean_shutdown:
                try:
                    segment.offset_index.sanity_check()
                    segment.time_index.sanity_check()
                except CorruptIndexError as exc:
                    logger.warning("rebuilding indexes of %s: %s", segment.log_path, exc)
                    needs_recovery = True
            if needs_recovery:
                truncated = _recover_segment(
                    segment, last=i >= data_end, recovery_point=recovery_point
                )
                truncated_total += truncated
                if truncated and not last:  # only empty segments follow: the log ends here
                    _delete_empty_segments(directory, log_bases[i + 1 :])
                    break
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    for segment in segments[:-1]:
        if segment.offset_index.writable:  # rebuilt or reopened for checking: trim again
            segment.on_become_inactive()
    if not segments:
        segments.append(
            LogSegment.create(
                directory,
                log_start_offset,
                index_interval_bytes=config.index_interval_bytes,
                max_index_bytes=config.segment_index_bytes,
            )
        )
    next_offset = segments[-1].next_offset_from_data()
    recovery_point = next_offset if clean_shutdown else min(recovery_point, next_offset)
    return LoadResult(segments, next_offset, recovery_point, truncated_total)


def load_log(
    directory: Path,
    config: LogConfig,
    *,
    now_ms: int,
    log_start_offset: int,
    recovery_point: int,
    clean_shutdown: bool,
) -> LoadedLog:
    """Steps 1-6 (:func:`load_segments`), then step 7; on failure every segment is closed."""
    loaded = load_segments(
        directory,
        config,
        log_start_offset=log_start_offset,
        recovery_point=recovery_point,
        clean_shutdown=clean_shutdown,
    )
    start = max(min(log_start_offset, loaded.next_offset), loaded.segments[0].base_offset)
    try:
        state = ProducerStateManager(config.producer_id_expiration_ms)
        rebuild(
            directory,
            state,
            loaded.segments,
            log_start_offset=start,
            log_end_offset=loaded.next_offset,
            clean_shutdown=clean_shutdown,
            now_ms=now_ms,
        )
        state.remove_expired_producers(now_ms)
        epochs = LeaderEpochCache.load(
            directory, log_start_offset=start, log_end_offset=loaded.next_offset
        )
    except BaseException:
        for segment in loaded.segments:
            segment.close()
        raise
    return LoadedLog(
        loaded.segments, start, loaded.recovery_point, loaded.next_offset, state, epochs
    )
