"""Consumer-group operations as sans-I/O generators (see :mod:`odradek.client.ops`): the membership
calls a consumer makes (JoinGroup with the KIP-394 member-id round trip, SyncGroup, Heartbeat,
LeaveGroup), offsets (OffsetCommit, OffsetFetch, OffsetDelete) and the group administration calls
(ListGroups, DescribeGroups, DeleteGroups) that :class:`odradek.client.admin.Admin` exposes.

Errors: a top-level error code is raised as its :mod:`odradek.client.errors` class (``check``);
per-partition commit errors are raised too (the first one, in request order), so a commit is
all or nothing as the broker writes it. The membership operations return plain values and
leave the decisions (rejoin, back off) to :class:`odradek.client.group.GroupMember`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from odradek.client.errors import KafkaError
from odradek.client.ops import (
    Call,
    Op,
    check,
    group_by_topic,
    partition_errors,
    request_topics,
    response_partitions,
)
from odradek.client.types import TopicPartition
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.client.group import GroupMember

__all__ = [
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "OffsetAndMetadata",
    "commit_offsets_op",
    "delete_offsets_op",
    "fetch_offsets_op",
    "heartbeat_op",
    "join_op",
    "leave_op",
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
def join_op(member: GroupMember) -> Op[m.JoinGroupResponse]:
    """JoinGroup for ``member`` (its id, subscription and config); a first join (member id
    ``""``) is answered ``MEMBER_ID_REQUIRED`` with our id, and joins again with it (KIP-394).
    Returns the answer (``member_id``, ``generation_id``, ``protocol_name``, ``leader``);
    raises its error."""
    cfg, member_id = member.config, member.member_id
    while True:
        resp, _ = yield Call(
            m.JoinGroupRequest(
                correlation_id=0,
                group_id=member.group_id,
                session_timeout_ms=cfg.session_timeout_ms,
                rebalance_timeout_ms=cfg.max_poll_interval_ms,
                member_id=member_id,
                group_instance_id=member.group_instance_id,
                client_id=cfg.client_id,
                assignors=list(cfg.partition_assignment_strategy),
                topics=sorted(member.topics),
            )
        )
        assert isinstance(resp, m.JoinGroupResponse)
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED and resp.member_id and not member_id:
            member_id = resp.member_id
            continue
        return check(resp)  # type: ignore[return-value]


def sync_op(member: GroupMember) -> Op[set[TopicPartition]]:
    """SyncGroup: ``member``'s assignment in its generation, computed by the broker."""
    resp, _ = yield Call(
        m.SyncGroupRequest(
            correlation_id=0,
            group_id=member.group_id,
            generation_id=member.generation,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
        )
    )
    assert isinstance(resp, m.SyncGroupResponse)
    return assignment_set(check(resp).assignment)  # type: ignore[attr-defined]


def heartbeat_op(member: GroupMember) -> Op[int]:
    """Heartbeat for ``member``'s generation; returns the error code (``0``, or why the
    member must rejoin)."""
    resp, _ = yield Call(
        m.HeartbeatRequest(
            correlation_id=0,
            group_id=member.group_id,
            generation_id=member.generation,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
        )
    )
    return resp.error_code


def leave_op(group_id: str, member_id: str) -> Op[int]:
    """LeaveGroup for one dynamic member; returns its error code (the top-level one if set)."""
    resp, _ = yield Call(
        m.LeaveGroupRequest(
            correlation_id=0,
            group_id=group_id,
            members=[m.MemberIdentity(member_id=member_id)],
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
            topics=request_topics(
                offsets,
                m.OffsetCommitTopic,
                lambda p, om: m.OffsetCommitPartition(
                    partition_index=p, committed_offset=om.offset, committed_metadata=om.metadata
                ),
            ),
        )
    )
    list(response_partitions(resp, f"{group_id}: "))  # raises the first error


def fetch_offsets_op(
    group_id: str, partitions: Iterable[TopicPartition] | None = None
) -> Op[dict[TopicPartition, OffsetAndMetadata | None]]:
    """OffsetFetch: the committed offset of each partition (``None``: nothing committed);
    ``partitions=None`` returns every partition the group has committed."""
    topics = None
    if partitions is not None:
        topics = _offset_topics(partitions)
        if not topics:
            return {}
    resp, _ = yield Call(m.OffsetFetchRequest(correlation_id=0, group_id=group_id, topics=topics))
    return {
        tp: OffsetAndMetadata(part.committed_offset, part.metadata)
        if part.committed_offset >= 0
        else None
        for tp, part in response_partitions(resp, f"{group_id}: ")
    }


def delete_offsets_op(
    group_id: str, partitions: Iterable[TopicPartition]
) -> Op[dict[TopicPartition, KafkaError | None]]:
    """OffsetDelete: the group's committed offsets of ``partitions`` are deleted. Raises the
    top-level error (``GroupIdNotFoundError``, ``NonEmptyGroupError``); returns each
    partition's error (``None``: deleted, or nothing was committed), since each partition
    succeeds or fails on its own."""
    topics = _offset_topics(partitions)
    if not topics:
        return {}
    resp, _ = yield Call(m.OffsetDeleteRequest(correlation_id=0, group_id=group_id, topics=topics))
    return {tp: error for tp, _, error in partition_errors(resp, f"{group_id}: ")}


def _offset_topics(partitions: Iterable[TopicPartition]) -> list[m.OffsetFetchTopic]:
    return [
        m.OffsetFetchTopic(name=t, partition_indexes=[p for p, _ in ps])
        for t, ps in group_by_topic((tp, None) for tp in partitions).items()
    ]
