"""The I/O side of consumer groups: the replay at start-up, the coordinator's timer task and
every write to ``__consumer_offsets``.

The request handlers are three families over one :class:`GroupApi`, each in a module of its
own: :attr:`GroupApi.membership` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup:
:mod:`~odradek.broker.groups.api_membership`), :attr:`GroupApi.offsets` (OffsetCommit,
OffsetFetch, OffsetDelete: :mod:`~odradek.broker.groups.api_offsets`) and
:attr:`GroupApi.admin` (ListGroups, DescribeGroups, DeleteGroups:
:mod:`~odradek.broker.groups.api_admin`).

Everything here runs on the event loop, as Produce does: a record for ``__consumer_offsets`` is
appended through the same :meth:`Log.append` path, then made durable by the group commit
(``acks=all``) before it is applied to the in-memory state or acknowledged. The replay at
start-up runs in a worker thread, before the broker accepts connections; until it is done
every group request answers ``COORDINATOR_LOAD_IN_PROGRESS``.

The offsets topic is created on first use with ``offsets.topic.num.partitions`` partitions,
``cleanup.policy=compact`` and Kafka's 100 MiB segments; a group lives in partition
``partition_for(group, n)`` of however many partitions the topic has.

The timer task (:meth:`GroupApi.run`) fires the coordinator's deadlines, stores the group
records the coordinator queues (then reports them stored; each group's record is written or
fails on its own, so one group's unwritable record or broken state never stalls another),
checks once a second whether the partition counts of subscribed topics changed, and expires
offsets (``offsets.retention.minutes``) every :data:`RETENTION_CHECK_MS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from odradek.broker.groups.api_admin import GroupAdminApi
from odradek.broker.groups.api_membership import MembershipApi
from odradek.broker.groups.api_offsets import OffsetApi
from odradek.broker.groups.coordinator import CoordinatorConfig, GroupCoordinator, StoreGroup
from odradek.broker.groups.group import Group, GroupState
from odradek.broker.groups.offsets import (
    OFFSETS_TOPIC,
    GroupKey,
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from odradek.broker.groups.schema import RecordFormatError
from odradek.broker.groups.store import Loaded, OffsetStore, load
from odradek.broker.security.authorizer import allowed
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.errors import ErrorCode
from odradek.storage.errors import RecordTooLargeError, StorageError

if TYPE_CHECKING:
    from odradek.broker.context import BrokerContext

__all__ = ["RETENTION_CHECK_MS", "GroupApi"]

E = ErrorCode
TopicPartition = tuple[str, int]
RETENTION_CHECK_MS = 600_000  # Kafka's offsets.retention.check.interval.ms default
TOPIC_CHECK_MS = 1000
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}


class GroupApi:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        cfg = ctx.config
        self.coordinator = GroupCoordinator(
            CoordinatorConfig(
                initial_rebalance_delay_ms=cfg.int("group.initial.rebalance.delay.ms"),
                min_session_timeout_ms=cfg.int("group.min.session.timeout.ms"),
                max_session_timeout_ms=cfg.int("group.max.session.timeout.ms"),
            ),
            ctx.manager.partitions.partition_count,
        )
        self.store = OffsetStore()
        self.retention_ms = cfg.int("offsets.retention.minutes") * 60_000
        self.loading = True
        self._unloaded: set[int] = set()  # offsets partitions whose replay did not complete
        self._offsets_partitions = 0
        self._wake = anyio.Event()
        self.coordinator.on_change = self._wakeup
        self.membership = MembershipApi(self)
        self.offsets = OffsetApi(self)
        self.admin = GroupAdminApi(self)

    def now_ms(self) -> int:
        return self.ctx.manager.clock_ms()

    def availability(self, group_id: str) -> ErrorCode:
        """COORDINATOR_LOAD_IN_PROGRESS during the replay; COORDINATOR_NOT_AVAILABLE for a
        group whose offsets partition was not fully replayed (its offsets may be stale)."""
        if self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if self._unloaded and partition_for(group_id, self._offsets_partitions) in self._unloaded:
            return E.COORDINATOR_NOT_AVAILABLE
        return E.NONE

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """FindCoordinator's answer for ``group_id``: NONE, or why it cannot be served now."""
        if not allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            return E.GROUP_AUTHORIZATION_FAILED
        return self.availability(group_id)

    def _wakeup(self) -> None:
        self._wake.set()
        self._wake = anyio.Event()

    # -- start-up and the timer task -------------------------------------------------------

    async def load(self) -> Loaded:
        """Replay ``__consumer_offsets`` (in a worker thread) and rebuild the groups."""
        loaded = await anyio.to_thread.run_sync(load, self.ctx.manager)
        self.store = OffsetStore(loaded.offsets)
        self.coordinator.load(loaded.groups, loaded.offsets, self.now_ms())
        self._unloaded = set(loaded.incomplete)
        if self._unloaded:
            self._offsets_partitions = self.ctx.manager.partitions.partition_count(OFFSETS_TOPIC)
            self.ctx.log.error(
                "offsets partitions not loaded: their groups answer COORDINATOR_NOT_AVAILABLE",
                topic=OFFSETS_TOPIC,
                partitions=sorted(self._unloaded),
            )
        self.loading = False
        self.ctx.log.info(
            "groups loaded",
            groups=len(self.coordinator.groups),
            records=loaded.records,
            skipped=loaded.skipped,
        )
        return loaded

    async def run(self) -> None:
        """The coordinator's timers, group-record writes, topic checks and offset expiry."""
        topic_ids = {name: md.topic_id for name, md in self.ctx.manager.topics.items()}
        await self._remove_offsets(self.store.stale_topics(topic_ids))  # deleted while down
        next_topic_check = next_retention = self.now_ms()
        while True:
            try:
                next_topic_check, next_retention = await self._timers(
                    next_topic_check, next_retention
                )
                if self.coordinator.outbox:
                    continue
            except Exception:  # a bug must not stop every group's timers
                self.ctx.log.exception("group coordinator timer failed")
                next_topic_check = next_retention = self.now_ms() + TOPIC_CHECK_MS
            wake = self._wake  # taken after the work: what changed during it is seen below
            due = min(self.coordinator.next_deadline_ms(), next_topic_check, next_retention)
            if due > self.now_ms():
                with anyio.move_on_after((due - self.now_ms()) / 1000):
                    await wake.wait()

    async def _timers(self, next_topic_check: int, next_retention: int) -> tuple[int, int]:
        now = self.now_ms()
        self.coordinator.tick(now)
        broken, self.coordinator.broken = self.coordinator.broken, []
        for group_id, exc in broken:  # a bug: that group was reset, the others went on
            self.ctx.log.error(
                "group reset after an internal error", group=group_id[:200], error=repr(exc)
            )
        if now >= next_topic_check:
            next_topic_check = now + TOPIC_CHECK_MS
            subscribed = set().union(
                *(g.subscribed_topics() for g in self.coordinator.groups.values())
            )
            self.coordinator.topics_changed(subscribed, now)
        if now >= next_retention:
            next_retention = now + RETENTION_CHECK_MS
            await self.expire_offsets(now)
        if self.coordinator.outbox:
            await self._store_groups()
        return next_topic_check, next_retention

    async def _store_groups(self) -> None:
        """Write the queued group records concurrently; each group's outcome is its own: a
        record that cannot be encoded or written fails that group's sync, never the batch."""
        batch, self.coordinator.outbox = self.coordinator.outbox, []

        async def store_one(item: StoreGroup) -> None:
            try:
                await self._store_group(item)
            except Exception:  # a bug in one group's write must not cancel the others
                self.ctx.log.exception("group record write failed", group=item.group_id[:200])
                self.coordinator.stored(
                    item.group_id, item.generation, self.now_ms(), E.COORDINATOR_NOT_AVAILABLE
                )

        async with anyio.create_task_group() as tg:
            for item in batch:
                tg.start_soon(store_one, item)

    async def _store_group(self, item: StoreGroup) -> None:
        try:
            value = None if item.value is None else encode_group_value(item.value)
            key = encode_group_key(GroupKey(item.group_id))
        except RecordFormatError as exc:  # e.g. a string over Kafka's int16 length
            self.ctx.log.warning(
                "group record not encodable", group=item.group_id[:200], error=str(exc)
            )
            code = E.COORDINATOR_NOT_AVAILABLE
        else:
            _, code = await self._append(item.group_id, [(key, value)])
        self.coordinator.stored(item.group_id, item.generation, self.now_ms(), code)
        if item.value is not None and code == ErrorCode.NONE:  # Kafka's "Stabilized group"
            self.ctx.log.info(
                "group generation formed",
                group=item.group_id,
                generation=item.generation,
                members=len(item.value.members),
                protocol=item.value.protocol,
            )

    async def expire_offsets(self, now_ms: int) -> None:
        """Tombstone the offsets past retention; an Empty group left without any is deleted."""
        expired: dict[str, list[TopicPartition]] = {}
        for group in list(self.coordinator.groups.values()):
            if not _offsets_may_expire(group):
                continue
            empty_since = None
            if group.state == GroupState.EMPTY and group.protocol_type is not None:
                empty_since = group.state_since_ms
            keep = group.subscribed_topics() if group.state == GroupState.STABLE else ()
            tps = self.store.expired(
                group.group_id,
                now_ms,
                self.retention_ms,
                empty_since_ms=empty_since,
                keep_topics=keep,
            )
            if tps:
                expired[group.group_id] = tps
        await self._remove_offsets(expired)
        for group in list(self.coordinator.groups.values()):
            if group.state == GroupState.EMPTY and not self.store.committed(group.group_id):
                await self.delete_group(group.group_id)

    # -- writing to __consumer_offsets -----------------------------------------------------

    async def _offsets_partition(self, group_id: str) -> int:
        manager = self.ctx.manager
        if OFFSETS_TOPIC not in manager.topics:
            count = self.ctx.config.int("offsets.topic.num.partitions")
            async with self.ctx.admin_lock:
                if OFFSETS_TOPIC not in manager.topics:
                    await anyio.to_thread.run_sync(
                        manager.create_topic, OFFSETS_TOPIC, count, OFFSETS_TOPIC_CONFIGS
                    )
                    self.ctx.log.info("topic created", topic=OFFSETS_TOPIC, partitions=count)
        if not self._offsets_partitions:  # fixed once created: groups must not move
            self._offsets_partitions = manager.partitions.partition_count(OFFSETS_TOPIC)
        return partition_for(group_id, self._offsets_partitions)

    async def _append(
        self, group_id: str, records: list[tuple[bytes, bytes | None]]
    ) -> tuple[int, ErrorCode]:
        """Append ``records`` as one batch to the group's partition and wait until it is
        durable; ``(offset of the first record, NONE)`` or ``(-1, the error)``."""
        ctx = self.ctx
        log = None
        try:
            partition = await self._offsets_partition(group_id)
            log = ctx.manager.partitions.get_log(OFFSETS_TOPIC, partition)
            now = self.now_ms()
            info = log.append(encode_batch([(k, v, now) for k, v in records]), now_ms=now)
            ctx.notify_data(OFFSETS_TOPIC, partition)
            if info.rolled:
                ctx.group_commit.flush_soon(log)
            await ctx.group_commit.wait_durable(log, info.last_offset)
        except RecordTooLargeError:
            return -1, E.INVALID_COMMIT_OFFSET_SIZE
        except (OSError, StorageError) as exc:
            if log is not None and isinstance(exc, OSError):
                ctx.storage_failed(log, exc)
            ctx.log.warning("group write failed", group=group_id, error=str(exc))
            return -1, E.COORDINATOR_NOT_AVAILABLE
        return info.first_offset, E.NONE

    async def _remove_offsets(self, by_group: dict[str, list[TopicPartition]]) -> None:
        for group_id, tps in by_group.items():
            await self.remove_offsets(group_id, tps)

    async def remove_offsets(self, group_id: str, tps: list[TopicPartition]) -> ErrorCode:
        """Tombstones for ``tps`` in one durable batch, then they leave the store: NONE, or
        the error every one of them failed with."""
        if not tps:
            return E.NONE
        keys = [encode_offset_key(OffsetKey(group_id, t, p)) for t, p in tps]
        first, code = await self._append(group_id, [(k, None) for k in keys])
        if not code:
            self.store.remove(group_id, tps, first)
        return code

    async def commit_offsets(
        self, group_id: str, entries: list[tuple[TopicPartition, OffsetValue, str | None]]
    ) -> ErrorCode:
        """Write ``(partition, value, topic id)`` entries as one durable batch, then apply them
        to the store: NONE, or the error every one of them failed with."""
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(OffsetKey(group_id, *tp)), encode_offset_value(value))
            for tp, value, _ in entries
        ]
        first, code = await self._append(group_id, records)
        if not code:
            self.store.apply(group_id, entries, first)
        return code

    async def delete_group(self, group_id: str) -> ErrorCode:
        """Tombstones for every offset and the group record, then the group is gone."""
        tps = list(self.store.committed(group_id))
        self.coordinator.forget(group_id)  # Dead now: a new join starts a new group
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(OffsetKey(group_id, t, p)), None) for t, p in tps
        ]
        records.append((encode_group_key(GroupKey(group_id)), None))
        first, code = await self._append(group_id, records)
        if not code:
            self.store.remove(group_id, tps, first)
        return code

    # -- hooks for the admin APIs ----------------------------------------------------------

    async def topics_deleted(self, topics: Iterable[str]) -> None:
        """DeleteTopics: tombstone every group's offsets of ``topics``; rebalance subscribers."""
        gone = set(topics)
        by_group = {
            group_id: [tp for tp in cached if tp[0] in gone]
            for group_id, cached in list(self.store.offsets.items())
        }
        await self._remove_offsets(by_group)
        self.coordinator.topics_changed(gone, self.now_ms())

    def partitions_added(self, topic: str) -> None:
        """CreatePartitions: rebalance the groups subscribed to ``topic``."""
        self.coordinator.topics_changed([topic], self.now_ms())


def _offsets_may_expire(group: Group) -> bool:
    """Kafka's ``removeExpiredOffsets`` cases: a simple group's, an Empty group's, and a Stable
    "consumer" group's (but its subscribed topics); never those of a group rebalancing, nor of
    an active group of another protocol type ("connect": its topics are not known)."""
    if group.protocol_type is None or group.state == GroupState.EMPTY:
        return True
    return group.state == GroupState.STABLE and group.protocol_type == "consumer"
