"""OffsetCommit, OffsetFetch and OffsetDelete: a group's committed offsets, checked, stored,
read back and deleted.

A commit is checked here (the group's READ, the member's generation, each partition's topic
READ, that the partition exists, Kafka's ``offset.metadata.max.bytes``); what passes is written
as one batch to ``__consumer_offsets`` and applied in memory by
:meth:`GroupApi.commit_offsets <odradek.broker.groups.api.GroupApi.commit_offsets>` once it is
durable, so each partition of the request succeeds or fails with that one batch. A fetch reads
the in-memory :class:`~odradek.broker.groups.store.OffsetStore`; a topic the caller may not
DESCRIBE is never listed.

OffsetDelete (KIP-496, ``kafka-consumer-groups --delete-offsets``) needs DELETE on the group
(else the whole request fails) and READ on each topic. A group that does not exist answers
``GROUP_ID_NOT_FOUND``; an active group keeps the offsets of the topics its members subscribe
to (``GROUP_SUBSCRIBED_TO_TOPIC`` for each of their partitions), and an active group that is
not a "consumer" group keeps all of them (``NON_EMPTY_GROUP``). The offsets that go are
tombstoned in one durable batch before the answer; a partition with nothing committed answers
NONE, as Kafka's does. A failed write answers ``COORDINATOR_NOT_AVAILABLE`` for the whole
request (retriable), as Kafka's does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.groups.offsets import OffsetValue
from odradek.broker.groups.replies import error_reply, read_denied
from odradek.broker.security.authorizer import allowed
from odradek.protocol import messages as m
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.groups.api import GroupApi

__all__ = ["METADATA_MAX_BYTES", "OffsetApi"]

E = ErrorCode
METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes


class OffsetApi:
    def __init__(self, groups: GroupApi) -> None:
        self.groups = groups

    async def offset_commit(self, req: m.OffsetCommitRequest) -> m.OffsetCommitResponse:
        groups = self.groups
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
        now = groups.now_ms()
        code = read_denied(req.group_id) or groups.availability(req.group_id)
        if not code:
            code = groups.coordinator.validate_commit(
                req.group_id, req.generation_id, req.member_id, req.group_instance_id, now
            )
        if code:
            for _, _, result in pairs:
                result.error_code = code
            return m.OffsetCommitResponse(correlation_id=req.correlation_id, topics=results)
        manager = groups.ctx.manager
        accepted = []
        for topic, part, result in pairs:
            metadata = part.committed_metadata or ""
            if not allowed(Operation.READ, ResourceType.TOPIC, topic.name):
                result.error_code = E.TOPIC_AUTHORIZATION_FAILED
            elif (topic.name, part.partition_index) not in manager.partitions.logs:
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
            entries = [(tp, v, topic_id) for tp, v, topic_id, _ in accepted]
            if code := await groups.commit_offsets(req.group_id, entries):
                for *_, result in accepted:
                    result.error_code = code
        return m.OffsetCommitResponse(correlation_id=req.correlation_id, topics=results)

    async def offset_delete(self, req: m.OffsetDeleteRequest) -> m.OffsetDeleteResponse:
        groups = self.groups
        if not allowed(Operation.DELETE, ResourceType.GROUP, req.group_id):
            return error_reply(m.OffsetDeleteResponse, req, E.GROUP_AUTHORIZATION_FAILED)
        code = groups.availability(req.group_id)
        subscribed: set[str] = set()
        if not code:
            code, subscribed = groups.coordinator.offsets_deletable(req.group_id)
        if code:
            return error_reply(m.OffsetDeleteResponse, req, code)
        committed = groups.store.committed(req.group_id)
        logs = groups.ctx.manager.partitions.logs

        def why_kept(tp: tuple[str, int]) -> ErrorCode:  # NONE: its offset goes
            if not allowed(Operation.READ, ResourceType.TOPIC, tp[0]):
                return E.TOPIC_AUTHORIZATION_FAILED
            if tp not in logs:
                return E.UNKNOWN_TOPIC_OR_PARTITION
            return E.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else E.NONE

        codes = {
            (t.name, p): why_kept((t.name, p)) for t in req.topics for p in t.partition_indexes
        }
        topics = [
            m.OffsetCommitTopicResponse(
                name=t.name,
                partitions=[
                    m.OffsetCommitPartitionResponse(
                        partition_index=p, error_code=codes[(t.name, p)]
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in req.topics
        ]
        doomed = [tp for tp, code in codes.items() if not code and tp in committed]
        if doomed and await groups.remove_offsets(req.group_id, doomed):
            # Kafka answers a failed write at the top level, where clients retry it
            return error_reply(m.OffsetDeleteResponse, req, E.COORDINATOR_NOT_AVAILABLE)
        return m.OffsetDeleteResponse(correlation_id=req.correlation_id, topics=topics)

    async def offset_fetch(self, req: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
        if not allowed(Operation.DESCRIBE, ResourceType.GROUP, req.group_id):
            return error_reply(m.OffsetFetchResponse, req, E.GROUP_AUTHORIZATION_FAILED)
        if code := self.groups.availability(req.group_id):
            return error_reply(m.OffsetFetchResponse, req, code)
        if not req.group_id:
            return error_reply(m.OffsetFetchResponse, req, E.INVALID_GROUP_ID)
        committed = self.groups.store.committed(req.group_id)
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
