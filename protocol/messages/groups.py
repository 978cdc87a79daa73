"""Messages of the consumer-group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

A member is one of two kinds (a group holds only one):

- *server-assigned* (the native client): JoinGroup names ``topics`` and ``assignors``; the
  broker computes the assignment and SyncGroup returns it as ``assignment``.
- *client-assigned* (Kafka's classic protocol, reached through the Kafka listener): JoinGroup
  carries ``protocols`` (name, opaque metadata bytes) in preference order; the leader's
  JoinGroup response lists every member with its metadata for the chosen protocol, the leader's
  SyncGroup carries every member's assignment bytes, and each SyncGroup response returns the
  member's own bytes in ``assignment_bytes`` (``b""`` for a member the leader left out).

Fields added after the first release sit at the end of their struct with a default, so frames
of older peers (msgspec array-like structs: fewer elements) still decode.
"""

from __future__ import annotations

from odradek.protocol.messages.base import (
    Assignment,
    Int16,
    Int32,
    Int64,
    Request,
    Response,
    Str,
    _Item,
)


# ---- Group membership -------------------------------------------------------------------------
class JoinGroupProtocol(_Item, kw_only=True):
    """One protocol a client-assigned member supports (e.g. "range", "cooperative-sticky"),
    with its metadata bytes (for "consumer": Kafka's ConsumerProtocol subscription)."""

    name: Str
    metadata: bytes


class JoinGroupRequest(Request, tag=11, kw_only=True):
    group_id: Str
    session_timeout_ms: Int32 = 45_000
    rebalance_timeout_ms: Int32 = 300_000
    member_id: Str = ""  # "" on the first join
    group_instance_id: Str | None = None
    client_id: Str = ""
    protocol_type: Str = "consumer"
    assignors: list[Str] = []  # preference order, e.g. ["range", "roundrobin"]; []: broker's
    topics: list[Str] = []  # the subscription
    # Non-empty: a client-assigned member (``assignors`` and ``topics`` are then ignored).
    protocols: list[JoinGroupProtocol] = []
    # False (Kafka JoinGroup v0-v3): a new member is admitted at once, without the
    # MEMBER_ID_REQUIRED round trip those clients do not make.
    require_known_member_id: bool = True


class JoinGroupMember(_Item, kw_only=True):
    member_id: Str
    group_instance_id: Str | None = None
    topics: list[Str] = []
    metadata: bytes = b""  # client-assigned groups: the member's bytes for the chosen protocol


class JoinGroupResponse(Response, tag=11, kw_only=True):
    generation_id: Int32 = -1
    protocol_type: Str | None = None
    protocol_name: Str | None = None  # the assignor chosen
    leader: Str = ""
    member_id: Str = ""
    members: list[JoinGroupMember] = []  # filled for the leader only, as in Kafka


class SyncGroupAssignment(_Item, kw_only=True):
    """The leader's assignment for one member of a client-assigned group (opaque bytes)."""

    member_id: Str
    assignment: bytes


class SyncGroupRequest(Request, tag=14, kw_only=True):
    group_id: Str
    generation_id: Int32
    member_id: Str
    group_instance_id: Str | None = None
    # Kafka SyncGroup v5: checked against the group's (INCONSISTENT_GROUP_PROTOCOL); None: not.
    protocol_type: Str | None = None
    protocol_name: Str | None = None
    assignments: list[SyncGroupAssignment] = []  # client-assigned groups: the leader's only


class SyncGroupResponse(Response, tag=14, kw_only=True):
    protocol_name: Str | None = None
    assignment: Assignment = {}  # server-assigned groups
    protocol_type: Str | None = None
    assignment_bytes: bytes = b""  # client-assigned groups: this member's bytes


class HeartbeatRequest(Request, tag=12, kw_only=True):
    group_id: Str
    generation_id: Int32
    member_id: Str
    group_instance_id: Str | None = None


class HeartbeatResponse(Response, tag=12, kw_only=True):
    pass


class MemberIdentity(_Item, kw_only=True):
    member_id: Str
    group_instance_id: Str | None = None


class LeaveGroupRequest(Request, tag=13, kw_only=True):
    group_id: Str
    members: list[MemberIdentity] = []


class LeaveGroupMemberResponse(_Item, kw_only=True):
    member_id: Str
    group_instance_id: Str | None = None
    error_code: Int16 = 0


class LeaveGroupResponse(Response, tag=13, kw_only=True):
    members: list[LeaveGroupMemberResponse] = []


# ---- Offsets of groups -------------------------------------------------------------------
class OffsetCommitPartition(_Item, kw_only=True):
    partition_index: Int32
    committed_offset: Int64  # the next offset to read
    committed_leader_epoch: Int32 = -1
    committed_metadata: Str | None = None


class OffsetCommitTopic(_Item, kw_only=True):
    name: Str
    partitions: list[OffsetCommitPartition] = []


class OffsetCommitRequest(Request, tag=8, kw_only=True):
    group_id: Str
    generation_id: Int32 = -1  # -1 with member_id "": a commit outside group membership
    member_id: Str = ""
    group_instance_id: Str | None = None
    topics: list[OffsetCommitTopic] = []


class OffsetCommitPartitionResponse(_Item, kw_only=True):
    partition_index: Int32
    error_code: Int16 = 0


class OffsetCommitTopicResponse(_Item, kw_only=True):
    name: Str
    partitions: list[OffsetCommitPartitionResponse] = []


class OffsetCommitResponse(Response, tag=8, kw_only=True):
    topics: list[OffsetCommitTopicResponse] = []


class OffsetFetchTopic(_Item, kw_only=True):
    name: Str
    partition_indexes: list[Int32] = []


class OffsetFetchRequest(Request, tag=9, kw_only=True):
    group_id: Str
    topics: list[OffsetFetchTopic] | None = None  # None: every committed partition


class OffsetFetchPartitionResponse(_Item, kw_only=True):
    partition_index: Int32
    committed_offset: Int64 = -1  # -1: nothing committed
    committed_leader_epoch: Int32 = -1
    metadata: Str | None = None
    error_code: Int16 = 0


class OffsetFetchTopicResponse(_Item, kw_only=True):
    name: Str
    partitions: list[OffsetFetchPartitionResponse] = []


class OffsetFetchResponse(Response, tag=9, kw_only=True):
    topics: list[OffsetFetchTopicResponse] = []


# ---- Group administration ----------------------------------------------------------------
class ListGroupsRequest(Request, tag=16, kw_only=True):
    states_filter: list[Str] = []  # []: every state


class ListedGroup(_Item, kw_only=True):
    group_id: Str
    protocol_type: Str = ""
    group_state: Str = ""  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead


class ListGroupsResponse(Response, tag=16, kw_only=True):
    groups: list[ListedGroup] = []


class DescribeGroupsRequest(Request, tag=15, kw_only=True):
    groups: list[Str] = []


class DescribedGroupMember(_Item, kw_only=True):
    member_id: Str
    group_instance_id: Str | None = None
    client_id: Str = ""
    client_host: Str = ""
    topics: list[Str] = []  # the subscription
    assignment: Assignment = {}
    # Kafka's member_metadata / member_assignment (ConsumerProtocol bytes for "consumer"
    # groups of either kind; the raw bytes of client-assigned groups), filled when Stable.
    metadata: bytes = b""
    assignment_bytes: bytes = b""


class DescribedGroup(_Item, kw_only=True):
    error_code: Int16 = 0
    group_id: Str
    group_state: Str = ""
    protocol_type: Str = ""
    protocol_data: Str = ""  # the assignor in use
    members: list[DescribedGroupMember] = []


class DescribeGroupsResponse(Response, tag=15, kw_only=True):
    groups: list[DescribedGroup] = []


class DeleteGroupsRequest(Request, tag=42, kw_only=True):
    groups_names: list[Str] = []


class DeletableGroupResult(_Item, kw_only=True):
    group_id: Str
    error_code: Int16 = 0


class DeleteGroupsResponse(Response, tag=42, kw_only=True):
    results: list[DeletableGroupResult] = []


class OffsetDeleteRequest(Request, tag=47, kw_only=True):
    group_id: Str
    topics: list[OffsetFetchTopic] = []  # the partitions whose committed offsets go


class OffsetDeleteResponse(Response, tag=47, kw_only=True):
    # per partition: NONE (deleted, or none was committed) or why its offset stays
    topics: list[OffsetCommitTopicResponse] = []
