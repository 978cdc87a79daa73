"""The group membership state machine (Kafka's classic GroupCoordinator, one node, no I/O).

Every method runs on the event-loop thread, takes ``now_ms`` from the injected clock and
returns at once: a JoinGroup or SyncGroup that must wait gets a :class:`Pending` that a later
event resolves. What needs I/O is left for :mod:`odradek.broker.groups.api`: the group records to
store (:attr:`GroupCoordinator.outbox`; the caller reports each stored one with
:meth:`stored`), and the timers (the caller calls :meth:`tick` by :meth:`next_deadline_ms`).
What a rebalance does to a group, its delays, timeouts and assignment, is
:mod:`odradek.broker.groups.rebalance`; which member a JoinGroup is and what it does to its group
is :mod:`odradek.broker.groups.join`; this module checks requests, finds their group and turns
requests and timers into those events.

Transitions (Kafka's)::

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                ▲      │ (no member left)                              │ group record
      └────────────────┼──────┘                                               ▼ stored
                       └──── join (new member / changed subscription), leave, ─ Stable
                             session timeout, partitions added to a subscribed topic

- A first join with ``member_id = ""`` is answered ``MEMBER_ID_REQUIRED`` with a generated id
  (KIP-394); the member is *pending* until it joins again with it (or its session expires).
  A static member (``group_instance_id``) is admitted at once; a known instance id rejoining
  takes over its old member's place (the old id is fenced) without a rebalance when nothing
  changed.
- Client-assigned groups (Kafka clients, JoinGroup with ``protocols``): the protocol is Kafka's
  ``selectProtocol`` (each member votes for its most preferred protocol that every member
  supports; most votes wins, a tie goes to the broker's assignor order, then the name). The
  leader's JoinGroup answer lists every member with its metadata for that protocol; the leader's
  SyncGroup in CompletingRebalance brings every member's assignment bytes (a member it leaves out
  gets ``b""``; ids that are not members are ignored), which are stored in the group record;
  every waiting SyncGroup (the leader's too) is answered once that record is durable. Followers
  wait for it: no timer ever answers them with an empty assignment; only a new rebalance (the
  leader left, or its session expired without a SyncGroup) answers them REBALANCE_IN_PROGRESS.
  As in Kafka, the leader rejoining a Stable group always starts a rebalance (it may have seen
  new metadata), and a rejoin matches only with the same protocols and metadata.
- A group holds one kind of member: a member of the other kind joining is answered
  ``INCONSISTENT_GROUP_PROTOCOL``. A group replayed from ``__consumer_offsets`` accepts either
  kind until its members have rejoined (:mod:`group`).
- JoinGroup v0-v3 clients never retry after ``MEMBER_ID_REQUIRED``: with
  ``require_known_member_id`` False a new member is admitted at once under a generated id.
- Partition counts: a group whose subscribed topics (client-assigned "consumer" groups: the
  topics decoded from the chosen protocol's metadata) changed partition count since the join
  completed rebalances (:meth:`GroupCoordinator.topics_changed`), for both kinds. Kafka's broker
  leaves that to the clients, which watch metadata and rejoin themselves; the rebalance the
  broker starts is the same one they would join, so it changes nothing for them, and it covers
  clients that do not watch. Groups of other protocol types ("connect") have no topics to watch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.broker.groups.group import (
    Group,
    GroupState,
    check_member,
    fence,
    join_error,
    sync_error,
)
from odradek.broker.groups.join import Admission
from odradek.broker.groups.member import NEVER, Pending, protocol_names, resolve_assignors
from odradek.broker.groups.offsets import GroupValue
from odradek.broker.groups.rebalance import Rebalancer
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

__all__ = ["CoordinatorConfig", "GroupCoordinator", "StoreGroup"]

E = ErrorCode


@dataclass(frozen=True)
class CoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000


@dataclass(frozen=True)
class StoreGroup:
    """A group record to write to ``__consumer_offsets`` (``value`` None: a tombstone)."""

    group_id: str
    generation: int
    value: GroupValue | None


class GroupCoordinator:
    def __init__(
        self,
        config: CoordinatorConfig,
        partitions_of: Callable[[str], int],
        *,
        new_member_id: Callable[[str], str] | None = None,
    ) -> None:
        self.config = config
        self.partitions_of = partitions_of  # topic -> partition count (0: no such topic)
        self.groups: dict[str, Group] = {}
        self.outbox: list[StoreGroup] = []
        self.broken: list[tuple[str, Exception]] = []  # groups dropped by tick, for the log
        self.on_change: Callable[[], None] = lambda: None  # wakes the timer task
        self.rebalance = Rebalancer(config.initial_rebalance_delay_ms, partitions_of, self._store)
        self.admission = Admission(
            new_member_id or (lambda client: f"{client}-{uuid.uuid4()}"),
            self.rebalance,
            self._store,
        )

    # -- JoinGroup -------------------------------------------------------------------------

    def join(self, req: m.JoinGroupRequest, host: str, now_ms: int) -> Pending[m.JoinGroupResponse]:
        def fail(code: ErrorCode, member_id: str = "") -> Pending[m.JoinGroupResponse]:
            return Pending(join_error(req, code, member_id))

        if not req.group_id:
            return fail(E.INVALID_GROUP_ID)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        client_assigned = bool(req.protocols)
        if client_assigned:
            assignors = protocol_names(req.protocols)
        else:
            assignors = resolve_assignors(req.assignors)
        if not req.protocol_type or not assignors:
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return fail(E.UNKNOWN_MEMBER_ID)
            group = self.groups[req.group_id] = Group(req.group_id, state_since_ms=now_ms)
        if not group.supports(req.protocol_type, assignors, req.member_id, client_assigned):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        try:
            return self.admission.admit(group, req, assignors, host, now_ms)
        finally:
            self._changed()

    # -- rebalance -------------------------------------------------------------------------

    def stored(
        self, group_id: str, generation: int, now_ms: int, error: ErrorCode = E.NONE
    ) -> None:
        """The group record of ``generation`` is durable (or failed with ``error``)."""
        group = self.groups.get(group_id)
        if group is None or group.generation != generation:
            return
        if group.state != GroupState.COMPLETING_REBALANCE:
            return
        if error:
            # Kafka: the members must rejoin (their assignment was not stored).
            for member in group.members.values():
                if member.sync_waiter is not None:
                    member.sync_waiter.resolve(sync_error(E.COORDINATOR_NOT_AVAILABLE))
                    member.sync_waiter = None
            self.rebalance.prepare(group, now_ms)
            self._changed()
            return
        group.transition(GroupState.STABLE, now_ms)
        for member in group.members.values():
            if member.sync_waiter is not None:
                member.sync_waiter.resolve(group.sync_response(member))
                member.sync_waiter = None
                member.synced = True
                member.deadline_ms = now_ms + member.session_timeout_ms
        self.rebalance.maybe_follow_up(group, now_ms)
        self._changed()

    # -- SyncGroup / Heartbeat / LeaveGroup ------------------------------------------------

    def sync(self, req: m.SyncGroupRequest, now_ms: int) -> Pending[m.SyncGroupResponse]:
        group = self.groups.get(req.group_id)
        code = check_member(group, req.member_id, req.group_instance_id, req.generation_id)
        if code:
            return Pending(sync_error(code))
        assert group is not None
        member = group.members[req.member_id]
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol
        ):
            return Pending(sync_error(E.INCONSISTENT_GROUP_PROTOCOL))  # Kafka SyncGroup v5
        if group.state == GroupState.PREPARING_REBALANCE:
            return Pending(sync_error(E.REBALANCE_IN_PROGRESS))
        member.deadline_ms = now_ms + member.session_timeout_ms
        if group.state == GroupState.STABLE:
            member.synced = True
            reply: Pending[m.SyncGroupResponse] = Pending(group.sync_response(member))
            self.rebalance.maybe_follow_up(group, now_ms)
            self._changed()
            return reply
        if member.sync_waiter is not None:
            member.sync_waiter.resolve(sync_error(E.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter = Pending()
        if group.client_assigned and req.member_id == group.leader:
            self.rebalance.leader_assigns(group, req.assignments)
        self._changed()
        return waiter

    def heartbeat(self, req: m.HeartbeatRequest, now_ms: int) -> ErrorCode:
        group = self.groups.get(req.group_id)
        code = check_member(group, req.member_id, req.group_instance_id, req.generation_id)
        if code:
            return code
        assert group is not None
        member = group.members[req.member_id]
        member.deadline_ms = now_ms + member.session_timeout_ms
        self._changed()
        if group.state == GroupState.PREPARING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave(
        self, group_id: str, members: Iterable[m.MemberIdentity], now_ms: int
    ) -> tuple[ErrorCode, list[m.LeaveGroupMemberResponse]]:
        group = self.groups.get(group_id)
        if not group_id:
            return E.INVALID_GROUP_ID, []
        if group is None:
            return E.UNKNOWN_MEMBER_ID, []
        results = []
        removed = False
        for identity in members:
            result = m.LeaveGroupMemberResponse(
                member_id=identity.member_id, group_instance_id=identity.group_instance_id
            )
            results.append(result)
            member = group.find(identity.member_id, identity.group_instance_id)
            if member is None:
                result.error_code = E.UNKNOWN_MEMBER_ID
            elif identity.member_id and member.member_id != identity.member_id:
                result.error_code = E.FENCED_INSTANCE_ID
            else:
                fence(member, E.UNKNOWN_MEMBER_ID)
                group.remove(member)
                removed = True
        if removed:
            self.rebalance.member_gone(group, now_ms)
        self._changed()
        return E.NONE, results

    # -- offsets: who may commit -----------------------------------------------------------

    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None, now_ms: int
    ) -> ErrorCode:
        """Kafka's ``validateOffsetCommit``; creates a simple group for a commit outside
        membership (``generation < 0``) to a group that does not exist."""
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return E.ILLEGAL_GENERATION
            self.groups[group_id] = Group(group_id, state_since_ms=now_ms)
            return E.NONE
        if instance_id is not None:
            static = group.find(member_id, instance_id)
            if static is not None and static.member_id != member_id:
                return E.FENCED_INSTANCE_ID
        if generation < 0 and group.state == GroupState.EMPTY:
            return E.NONE
        if group.state == GroupState.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return E.ILLEGAL_GENERATION
        member = group.members[member_id]
        member.deadline_ms = now_ms + member.session_timeout_ms  # a commit is a heartbeat
        return E.NONE

    # -- topics ----------------------------------------------------------------------------

    def topics_changed(self, topics: Iterable[str], now_ms: int) -> None:
        """Partitions were added to (or a topic created or deleted among) ``topics``:
        rebalance every group whose assignment covers a different partition count."""
        wanted = set(topics)
        for group in list(self.groups.values()):
            if group.state not in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                continue
            for topic in wanted & group.subscribed_topics():
                if group.assigned_counts.get(topic, 0) != self.partitions_of(topic):
                    self.rebalance.prepare(group, now_ms)
                    break
        self._changed()

    # -- timers ----------------------------------------------------------------------------

    def next_deadline_ms(self) -> int:
        return min((g.next_deadline_ms() for g in self.groups.values()), default=NEVER)

    def tick(self, now_ms: int) -> None:
        """Fire every timer due at ``now_ms``: pending ids, sessions, delays, rebalances.

        A group whose timers raise (a bug in its state) is dropped by :meth:`_drop_broken`;
        the other groups' timers still fire, now and at every later tick."""
        for group in list(self.groups.values()):
            try:
                if group.next_deadline_ms() <= now_ms:
                    self.rebalance.fire_timers(group, now_ms)
            except Exception as exc:
                self._drop_broken(group, exc)
        self._changed()

    def _drop_broken(self, group: Group, exc: Exception) -> None:
        """Answer the group's waiting members ``COORDINATOR_NOT_AVAILABLE`` and drop its
        in-memory state: they rejoin a new group. Its committed offsets (the offset store) are
        untouched."""
        for member in group.members.values():
            fence(member, E.COORDINATOR_NOT_AVAILABLE)
        self.groups.pop(group.group_id, None)
        self.broken.append((group.group_id, exc))

    # -- groups as a whole -----------------------------------------------------------------

    def load(
        self, values: dict[str, GroupValue], offset_groups: Iterable[str], now_ms: int
    ) -> None:
        """Rebuild the groups replayed from ``__consumer_offsets``."""
        for group_id, value in values.items():
            group = self.groups[group_id] = Group.from_value(group_id, value, now_ms)
            counts = {t: self.partitions_of(t) for t in group.subscribed_topics()}
            group.assigned_counts = counts
            if group.state == GroupState.STABLE and not group.assignment_covers(counts):
                self.rebalance.prepare(group, now_ms)  # partitions changed before the crash
        for group_id in offset_groups:
            if group_id not in self.groups:
                self.groups[group_id] = Group(group_id, state_since_ms=now_ms)
        self._changed()

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups' check; the caller writes the tombstones, then calls :meth:`forget`."""
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if group.state != GroupState.EMPTY:
            return E.NON_EMPTY_GROUP
        return E.NONE

    def offsets_deletable(self, group_id: str) -> tuple[ErrorCode, set[str]]:
        """OffsetDelete's check (Kafka's ``validateOffsetDelete``): the error of the whole
        request, or NONE and the topics whose offsets must stay, those the group's members
        subscribe to (none once the group is Empty). An active group of another protocol type
        than "consumer" ("connect") keeps every offset: its topics are not known."""
        if not group_id:
            return E.INVALID_GROUP_ID, set()
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return E.GROUP_ID_NOT_FOUND, set()
        if group.state == GroupState.EMPTY:
            return E.NONE, set()
        if group.protocol_type != "consumer":
            return E.NON_EMPTY_GROUP, set()
        return E.NONE, group.subscribed_topics()

    def forget(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.state == GroupState.EMPTY:
            group.transition(GroupState.DEAD, group.state_since_ms)
            del self.groups[group_id]

    def _store(self, group: Group) -> None:
        """Queue the group record of ``group``'s current generation for the caller to store."""
        self.outbox.append(StoreGroup(group.group_id, group.generation, group.to_value()))

    def _changed(self) -> None:
        self.on_change()
