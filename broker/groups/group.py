"""One consumer group's data: its members, state, generation and assignor choice.

No transitions live here (they are :mod:`odradek.broker.groups.coordinator`'s); this module holds
what a group *is*, how it answers and is described, and how it maps to and from its
``GroupMetadataValue`` record (:mod:`odradek.broker.groups.offsets`).

States (Kafka's names)::

    Empty                no members; may still have committed offsets
    PreparingRebalance   waiting for every member to (re)join
    CompletingRebalance  generation formed and assigned; the group record is being stored
    Stable               members have their assignment
    Dead                 deleted (a group in this state is no longer in the coordinator)

A *simple* group (``protocol_type is None``) exists only through offsets committed outside
group membership (a consumer using ``assign``, an admin reset).

Members (:mod:`odradek.broker.groups.member`) are of one of two kinds
(:attr:`Member.client_assigned`), and a group holds one kind:

- server-assigned (False; the native client): ``topics`` and ``assignors`` as sent, the
  ``assignment`` the broker computed; the group record holds their consumer-protocol encodings.
- client-assigned (True; Kafka clients): ``protocols`` (name -> metadata bytes, in preference
  order; ``assignors`` holds their names) and the leader's ``assignment_bytes``; the group record
  holds those bytes unchanged. For protocol type "consumer", ``topics`` and ``assignment`` are
  views decoded from them (``odradek groups describe``, retention, partition-count checks).
- None: replayed from ``__consumer_offsets`` and not rejoined since: either kind may rejoin.
  Its stored bytes are kept as ``protocols[protocol]`` and ``assignment_bytes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from odradek.broker.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR_ORDER
from odradek.broker.groups.consumer_protocol import encode_assignment, encode_subscription
from odradek.broker.groups.member import NEVER, Member
from odradek.broker.groups.offsets import GroupValue, MemberValue
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

__all__ = [
    "Group",
    "GroupState",
    "check_member",
    "fence",
    "join_error",
    "sync_error",
]


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_since_ms: int = -1
    generation: int = 0
    protocol_type: str | None = None  # None: a simple group (offsets only)
    protocol: str | None = None  # the assignor of the current generation
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # in join order
    pending: dict[str, int] = field(default_factory=dict)  # ids handed out -> expiry
    rebalance_deadline_ms: int = NEVER
    delay_deadline_ms: int | None = None  # group.initial.rebalance.delay.ms running
    delay_remaining_ms: int = 0
    new_member_added: bool = False
    revoking: bool = False  # cooperative: partitions held back, a follow-up rebalance due
    assigned_counts: dict[str, int] = field(default_factory=dict)  # topic -> P when assigned

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_since_ms = now_ms

    def subscribed_topics(self) -> set[str]:
        return {t for member in self.members.values() for t in member.topics}

    @property
    def client_assigned(self) -> bool:
        """True if any member is client-assigned (Kafka clients compute the assignment)."""
        return any(mb.client_assigned for mb in self.members.values())

    def candidates(self, exclude: str | None = None) -> set[str]:
        """The assignors every member (``exclude`` aside) supports."""
        sets = [set(mb.assignors) for mid, mb in self.members.items() if mid != exclude]
        return set.intersection(*sets) if sets else set(ASSIGNORS)

    def supports(
        self,
        protocol_type: str,
        assignors: tuple[str, ...],
        member_id: str,
        client_assigned: bool = False,
    ) -> bool:
        """Kafka's ``supportsProtocols``: may this member join (or rejoin) with these? A member
        of the other kind than the group's (server- or client-assigned) may not."""
        if not protocol_type or not assignors:
            return False
        others = [mb for mid, mb in self.members.items() if mid != member_id]
        if not others:
            return True
        if any(mb.client_assigned is (not client_assigned) for mb in others):
            return False
        return protocol_type == self.protocol_type and bool(
            self.candidates(exclude=member_id) & set(assignors)
        )

    def select_protocol(self) -> str:
        """Kafka's vote: each member names its favourite among the common assignors."""
        candidates = self.candidates()
        votes = dict.fromkeys(candidates, 0)
        for member in self.members.values():
            votes[next(a for a in member.assignors if a in candidates)] += 1
        order = {name: i for i, name in enumerate(DEFAULT_ASSIGNOR_ORDER)}
        return min(votes, key=lambda name: (-votes[name], order.get(name, len(order)), name))

    def next_deadline_ms(self) -> int:
        due = min(self.pending.values(), default=NEVER)
        for member in self.members.values():
            if not member.awaiting:
                due = min(due, member.deadline_ms)
        if self.state == GroupState.PREPARING_REBALANCE:
            if self.delay_deadline_ms is not None:  # the rebalance timeout waits for it
                due = min(due, self.delay_deadline_ms)
            else:
                due = min(due, self.rebalance_deadline_ms)
        return due

    def assignment_covers(self, counts: Mapping[str, int]) -> bool:
        """True if the assignment holds every partition of every subscribed topic and no
        partition that does not exist (no assignor gives a partition twice)."""
        assigned: dict[str, int] = dict.fromkeys(self.subscribed_topics(), 0)
        for member in self.members.values():
            for topic, partitions in member.assignment.items():
                count = counts.get(topic, 0)
                if topic not in assigned or any(p >= count for p in partitions):
                    return False
                assigned[topic] += len(partitions)
        return all(n == counts.get(topic, 0) for topic, n in assigned.items())

    # -- answers ---------------------------------------------------------------------------

    def join_response(
        self, member: Member, req: m.JoinGroupRequest | None = None, *, leader: str | None = None
    ) -> m.JoinGroupResponse:
        """The JoinGroup answer of the current generation (members for the leader only; with
        their metadata for the chosen protocol in a client-assigned group). ``leader``
        overrides the leader id announced (a replaced static member must not assign)."""
        leader_id = (self.leader or "") if leader is None else leader
        return m.JoinGroupResponse(
            correlation_id=req.correlation_id if req is not None else 0,
            generation_id=self.generation,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol,
            leader=leader_id,
            member_id=member.member_id,
            members=[
                m.JoinGroupMember(
                    member_id=mb.member_id,
                    group_instance_id=mb.group_instance_id,
                    topics=list(mb.topics),
                    metadata=b"" if mb.client_assigned is False else mb.metadata(self.protocol),
                )
                for mb in self.members.values()
            ]
            if member.member_id == leader_id
            else [],
        )

    def sync_response(self, member: Member) -> m.SyncGroupResponse:
        """The member's assignment: the partitions (server-assigned, or decoded) and, unless
        server-assigned, its bytes as the leader sent them."""
        return m.SyncGroupResponse(
            correlation_id=0,
            protocol_name=self.protocol,
            assignment={t: list(ps) for t, ps in member.assignment.items()},
            protocol_type=self.protocol_type,
            assignment_bytes=b"" if member.client_assigned is False else member.assignment_bytes,
        )

    def find(self, member_id: str, instance_id: str | None) -> Member | None:
        """The member named by its instance id if given (static), else by its member id."""
        if instance_id is not None:
            return next(
                (mb for mb in self.members.values() if mb.group_instance_id == instance_id), None
            )
        return self.members.get(member_id)

    def remove(self, member: Member) -> None:
        self.members.pop(member.member_id, None)
        if self.leader == member.member_id:
            self.leader = next(iter(self.members), None)

    # -- descriptions and records ----------------------------------------------------------

    def describe(self) -> m.DescribedGroup:
        """DescribeGroups' answer. The partitions show from CompletingRebalance on; Kafka's
        ``member_metadata`` / ``member_assignment`` bytes only when Stable, as Kafka's
        ``summary`` (server-assigned members: their consumer-protocol encodings)."""
        assigned = self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
        stable = self.state == GroupState.STABLE
        return m.DescribedGroup(
            group_id=self.group_id,
            group_state=self.state.value,
            protocol_type=self.protocol_type or "",
            protocol_data=(self.protocol or "") if assigned else "",
            members=[
                m.DescribedGroupMember(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    topics=list(member.topics),
                    assignment=dict(member.assignment) if assigned else {},
                    metadata=member.metadata(self.protocol) if stable else b"",
                    assignment_bytes=member.assignment_record() if stable else b"",
                )
                for member in self.members.values()
            ],
        )

    def to_value(self) -> GroupValue:
        """The group record: server-assigned members' subscription and assignment encoded in
        the consumer protocol, the others' bytes as the clients sent them."""
        p = self.protocol
        return GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol,
            leader=self.leader,
            current_state_timestamp_ms=self.state_since_ms,
            members=tuple(
                MemberValue(
                    member_id=mb.member_id,
                    group_instance_id=mb.group_instance_id,
                    client_id=mb.client_id,
                    client_host=mb.client_host,
                    rebalance_timeout_ms=mb.rebalance_timeout_ms,
                    session_timeout_ms=mb.session_timeout_ms,
                    topics=mb.topics,
                    assignment=mb.assignment,
                    subscription_bytes=None if mb.client_assigned is False else mb.metadata(p),
                    assignment_bytes=None if mb.client_assigned is False else mb.assignment_bytes,
                )
                for mb in self.members.values()
            ),
        )

    @classmethod
    def from_value(cls, group_id: str, value: GroupValue, now_ms: int) -> Group:
        """The group as stored: Stable with its members (their sessions restart now), or
        Empty. Members keep their stored bytes; they are client-assigned if the broker cannot
        have written the record (:func:`_could_be_server_assigned`), else of unknown kind (None:
        either kind may rejoin)."""
        group = cls(
            group_id,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol=value.protocol,
            leader=value.leader,
        )
        if value.members and value.protocol:
            kind = None if _could_be_server_assigned(value) else True
            for mv in value.members:
                group.members[mv.member_id] = Member(
                    member_id=mv.member_id,
                    group_instance_id=mv.group_instance_id,
                    client_id=mv.client_id,
                    client_host=mv.client_host,
                    session_timeout_ms=mv.session_timeout_ms,
                    rebalance_timeout_ms=mv.rebalance_timeout_ms,
                    protocol_type=value.protocol_type,
                    assignors=(value.protocol,),
                    topics=tuple(mv.topics),
                    assignment={t: list(ps) for t, ps in mv.assignment.items()},
                    client_assigned=kind,
                    protocols={value.protocol: _stored(mv.subscription_bytes, mv.topics)},
                    assignment_bytes=_stored_assignment(mv.assignment_bytes, mv.assignment),
                    deadline_ms=now_ms + mv.session_timeout_ms,
                    synced=True,
                )
            group.transition(GroupState.STABLE, now_ms)
        else:
            group.protocol = None
            group.leader = None
            stamp = value.current_state_timestamp_ms
            group.transition(GroupState.EMPTY, stamp if stamp >= 0 else now_ms)
        return group


def _could_be_server_assigned(value: GroupValue) -> bool:
    """Whether the broker could have written this record: an assignor of its own, and every
    member's bytes exactly the consumer-protocol v0 encodings it writes (Kafka clients send
    later versions, user data, other protocols). If not, the group is client-assigned."""
    return value.protocol in ASSIGNORS and all(
        mv.subscription_bytes in (None, encode_subscription(mv.topics))
        and mv.assignment_bytes in (None, encode_assignment(mv.assignment))
        for mv in value.members
    )


def _stored(data: bytes | None, topics: tuple[str, ...]) -> bytes:
    return encode_subscription(topics) if data is None else data


def _stored_assignment(data: bytes | None, assignment: dict[str, list[int]]) -> bytes:
    return encode_assignment(assignment) if data is None else data


def check_member(
    group: Group | None, member_id: str, instance_id: str | None, generation: int
) -> ErrorCode:
    """Kafka's checks of a SyncGroup or Heartbeat sender, in Kafka's order."""
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if instance_id is not None:
        static = group.find(member_id, instance_id)
        if static is not None and static.member_id != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def fence(member: Member, code: ErrorCode) -> None:
    """Answer the member's waiting JoinGroup / SyncGroup with ``code``."""
    if member.join_waiter is not None:
        member.join_waiter.resolve(join_error(None, code, member.member_id))
        member.join_waiter = None
    if member.sync_waiter is not None:
        member.sync_waiter.resolve(sync_error(code))
        member.sync_waiter = None


def join_error(
    req: m.JoinGroupRequest | None, code: ErrorCode, member_id: str = ""
) -> m.JoinGroupResponse:
    return m.JoinGroupResponse(
        correlation_id=req.correlation_id if req is not None else 0,
        error_code=int(code),
        member_id=member_id,
    )


def sync_error(code: ErrorCode) -> m.SyncGroupResponse:
    return m.SyncGroupResponse(correlation_id=0, error_code=int(code))
