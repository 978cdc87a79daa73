"""The group APIs' handlers and the coordinator's timer task: the I/O side of consumer groups.

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
offsets (``offsets.retention.minutes``) every :data:`RETENTION_CHECK_MS`. A waiting JoinGroup or
SyncGroup answers ``COORDINATOR_NOT_AVAILABLE`` when a graceful shutdown begins.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread

from odradek.broker.groups.coordinator import CoordinatorConfig, GroupCoordinator, StoreGroup
from odradek.broker.groups.group import Group, GroupState
from odradek.broker.groups.member import Pending
from odradek.broker.groups.offsets import (
    OFFSETS_TOPIC,
    GroupKey,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from odradek.broker.groups.store import Loaded, OffsetStore, load
from odradek.broker.security.authorizer import allowed
from odradek.protocol import messages as m
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import encode_batch
from odradek.storage.errors import RecordTooLargeError, StorageError

if TYPE_CHECKING:
    from odradek.broker.context import BrokerContext

__all__ = ["METADATA_MAX_BYTES", "RETENTION_CHECK_MS", "GroupApi"]

E = ErrorCode
GROUP = ResourceType.GROUP
T = TypeVar("T")
TopicPartition = tuple[str, int]
METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes
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
            ctx.manager.partition_count,
        )
        self.store = OffsetStore()
        self.retention_ms = cfg.int("offsets.retention.minutes") * 60_000
        self.loading = True
        self._unloaded: set[int] = set()  # offsets partitions whose replay did not complete
        self._offsets_partitions = 0
        self._wake = anyio.Event()
        self.coordinator.on_change = self._wakeup

    def now_ms(self) -> int:
        return self.ctx.manager.clock_ms()

    def _availability(self, group_id: str) -> ErrorCode:
        """COORDINATOR_LOAD_IN_PROGRESS during the replay; COORDINATOR_NOT_AVAILABLE for a
        group whose offsets partition was not fully replayed (its offsets may be stale)."""
        if self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if self._unloaded and partition_for(group_id, self._offsets_partitions) in self._unloaded:
            return E.COORDINATOR_NOT_AVAILABLE
        return E.NONE

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """FindCoordinator's answer for ``group_id``: NONE, or why it cannot be served now."""
        if not allowed(Operation.DESCRIBE, GROUP, group_id):
            return E.GROUP_AUTHORIZATION_FAILED
        return self._availability(group_id)

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
            self._offsets_partitions = self.ctx.manager.partition_count(OFFSETS_TOPIC)
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
                await self._delete_group(group.group_id)

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
            self._offsets_partitions = manager.partition_count(OFFSETS_TOPIC)
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
            log = ctx.manager.get_log(OFFSETS_TOPIC, partition)
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
            if not tps:
                continue
            keys = [encode_offset_key(OffsetKey(group_id, t, p)) for t, p in tps]
            first, code = await self._append(group_id, [(k, None) for k in keys])
            if not code:
                self.store.remove(group_id, tps, first)

    async def _delete_group(self, group_id: str) -> ErrorCode:
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

    # -- membership ------------------------------------------------------------------------

    async def _wait(self, pending: Pending[T]) -> T | None:
        """The pending reply, or None if a graceful shutdown began first."""
        done = anyio.Event()
        pending.add_callback(done.set)
        while not done.is_set():
            if self.ctx.stopping:
                return None
            woke = self.ctx.data_event()  # set by begin_shutdown (and by notify_all)
            async with anyio.create_task_group() as tg:

                async def watch(event: anyio.Event = woke) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                await done.wait()
                tg.cancel_scope.cancel()
        return pending.result

    async def join_group(self, req: m.JoinGroupRequest, peer: str = "") -> m.JoinGroupResponse:
        if code := _read_denied(req.group_id) or self._availability(req.group_id):
            return _error(m.JoinGroupResponse, req, code)
        host = "/" + peer.rsplit(":", 1)[0] if peer else ""
        reply = await self._wait(self.coordinator.join(req, host, self.now_ms()))
        if reply is None:
            return _error(m.JoinGroupResponse, req, E.COORDINATOR_NOT_AVAILABLE)
        return _with_cid(reply, req)

    async def sync_group(self, req: m.SyncGroupRequest) -> m.SyncGroupResponse:
        if code := _read_denied(req.group_id):
            return _error(m.SyncGroupResponse, req, code)
        if self.loading:
            return _error(m.SyncGroupResponse, req, E.COORDINATOR_LOAD_IN_PROGRESS)
        reply = await self._wait(self.coordinator.sync(req, self.now_ms()))
        if reply is None:
            return _error(m.SyncGroupResponse, req, E.COORDINATOR_NOT_AVAILABLE)
        return _with_cid(reply, req)

    async def heartbeat(self, req: m.HeartbeatRequest) -> m.HeartbeatResponse:
        if code := _read_denied(req.group_id):
            return _error(m.HeartbeatResponse, req, code)
        if self.loading:
            return _error(m.HeartbeatResponse, req, E.COORDINATOR_LOAD_IN_PROGRESS)
        code = self.coordinator.heartbeat(req, self.now_ms())
        return _error(m.HeartbeatResponse, req, code)

    async def leave_group(self, req: m.LeaveGroupRequest) -> m.LeaveGroupResponse:
        if code := _read_denied(req.group_id):
            return _error(m.LeaveGroupResponse, req, code)
        if self.loading:
            return _error(m.LeaveGroupResponse, req, E.COORDINATOR_LOAD_IN_PROGRESS)
        code, members = self.coordinator.leave(req.group_id, req.members, self.now_ms())
        reply = _error(m.LeaveGroupResponse, req, code)
        reply.members = members
        return reply

    # -- offsets ---------------------------------------------------------------------------

    async def offset_commit(self, req: m.OffsetCommitRequest) -> m.OffsetCommitResponse:
        results = [
            m.OffsetCommitTopicResponse(
                name=t.name,
                partitions=[
                    m.OffsetCommitPartitionResponse(partition_index=p.partition_index)
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
        pairs = [
            (t, p, r)
            for t, tr in zip(req.topics, results, strict=True)
            for p, r in zip(t.partitions, tr.partitions, strict=True)
        ]
        now = self.now_ms()
        code = _read_denied(req.group_id) or self._availability(req.group_id)
        if not code:
            code = self.coordinator.validate_commit(
                req.group_id, req.generation_id, req.member_id, req.group_instance_id, now
            )
        if code:
            for _, _, result in pairs:
                result.error_code = code
            return m.OffsetCommitResponse(correlation_id=req.correlation_id, topics=results)
        manager = self.ctx.manager
        accepted = []
        for topic, part, result in pairs:
            metadata = part.committed_metadata or ""
            if not allowed(Operation.READ, ResourceType.TOPIC, topic.name):
                result.error_code = E.TOPIC_AUTHORIZATION_FAILED
            elif (topic.name, part.partition_index) not in manager.logs:
                result.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode()) > METADATA_MAX_BYTES:
                result.error_code = E.OFFSET_METADATA_TOO_LARGE
            else:
                value = OffsetValue(
                    part.committed_offset, part.committed_leader_epoch, metadata, now
                )
                tp = (topic.name, part.partition_index)
                accepted.append((tp, value, manager.topics[topic.name].topic_id, result))
        if accepted:
            records: list[tuple[bytes, bytes | None]] = [
                (encode_offset_key(OffsetKey(req.group_id, *tp)), encode_offset_value(v))
                for tp, v, _, _ in accepted
            ]
            first, code = await self._append(req.group_id, records)
            if code:
                for *_, result in accepted:
                    result.error_code = code
            else:
                entries = [(tp, v, topic_id) for tp, v, topic_id, _ in accepted]
                self.store.apply(req.group_id, entries, first)
        return m.OffsetCommitResponse(correlation_id=req.correlation_id, topics=results)

    async def offset_fetch(self, req: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
        if not allowed(Operation.DESCRIBE, GROUP, req.group_id):
            return _error(m.OffsetFetchResponse, req, E.GROUP_AUTHORIZATION_FAILED)
        if code := self._availability(req.group_id):
            return _error(m.OffsetFetchResponse, req, code)
        if not req.group_id:
            return _error(m.OffsetFetchResponse, req, E.INVALID_GROUP_ID)
        committed = self.store.committed(req.group_id)
        if req.topics is None:
            wanted: dict[str, list[int]] = {}
            for topic, partition in sorted(committed):
                if allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic):  # others: unseen
                    wanted.setdefault(topic, []).append(partition)
        else:
            wanted = {t.name: list(t.partition_indexes) for t in req.topics}
        topics = []
        for name, partitions in wanted.items():
            parts = []
            for partition in partitions:
                result = m.OffsetFetchPartitionResponse(partition_index=partition)
                entry = committed.get((name, partition))
                if not allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
                    result.error_code = E.TOPIC_AUTHORIZATION_FAILED
                elif entry is not None:
                    result.committed_offset = entry.value.offset
                    result.committed_leader_epoch = entry.value.leader_epoch
                    result.metadata = entry.value.metadata
                parts.append(result)
            topics.append(m.OffsetFetchTopicResponse(name=name, partitions=parts))
        return m.OffsetFetchResponse(correlation_id=req.correlation_id, topics=topics)

    # -- administration --------------------------------------------------------------------

    async def list_groups(self, req: m.ListGroupsRequest) -> m.ListGroupsResponse:
        if self.loading:
            return _error(m.ListGroupsResponse, req, E.COORDINATOR_LOAD_IN_PROGRESS)
        states = {s.lower() for s in req.states_filter}
        everything = allowed(Operation.DESCRIBE, ResourceType.CLUSTER)  # Kafka: else, each group
        groups = [
            m.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
            )
            for g in sorted(self.coordinator.groups.values(), key=lambda g: g.group_id)
            if (not states or g.state.value.lower() in states)
            and (everything or allowed(Operation.DESCRIBE, GROUP, g.group_id))
        ]
        return m.ListGroupsResponse(correlation_id=req.correlation_id, groups=groups)

    async def describe_groups(self, req: m.DescribeGroupsRequest) -> m.DescribeGroupsResponse:
        if self.loading:
            return _error(m.DescribeGroupsResponse, req, E.COORDINATOR_LOAD_IN_PROGRESS)
        described = []
        for group_id in req.groups:
            group = self.coordinator.groups.get(group_id)
            if not allowed(Operation.DESCRIBE, GROUP, group_id):
                described.append(
                    m.DescribedGroup(group_id=group_id, error_code=E.GROUP_AUTHORIZATION_FAILED)
                )
            elif not group_id:
                described.append(m.DescribedGroup(group_id=group_id, error_code=E.INVALID_GROUP_ID))
            elif group is None:
                described.append(m.DescribedGroup(group_id=group_id, group_state="Dead"))
            else:
                described.append(group.describe())
        return m.DescribeGroupsResponse(correlation_id=req.correlation_id, groups=described)

    async def delete_groups(self, req: m.DeleteGroupsRequest) -> m.DeleteGroupsResponse:
        results = []
        for group_id in req.groups_names:
            code = E.COORDINATOR_LOAD_IN_PROGRESS if self.loading else E.NONE
            if not allowed(Operation.DELETE, GROUP, group_id):
                code = E.GROUP_AUTHORIZATION_FAILED
            if not code:
                code = self.coordinator.delete(group_id)
            if not code:
                code = await self._delete_group(group_id)
            results.append(m.DeletableGroupResult(group_id=group_id, error_code=code))
        return m.DeleteGroupsResponse(correlation_id=req.correlation_id, results=results)


def _read_denied(group_id: str) -> ErrorCode:
    """GROUP_AUTHORIZATION_FAILED unless the caller may READ the group (join, sync,
    heartbeat, leave, commit: Kafka's rule), else NONE."""
    if allowed(Operation.READ, GROUP, group_id):
        return E.NONE
    return E.GROUP_AUTHORIZATION_FAILED


def _offsets_may_expire(group: Group) -> bool:
    """Kafka's ``removeExpiredOffsets`` cases: a simple group's, an Empty group's, and a Stable
    "consumer" group's (but its subscribed topics); never those of a group rebalancing, nor of
    an active group of another protocol type ("connect": its topics are not known)."""
    if group.protocol_type is None or group.state == GroupState.EMPTY:
        return True
    return group.state == GroupState.STABLE and group.protocol_type == "consumer"


R = TypeVar("R", bound=m.Response)


def _error(cls: type[R], req: m.Request, code: ErrorCode) -> R:
    return cls(correlation_id=req.correlation_id, error_code=int(code))


def _with_cid(reply: R, req: m.Request) -> R:
    reply.correlation_id = req.correlation_id
    return reply
