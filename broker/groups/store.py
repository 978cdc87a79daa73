"""Committed offsets in memory, and the replay of ``__consumer_offsets`` that rebuilds them.

The topic (:mod:`odradek.broker.groups.offsets` has the record format) is the only durable state of
the groups: the in-memory :class:`OffsetStore` is derived from it and rebuilt at every start.

Write path (the caller, :mod:`odradek.broker.groups.api`, does the I/O):

1. one batch per request — every partition of an OffsetCommit, every tombstone of a
   DeleteGroups — appended to the group's partition ``partition_for(group, n)``; a batch is
   written, recovered and truncated whole, so a commit is atomic across its partitions;
2. the batch is fsynced (``acks=all``: Kafka's ``offsets.commit.required.acks=-1``);
3. only then is it applied here and acknowledged. So everything a client saw acknowledged is
   on disk, and a crash before step 3 loses only unacknowledged commits.

Invariant: each cached entry remembers the offset of its record in ``__consumer_offsets``; an
update or deletion only applies over entries whose record is older, so two commits that become
durable in another order than they were appended still leave the later one in the cache.

Replay (:func:`load`): every partition of the topic is read from its log start offset to its
end, batch by batch; control batches are skipped, a later record for a key replaces an earlier
one, a tombstone removes it. Records of an unknown key version (Kafka's KIP-848 groups),
values that do not decode and batches whose records do not parse (a file damaged or planted on
disk: clients cannot produce to the topic) are skipped with a warning, never fatal: a later
valid commit still wins. Only a batch header that cannot be read ends the replay of that one
partition, since nothing after it can be located: the partition is then listed in
:attr:`Loaded.incomplete`, as is one that is offline, and the api answers its groups
``COORDINATOR_NOT_AVAILABLE`` rather than offsets that may be stale.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from odradek.broker.groups.offsets import (
    OFFSETS_TOPIC,
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from odradek.protocol.record_batch import HEADER_SIZE, CorruptRecordError, parse_batch_header
from odradek.protocol.records import decode_records
from odradek.storage.errors import StorageError
from odradek.storage.log import Log
from odradek.storage.manager import LogManager

__all__ = ["Committed", "Loaded", "OffsetStore", "iter_records", "load"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_READ_BYTES = 1 << 20


@dataclass(slots=True)
class Committed:
    """One committed offset, as OffsetFetch returns it."""

    value: OffsetValue
    record_offset: int  # of its record in __consumer_offsets: the later record wins
    topic_id: str | None = None  # the topic's id when committed; None: not known (yet)


@dataclass
class Loaded:
    """What :func:`load` found: the offsets and the last group metadata of each group."""

    offsets: dict[str, dict[TopicPartition, Committed]] = field(default_factory=dict)
    groups: dict[str, GroupValue] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0
    incomplete: set[int] = field(default_factory=set)  # partitions not (fully) replayed


class OffsetStore:
    """The committed offsets of every group (derived from ``__consumer_offsets``)."""

    def __init__(self, offsets: dict[str, dict[TopicPartition, Committed]] | None = None) -> None:
        self.offsets: dict[str, dict[TopicPartition, Committed]] = offsets or {}

    def committed(self, group: str) -> dict[TopicPartition, Committed]:
        return self.offsets.get(group, {})

    def groups(self) -> list[str]:
        return list(self.offsets)

    def apply(
        self,
        group: str,
        entries: Iterable[tuple[TopicPartition, OffsetValue, str | None]],
        first_record_offset: int,
    ) -> None:
        """Cache the commits written as consecutive records from ``first_record_offset``."""
        cached = self.offsets.setdefault(group, {})
        for i, (tp, value, topic_id) in enumerate(entries):
            record_offset = first_record_offset + i
            current = cached.get(tp)
            if current is None or current.record_offset < record_offset:
                cached[tp] = Committed(value, record_offset, topic_id)

    def remove(self, group: str, tps: Iterable[TopicPartition], tombstone_offset: int) -> None:
        """Drop the entries whose record precedes the tombstones written at ``tombstone_offset``."""
        cached = self.offsets.get(group)
        if cached is None:
            return
        for tp in tps:
            current = cached.get(tp)
            if current is not None and current.record_offset < tombstone_offset:
                del cached[tp]
        if not cached:
            del self.offsets[group]

    def expired(
        self,
        group: str,
        now_ms: int,
        retention_ms: int,
        *,
        empty_since_ms: int | None = None,
        keep_topics: Iterable[str] = (),
    ) -> list[TopicPartition]:
        """The offsets past ``offsets.retention.minutes`` (Kafka's rules; the caller picks):
        an empty group's expire ``retention_ms`` after it became empty (``empty_since_ms``), or
        else each offset ``retention_ms`` after its commit, topics in ``keep_topics`` excepted
        (a stable group's subscribed topics)."""
        keep = set(keep_topics)
        expired = []
        for tp, entry in self.offsets.get(group, {}).items():
            since = entry.value.commit_timestamp_ms
            if empty_since_ms is not None and empty_since_ms >= 0:
                since = empty_since_ms
            elif tp[0] in keep:
                continue
            if now_ms - since >= retention_ms:
                expired.append(tp)
        return expired

    def stale_topics(self, topic_ids: Mapping[str, str]) -> dict[str, list[TopicPartition]]:
        """Per group, the offsets of topics deleted (or deleted and re-created) since commit."""
        stale: dict[str, list[TopicPartition]] = {}
        for group, cached in self.offsets.items():
            for tp, entry in cached.items():
                current = topic_ids.get(tp[0])
                if current is None or (entry.topic_id is not None and entry.topic_id != current):
                    stale.setdefault(group, []).append(tp)
        return stale


def _warn_unreadable(log: Log, base_offset: int, reason: str) -> None:
    logger.warning(
        "skipping unreadable batch at offset %d of %s-%d: %s",
        base_offset,
        log.topic,
        log.partition,
        reason,
    )


def iter_records(
    log: Log, on_unreadable: Callable[[Log, int, str], None] = _warn_unreadable
) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record in ``log`` from its log start offset; a batch
    whose records do not parse is reported to ``on_unreadable`` and skipped whole."""
    offset = log.log_start_offset
    end = log.next_offset
    while offset < end:
        region = log.read(offset, _READ_BYTES).region
        if region is None:  # below the end offset, yet nothing readable: never a silent end
            raise CorruptRecordError(f"no batch readable at offset {offset} (end {end}) of {log!r}")
        data = os.pread(region.file.fileno(), region.length, region.position)
        position = 0
        progressed = False
        while position + HEADER_SIZE <= len(data):
            header = parse_batch_header(data, position)
            if position + header.size_bytes > len(data):
                break  # a partial batch at the end of the region: read again from it
            batch = data[position : position + header.size_bytes]
            position += header.size_bytes
            progressed = True
            offset = max(offset, header.last_offset + 1)
            if header.magic != 2 or header.is_control:
                continue
            try:
                records = decode_records(batch)
            except CorruptRecordError as exc:
                on_unreadable(log, header.base_offset, str(exc))
                continue
            for record in records:
                if record.offset >= log.log_start_offset:
                    yield record.offset, record.key, record.value
        if not progressed:
            raise CorruptRecordError(f"no complete batch at offset {offset} of {log!r}")


def load(manager: LogManager) -> Loaded:
    """Replay every partition of ``__consumer_offsets`` (see the module docstring)."""
    loaded = Loaded()
    logs = sorted(
        (log for (topic, _), log in manager.partitions.logs.items() if topic == OFFSETS_TOPIC),
        key=lambda log: log.partition,
    )

    def unreadable(log: Log, base_offset: int, reason: str) -> None:
        loaded.skipped += 1
        _warn_unreadable(log, base_offset, reason)

    for log in logs:
        try:
            for offset, key, value in iter_records(log, unreadable):
                loaded.records += 1
                if not _apply_record(loaded, offset, key, value):
                    loaded.skipped += 1
        except (CorruptRecordError, StorageError, OSError) as exc:
            loaded.incomplete.add(log.partition)
            logger.error("stopped replaying %s-%d: %s", log.topic, log.partition, exc)
    loaded.incomplete.update(p for (t, p) in manager.partitions.offline if t == OFFSETS_TOPIC)
    for group, cached in list(loaded.offsets.items()):
        if not cached:
            del loaded.offsets[group]
    return loaded


def _apply_record(loaded: Loaded, offset: int, key: bytes | None, value: bytes | None) -> bool:
    if key is None:
        return False
    try:
        decoded = decode_key(key)
        if isinstance(decoded, OffsetKey):
            tp = (decoded.topic, decoded.partition)
            cached = loaded.offsets.setdefault(decoded.group, {})
            if value is None:
                cached.pop(tp, None)
            else:
                cached[tp] = Committed(decode_offset_value(value), offset)
        elif isinstance(decoded, GroupKey):
            if value is None:
                loaded.groups.pop(decoded.group, None)
            else:
                loaded.groups[decoded.group] = decode_group_value(value)
        else:
            return False
    except ValueError as exc:  # RecordFormatError, or any other value the schema refuses
        logger.warning("skipping record %d of %s: %s", offset, OFFSETS_TOPIC, exc)
        return False
    return True
