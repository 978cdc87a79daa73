"""Consumer-group operations as sans-I/O generators (see :mod:`odradek.client.ops`): the membership
calls a consumer makes (JoinGroup with the KIP-394 member-id round trip, SyncGroup, Heartbeat,
LeaveGroup), offsets (OffsetCommit, OffsetFetch) and the group administration calls
(ListGroups, DescribeGroups, DeleteGroups) that :class:`odradek.client.admin.Admin` exposes.

Errors: a top-level error code is raised as its :mod:`odradek.client.errors` class (``check``);
per-partition commit errors are raised too (the first one, in request order), so a commit is
all or nothing as the broker writes it. The membership operations return plain values and
leave the decisions (rejoin, back off) to :class:`odradek.client.group.GroupMember`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from odradek.client.errors import for_code
from odradek.client.ops import Call, Op, check, group_by_topic
from odradek.client.types import TopicPartition
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

__all__ = [
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "OffsetAndMetadata",
    "commit_offsets_op",
    "delete_groups_op",
    "describe_groups_op",
    "fetch_offsets_op",
    "heartbeat_op",
    "join_op",
    "leave_op",
    "list_groups_op",
    "normalize_offsets",
    "sync_op",
]


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the **next** offset to read, and free-form metadata."""

    offset: int
    metadata: str | None = None


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    topics: list[str]
    assignment: set[TopicPartition]


class GroupDescription(NamedTuple):
    group_id: str
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    assignor: str
    members: list[MemberDescription]


def normalize_offsets(
    offsets: Mapping[TopicPartition, int | tuple[int, str | None] | OffsetAndMetadata],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """``{tp: offset | (offset, metadata) | OffsetAndMetadata}`` -> ``{TopicPartition:
    OffsetAndMetadata}``: a plain tuple is aiokafka's ``(offset, metadata)`` (or
    kafka-python's ``OffsetAndMetadata``, whose third field, the leader epoch, is dropped).
    Offsets must be ints (``TypeError``) >= 0 (the next offset to read; ``ValueError``)."""
    out = {
        TopicPartition(*tp): OffsetAndMetadata(*om[:2])
        if isinstance(om, tuple)
        else OffsetAndMetadata(om)
        for tp, om in offsets.items()
    }
    for tp, om in out.items():
        if not isinstance(om.offset, int):
            raise TypeError(f"a committed offset must be an int, not {om.offset!r} for {tp}")
        if om.offset < 0:
            raise ValueError(f"committed offsets must be >= 0, not {om.offset} for {tp}")
    return out


def assignment_set(assignment: Mapping[str, Iterable[int]]) -> set[TopicPartition]:
    return {TopicPartition(t, p) for t, ps in assignment.items() for p in ps}


# ---- membership ------------------------------------------------------------------------------
def join_op(
    group_id: str,
    member_id: str,
    topics: list[str],
    *,
    client_id: str,
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    assignors: list[str],
    group_instance_id: str | None = None,
) -> Op[m.JoinGroupResponse]:
    """JoinGroup; a first join (``member_id == ""``) is answered ``MEMBER_ID_REQUIRED`` with
    our id, and joins again with it (KIP-394). Returns the answer (``member_id``,
    ``generation_id``, ``protocol_name``, ``leader``); raises its error."""
    while True:
        resp, _ = yield Call(
            m.JoinGroupRequest(
                correlation_id=0,
                group_id=group_id,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                member_id=member_id,
                group_instance_id=group_instance_id,
                client_id=client_id,
                assignors=list(assignors),
                topics=sorted(topics),
            )
        )
        assert isinstance(resp, m.JoinGroupResponse)
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED and resp.member_id and not member_id:
            member_id = resp.member_id
            continue
        return check(resp)  # type: ignore[return-value]


def sync_op(
    group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
) -> Op[set[TopicPartition]]:
    """SyncGroup: this member's assignment, computed by the broker."""
    resp, _ = yield Call(
        m.SyncGroupRequest(
            correlation_id=0,
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
        )
    )
    assert isinstance(resp, m.SyncGroupResponse)
    return assignment_set(check(resp).assignment)  # type: ignore[attr-defined]


def heartbeat_op(
    group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
) -> Op[int]:
    """Heartbeat; returns the error code (``0``, or why the member must rejoin)."""
    resp, _ = yield Call(
        m.HeartbeatRequest(
            correlation_id=0,
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
        )
    )
    return resp.error_code


def leave_op(group_id: str, member_id: str, group_instance_id: str | None = None) -> Op[int]:
    """LeaveGroup for one member; returns its error code (the top-level one if set)."""
    resp, _ = yield Call(
        m.LeaveGroupRequest(
            correlation_id=0,
            group_id=group_id,
            members=[m.MemberIdentity(member_id=member_id, group_instance_id=group_instance_id)],
        )
    )
    assert isinstance(resp, m.LeaveGroupResponse)
    if resp.error_code:
        return resp.error_code
    return next((r.error_code for r in resp.members if r.error_code), 0)


# ---- offsets ---------------------------------------------------------------------------------
def commit_offsets_op(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> Op[None]:
    """OffsetCommit (``generation_id=-1, member_id=""``: outside membership, as an admin reset
    or a consumer using ``assign``). Raises the first per-partition error."""
    if not offsets:
        return
    resp, _ = yield Call(
        m.OffsetCommitRequest(
            correlation_id=0,
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            topics=[
                m.OffsetCommitTopic(
                    name=topic,
                    partitions=[
                        m.OffsetCommitPartition(
                            partition_index=p,
                            committed_offset=om.offset,
                            committed_metadata=om.metadata,
                        )
                        for p, om in ps
                    ],
                )
                for topic, ps in group_by_topic(offsets.items()).items()
            ],
        )
    )
    for topic in check(resp).topics:  # type: ignore[attr-defined]
        for part in topic.partitions:
            if part.error_code:
                raise for_code(part.error_code, f"{group_id}: {topic.name}-{part.partition_index}")


def fetch_offsets_op(
    group_id: str, partitions: Iterable[TopicPartition] | None = None
) -> Op[dict[TopicPartition, OffsetAndMetadata | None]]:
    """OffsetFetch: the committed offset of each partition (``None``: nothing committed);
    ``partitions=None`` returns every partition the group has committed."""
    topics = None
    if partitions is not None:
        topics = [
            m.OffsetFetchTopic(name=t, partition_indexes=[p for p, _ in ps])
            for t, ps in group_by_topic((tp, None) for tp in partitions).items()
        ]
        if not topics:
            return {}
    resp, _ = yield Call(m.OffsetFetchRequest(correlation_id=0, group_id=group_id, topics=topics))
    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for topic in check(resp).topics:  # type: ignore[attr-defined]
        for part in topic.partitions:
            if part.error_code:
                raise for_code(part.error_code, f"{group_id}: {topic.name}-{part.partition_index}")
            tp = TopicPartition(topic.name, part.partition_index)
            found = part.committed_offset >= 0
            out[tp] = OffsetAndMetadata(part.committed_offset, part.metadata) if found else None
    return out


# ---- administration --------------------------------------------------------------------------
def list_groups_op(states: Iterable[str] = ()) -> Op[list[GroupListing]]:
    resp, _ = yield Call(m.ListGroupsRequest(correlation_id=0, states_filter=list(states)))
    return [
        GroupListing(g.group_id, g.protocol_type, g.group_state)
        for g in check(resp).groups  # type: ignore[attr-defined]
    ]


def describe_groups_op(group_ids: Iterable[str]) -> Op[list[GroupDescription]]:
    """DescribeGroups; an unknown group is described as ``Dead`` with no members (Kafka)."""
    resp, _ = yield Call(m.DescribeGroupsRequest(correlation_id=0, groups=list(group_ids)))
    out = []
    for g in check(resp).groups:  # type: ignore[attr-defined]
        if g.error_code:
            raise for_code(g.error_code, g.group_id)
        members = [
            MemberDescription(
                mb.member_id,
                mb.group_instance_id,
                mb.client_id,
                mb.client_host,
                list(mb.topics),
                assignment_set(mb.assignment),
            )
            for mb in g.members
        ]
        out.append(
            GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members)
        )
    return out


def delete_groups_op(group_ids: Iterable[str]) -> Op[None]:
    """DeleteGroups; raises the first per-group error (``NonEmptyGroupError``,
    ``GroupIdNotFoundError``)."""
    resp, _ = yield Call(m.DeleteGroupsRequest(correlation_id=0, groups_names=list(group_ids)))
    for result in check(resp).results:  # type: ignore[attr-defined]
        if result.error_code:
            raise for_code(result.error_code, result.group_id)
