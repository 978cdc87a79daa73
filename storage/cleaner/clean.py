"""One cleaning pass over one compacted log: map the dirty section, rewrite, swap.

A pass (Kafka's ``Cleaner.doClean``), for a :class:`~odradek.storage.cleaner.plan.CleanableLog`:

1. :func:`build_offset_map` (worker thread): read the dirty segments, oldest first, and record
   the latest offset of every key. It stops at a segment boundary when the map is full; the
   offset where it stopped is the pass's **end offset** (the next first dirty offset).
2. :func:`plan_groups` (event-loop thread): group the segments from the log start up to the
   end offset (:func:`~odradek.storage.cleaner.plan.group_segments`).
3. Per group, :func:`clean_group` (worker thread): copy the group's batches into one new
   segment with the ``.cleaned`` suffix, keeping a record only if

   - it has a key (keyless records cannot be compacted; Kafka drops them too), and
   - no later record of its key is in the map (its offset is the key's latest), and
   - it is not a tombstone (null value) whose source segment was last modified more than
     ``delete.retention.ms`` before the pass started (consumers had that long to see it).

   Batches whose records are all kept are copied byte for byte; others are rebuilt with the
   kept records only (:func:`~odradek.storage.cleaner.records.rebuild_batch`: same base offset,
   offset and timestamp deltas, codec; new CRC). Offsets never change. If the group's last batch
   lost every record, an empty batch with its offset range ends the cleaned segment, so the
   segment covers exactly the offsets of the group. So does the last batch of each producer
   the log's producer state knows (Kafka's ``RETAIN_EMPTY``): its producer id, epoch and
   sequence range survive, so the state can still be rebuilt from the log. Then the segment
   is fsynced, its indexes trimmed, and its mtime set to the newest mtime of the group (the
   age tombstones are judged by survives the rewrite).
4. Per group, :func:`commit_group` (event-loop thread): :meth:`Log.replace_segments` (the
   ``.cleaned`` → ``.swap`` → live protocol). If the group's segments left the log meanwhile
   (retention), the cleaned segment is deleted and the pass ends there.
5. After the last group, :attr:`Log.first_dirty_offset` becomes the end offset (the broker
   writes ``cleaner-offset-checkpoint``).

Only inactive segments are read or replaced: they are immutable, so the worker thread reads
them without locks while the event loop appends to the active segment. Each step reports its
I/O to ``throttle(n_bytes)``, which may sleep (``log.cleaner.io.max.bytes.per.second``) or
raise to abandon the pass; the ``.cleaned`` files of an abandoned group are deleted (and any
left by a crash are deleted by the loader).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from odradek.protocol.record_batch import BatchHeader, parse_batch_header
from odradek.protocol.validate import DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.plan import CleanableLog, group_segments
from odradek.storage.cleaner.records import batch_body, empty_batch, raw_records, rebuild_batch
from odradek.storage.loader import CLEANED_SUFFIX
from odradek.storage.log import Log
from odradek.storage.scan import EntryInfo, scan_entries
from odradek.storage.segment import LogSegment

__all__ = [
    "CleaningStats",
    "build_offset_map",
    "clean_group",
    "commit_group",
    "plan_groups",
]

Throttle = Callable[[int], None]
_READ_CHUNK_BYTES = 1024 * 1024
_WRITE_CHUNK_BYTES = 1024 * 1024
_WRITE_CHUNK_BATCHES = 512  # below IOV_MAX (1024) buffers per pwritev


def _no_throttle(n_bytes: int) -> None:
    return None


@dataclass
class CleaningStats:
    """What a pass did (the broker logs it)."""

    segments_before: int = 0
    segments_after: int = 0
    bytes_read: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_before: int = 0
    records_after: int = 0
    keys_mapped: int = 0
    tombstones_removed: int = 0
    keyless_removed: int = 0
    end_offset: int = 0
    aborted: bool = False
    groups: list[tuple[int, int]] = field(default_factory=list)  # (base offset, bytes after)


def read_entries(segment: LogSegment) -> Iterator[tuple[EntryInfo, memoryview]]:
    """Every entry of an inactive segment with its bytes, read in large chunks (the file is
    held meanwhile: a DeleteTopics closing it cannot hand its descriptor to another file)."""
    fd = segment.file.hold()
    try:
        end = segment.size_bytes
        buffer = b""
        buffer_start = 0
        for entry in scan_entries(fd, 0, end):
            if entry.next_position > buffer_start + len(buffer):
                buffer_start = entry.position
                length = min(max(_READ_CHUNK_BYTES, entry.size_bytes), end - entry.position)
                buffer = os.pread(fd, length, entry.position)
            start = entry.position - buffer_start
            yield entry, memoryview(buffer)[start : start + entry.size_bytes]
    finally:
        segment.file.release()


def _dirty_segments(cleanable: CleanableLog) -> tuple[list[LogSegment], list[int]]:
    log = cleanable.log
    segments = log.segments
    out, next_bases = [], []
    for i, segment in enumerate(segments[:-1]):
        next_base = segments[i + 1].base_offset
        if next_base <= cleanable.first_dirty_offset:
            continue
        if segment.base_offset >= cleanable.first_uncleanable_offset:
            break
        out.append(segment)
        next_bases.append(next_base)
    return out, next_bases


def build_offset_map(
    cleanable: CleanableLog,
    offset_map: OffsetMap,
    stats: CleaningStats,
    throttle: Throttle = _no_throttle,
    max_body_bytes: int = DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES,
) -> int:
    """Map every key of the dirty section to its latest offset; returns the end offset.

    Stops after the first segment that fills the map (the first one always counts whole).
    Records below the first dirty offset are skipped. ``max_body_bytes``: what a batch may
    decompress to (:func:`~odradek.storage.cleaner.records.batch_body`).
    """
    offset_map.clear()
    start = cleanable.first_dirty_offset
    end_offset = start
    dirty, next_bases = _dirty_segments(cleanable)
    for n, (segment, next_base) in enumerate(zip(dirty, next_bases, strict=True)):
        if n and offset_map.full:
            break
        for entry, data in read_entries(segment):
            throttle(entry.size_bytes)
            stats.bytes_read += entry.size_bytes
            if entry.magic != 2 or entry.last_offset < start:
                continue
            header = parse_batch_header(data)
            base = header.base_offset
            put = offset_map.put
            body = batch_body(data, header, max_body_bytes)
            for delta, key, _, _, _ in raw_records(body, header.record_count):
                if key is not None and base + delta >= start:
                    put(key, base + delta)
        end_offset = next_base
    stats.keys_mapped = len(offset_map)
    stats.end_offset = end_offset
    return end_offset


def plan_groups(log: Log, end_offset: int) -> list[list[LogSegment]]:
    """The groups of a pass ending at ``end_offset`` (event-loop thread: reads the list)."""
    segments = log.segments
    chosen = [s for s in segments[:-1] if s.base_offset < end_offset]
    following = segments[len(chosen)].base_offset
    return group_segments(
        chosen,
        max_bytes=log.config.segment_bytes,
        max_index_bytes=log.config.segment_index_bytes,
        next_offset_after=following,
    )


class _Writer:
    """Buffers batches for the cleaned segment and appends them in large ``pwritev`` calls."""

    def __init__(self, segment: LogSegment, stats: CleaningStats, throttle: Throttle) -> None:
        self.segment = segment
        self.stats = stats
        self.throttle = throttle
        self.buffers: list[bytes | memoryview] = []
        self.entries: list[tuple[int, int, int]] = []
        self.pending_bytes = 0

    def add(self, data: bytes | memoryview, last_offset: int, max_timestamp: int) -> None:
        self.buffers.append(data)
        self.entries.append((len(data), last_offset, max_timestamp))
        self.pending_bytes += len(data)
        if self.pending_bytes >= _WRITE_CHUNK_BYTES or len(self.buffers) >= _WRITE_CHUNK_BATCHES:
            self.flush()

    def flush(self) -> None:
        if self.buffers:
            self.segment.append(self.buffers, self.entries)
            self.throttle(self.pending_bytes)
            self.stats.bytes_after += self.pending_bytes
        self.buffers, self.entries, self.pending_bytes = [], [], 0


def clean_group(
    log: Log,
    group: list[LogSegment],
    offset_map: OffsetMap,
    stats: CleaningStats,
    *,
    now_ms: int,
    throttle: Throttle = _no_throttle,
    max_body_bytes: int = DEFAULT_BATCH_MAX_DECOMPRESSED_BYTES,
) -> LogSegment:
    """Write the cleaned copy of ``group`` as a ``.cleaned`` segment (see the module doc)."""
    config = log.config
    cleaned = LogSegment.create(
        log.directory,
        group[0].base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes,
        file_suffix=CLEANED_SUFFIX,
    )
    # Each known producer's last data offset, read once (Kafka: lastRecordsOfActiveProducers);
    # list() copies the dict in one C call, safe against the appending thread.
    last_of_producer = {
        e.producer_id: e.last_data_offset for e in list(log.producer_state.producers.values())
    }
    try:
        writer = _Writer(cleaned, stats, throttle)
        dropped_last: tuple[memoryview, BatchHeader] | None = None
        horizon_ms = now_ms - config.delete_retention_ms
        for segment in group:
            retain_deletes = segment.last_modified_ms > horizon_ms
            stats.bytes_before += segment.size_bytes
            for entry, data in read_entries(segment):
                throttle(entry.size_bytes)
                stats.bytes_read += entry.size_bytes
                if entry.magic != 2:  # legacy entries are copied as they are
                    writer.add(data, entry.last_offset, entry.max_timestamp)
                    dropped_last = None
                    continue
                header = parse_batch_header(data)
                body = batch_body(data, header, max_body_bytes)
                records = raw_records(body, header.record_count)
                kept = []
                base = header.base_offset
                latest = offset_map.get
                for record in records:
                    delta, key, is_tombstone, _, _ = record
                    if key is None:
                        stats.keyless_removed += 1
                    elif latest(key) > base + delta:
                        pass
                    elif is_tombstone and not retain_deletes:
                        stats.tombstones_removed += 1
                    else:
                        kept.append(record)
                stats.records_before += len(records)
                stats.records_after += len(kept)
                if not kept:
                    if (
                        header.producer_id >= 0
                        and last_of_producer.get(header.producer_id) == header.last_offset
                    ):
                        writer.add(
                            empty_batch(data, header), header.last_offset, header.max_timestamp
                        )
                        dropped_last = None
                        continue
                    dropped_last = (data, header)
                    continue
                out = data if len(kept) == len(records) else rebuild_batch(data, header, body, kept)
                writer.add(out, header.last_offset, header.max_timestamp)
                dropped_last = None
        if dropped_last is not None:  # keep the group's offset range (see the module doc)
            last_data, last_header = dropped_last
            writer.add(
                empty_batch(last_data, last_header),
                last_header.last_offset,
                last_header.max_timestamp,
            )
        writer.flush()
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.set_last_modified_ms(max(s.last_modified_ms for s in group))
    except BaseException:
        cleaned.delete_files()
        raise
    stats.segments_before += len(group)
    return cleaned


def commit_group(
    log: Log,
    cleaned: LogSegment,
    group: list[LogSegment],
    stats: CleaningStats,
    *,
    now_ms: int,
) -> bool:
    """Swap ``cleaned`` in for ``group`` (event-loop thread); False if the group is gone."""
    if not log.replace_segments(cleaned, group, now_ms=now_ms):
        stats.aborted = True
        return False
    stats.segments_after += 1
    stats.groups.append((cleaned.base_offset, cleaned.size_bytes))
    return True


def finish_pass(log: Log, stats: CleaningStats) -> None:
    """Record the pass's progress: offsets below its end offset are now clean."""
    if not stats.aborted:
        log.first_dirty_offset = max(log.first_dirty_offset, stats.end_offset)
