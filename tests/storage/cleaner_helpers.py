"""Helpers for the cleaner tests: keyed batches, a consumer-style reader, a full pass."""

from __future__ import annotations

import time
from collections.abc import Sequence

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import Compression, parse_batch_header
from odradek.protocol.records import Record, decode_records
from odradek.storage.cleaner.clean import (
    CleaningStats,
    build_offset_map,
    clean_group,
    commit_group,
    finish_pass,
    plan_groups,
)
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.plan import cleanable_log
from odradek.storage.log import Log
from tests.storage.conftest import region_bytes, split_batches


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def keyed(
    items: Sequence[tuple[bytes | None, bytes | None]],
    *,
    ts: int = 1_000,
    compression: Compression = Compression.NONE,
) -> bytes:
    return encode_batch([(k, v, ts) for k, v in items], compression=compression)


def consume(log: Log, start: int | None = None) -> list[Record]:
    """Every record from ``start`` on, as a consumer reads: the next fetch offset is one past
    the last offset of the last batch (compacted batches keep their offset range)."""
    offset = log.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < log.next_offset:
        info = log.read(offset, 1 << 30)
        assert info.region is not None, offset
        for raw in split_batches(region_bytes(info.region)):
            header = parse_batch_header(raw)
            out.extend(r for r in decode_records(raw) if r.offset >= offset)
            offset = max(offset, header.last_offset + 1)
    return out


def clean_pass(log: Log, now_ms: int, capacity: int = 1 << 20) -> CleaningStats:
    """One whole pass as the broker runs it (map, groups, clean and commit each group)."""
    cleanable = cleanable_log(log, now_ms)
    stats = CleaningStats()
    offset_map = OffsetMap(capacity)
    end = build_offset_map(cleanable, offset_map, stats)
    for group in plan_groups(log, end):
        cleaned = clean_group(log, group, offset_map, stats, now_ms=now_ms)
        assert commit_group(log, cleaned, group, stats, now_ms=now_ms)
    finish_pass(log, stats)
    return stats


def expected_after_pass(
    before: list[Record], first_dirty: int, end: int, *, drop_tombstones_below: int = -1
) -> list[Record]:
    """The model: below ``end``, a keyed record stays if no later record of its key lies in
    the dirty section ``[first_dirty, end)``; tombstones below ``drop_tombstones_below`` go."""
    latest = {r.key: r.offset for r in before if first_dirty <= r.offset < end}

    def kept(r: Record) -> bool:
        if r.offset >= end:
            return True
        superseded = r.key is None or latest.get(r.key, r.offset) > r.offset
        expired = r.value is None and r.offset < drop_tombstones_below
        return not (superseded or expired)

    return [r for r in before if kept(r)]
