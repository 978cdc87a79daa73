"""How a group goes through a rebalance, and the timers that drive it (no I/O).

:class:`GroupCoordinator` turns requests into events; this module is what those events do to
one :class:`Group`: start a rebalance (PreparingRebalance), decide when every member has
joined, form the new generation (CompletingRebalance), and start a follow-up one. The group
record each step produces goes to the ``store`` callback (the coordinator's outbox); the
transition to Stable happens when that record is durable (:meth:`GroupCoordinator.stored`).

- ``group.initial.rebalance.delay.ms`` delays the first rebalance of an Empty group, and each
  new member extends it by the same delay, up to the rebalance timeout (Kafka's
  InitialDelayedJoin).
- The join completes when no member id is pending and every member has a JoinGroup waiting,
  or when the rebalance timeout passes: a member that has not rejoined by then is removed.
- Server-assigned groups (the native client): the assignment is computed when the join
  completes (:mod:`assignors`), stored in the group record, and handed out by SyncGroup only
  once that record is durable.
- Client-assigned groups (Kafka clients): the generation forms without an assignment; the
  leader's SyncGroup brings every member's bytes (:meth:`Rebalancer.leader_assigns`), and only
  then is the group record written.
- A member is removed when its session (``session_timeout_ms`` since its last heartbeat, sync
  or completed join) expires; a pending member id expires with the session it was given.
- A cooperative assignment that held partitions back starts a follow-up rebalance as soon as
  the group is Stable and every member has synced (KIP-429).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.broker.groups.assignors import ASSIGNORS
from odradek.broker.groups.group import Group, GroupState, sync_error
from odradek.broker.groups.member import NEVER
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

__all__ = ["Rebalancer"]

E = ErrorCode


class Rebalancer:
    """The rebalance steps of the coordinator's groups; every method runs on the event loop."""

    def __init__(
        self,
        initial_delay_ms: int,
        partitions_of: Callable[[str], int],
        store: Callable[[Group], None],
    ) -> None:
        self.initial_delay_ms = initial_delay_ms
        self.partitions_of = partitions_of  # topic -> partition count (0: no such topic)
        self._store = store  # a group record to write for the group's current generation

    def prepare(self, group: Group, now_ms: int) -> None:
        """Start a rebalance: void a forming generation's syncs, arm the delay and timeout."""
        if group.state == GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():  # their assignment is void: rejoin
                if member.sync_waiter is not None:
                    member.sync_waiter.resolve(sync_error(E.REBALANCE_IN_PROGRESS))
                    member.sync_waiter = None
        delay_ms = self.initial_delay_ms
        timeout_ms = max((mb.rebalance_timeout_ms for mb in group.members.values()), default=0)
        if group.state == GroupState.EMPTY and delay_ms > 0:
            group.delay_deadline_ms = now_ms + delay_ms
            group.delay_remaining_ms = max(timeout_ms - delay_ms, 0)
            group.new_member_added = False
        else:
            group.delay_deadline_ms = None
        group.rebalance_deadline_ms = now_ms + timeout_ms
        group.transition(GroupState.PREPARING_REBALANCE, now_ms)
        self.maybe_complete_join(group, now_ms)

    def maybe_complete_join(self, group: Group, now_ms: int) -> None:
        if group.state != GroupState.PREPARING_REBALANCE or group.delay_deadline_ms is not None:
            return
        if group.pending or any(mb.join_waiter is None for mb in group.members.values()):
            return
        self.complete_join(group, now_ms)

    def complete_join(self, group: Group, now_ms: int) -> None:
        for member in [mb for mb in group.members.values() if mb.join_waiter is None]:
            group.remove(member)  # did not rejoin within the rebalance timeout
        group.pending.clear()
        group.delay_deadline_ms = None
        group.rebalance_deadline_ms = NEVER
        group.generation += 1
        if not group.members:
            group.protocol = group.leader = None
            group.revoking = False
            group.transition(GroupState.EMPTY, now_ms)
            self._store(group)
            return
        group.protocol = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        if group.client_assigned:
            self._complete_client_join(group, now_ms)
            return
        previous = {mid: mb.assignment for mid, mb in group.members.items()}
        subscriptions = {mid: mb.topics for mid, mb in group.members.items()}
        counts = {t: self.partitions_of(t) for t in group.subscribed_topics()}
        plan = ASSIGNORS[group.protocol](subscriptions, counts, previous)
        group.revoking = plan.revoking > 0
        group.assigned_counts = counts
        for mid, member in group.members.items():
            member.assignment = plan.assignment.get(mid, {})
            member.synced = False
        self._generation_formed(group, now_ms)
        self._store(group)

    def _complete_client_join(self, group: Group, now_ms: int) -> None:
        """Client-assigned: the generation forms without an assignment; the leader's SyncGroup
        brings it (:meth:`leader_assigns`), and only then is the group record written."""
        protocol = group.protocol or ""
        group.revoking = False
        for member in group.members.values():
            member.choose(protocol)
            member.set_assignment_bytes(b"")
            member.synced = False
        group.assigned_counts = {t: self.partitions_of(t) for t in group.subscribed_topics()}
        self._generation_formed(group, now_ms)

    def _generation_formed(self, group: Group, now_ms: int) -> None:
        """Enter CompletingRebalance and answer every waiting JoinGroup; sessions restart."""
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for member in group.members.values():
            waiter, member.join_waiter = member.join_waiter, None
            member.deadline_ms = now_ms + member.session_timeout_ms
            if waiter is not None:
                waiter.resolve(group.join_response(member))

    def leader_assigns(self, group: Group, assignments: list[m.SyncGroupAssignment]) -> None:
        """The leader's SyncGroup in CompletingRebalance: every member's bytes (``b""`` for one
        left out; an id that is no member is ignored, a repeated id's last entry counts), then
        the group record; the coordinator answers the waiting syncs once it is durable."""
        given = {a.member_id: a.assignment for a in assignments}
        for member_id, member in group.members.items():
            member.set_assignment_bytes(given.get(member_id, b""))
        self._store(group)

    def maybe_follow_up(self, group: Group, now_ms: int) -> None:
        """Cooperative: once every member has its (reduced) assignment, rebalance again."""
        members = group.members.values()
        if group.state == GroupState.STABLE and group.revoking and all(mb.synced for mb in members):
            group.revoking = False
            self.prepare(group, now_ms)

    def member_joined(self, group: Group, now_ms: int) -> None:
        """A member (re)joined with a JoinGroup waiting: the join may be complete, or a
        rebalance starts."""
        if group.state == GroupState.PREPARING_REBALANCE:
            self.maybe_complete_join(group, now_ms)
        else:
            self.prepare(group, now_ms)

    def member_gone(self, group: Group, now_ms: int) -> None:
        """Members were removed: the join may now be complete, or a new rebalance starts."""
        if group.state == GroupState.PREPARING_REBALANCE:
            self.maybe_complete_join(group, now_ms)
        elif group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare(group, now_ms)

    def fire_timers(self, group: Group, now_ms: int) -> None:
        """Expire ``group``'s pending ids and sessions due at ``now_ms``, then its delay or
        rebalance timeout."""
        for member_id, expiry in list(group.pending.items()):
            if expiry <= now_ms:
                del group.pending[member_id]
        expired = [
            mb for mb in group.members.values() if not mb.awaiting and mb.deadline_ms <= now_ms
        ]
        for member in expired:
            group.remove(member)
        if expired:
            self.member_gone(group, now_ms)
        if group.state == GroupState.PREPARING_REBALANCE:
            if group.delay_deadline_ms is not None and group.delay_deadline_ms <= now_ms:
                self._delay_expired(group, now_ms)
            elif group.delay_deadline_ms is None and group.rebalance_deadline_ms <= now_ms:
                self.complete_join(group, now_ms)
            else:
                self.maybe_complete_join(group, now_ms)

    def _delay_expired(self, group: Group, now_ms: int) -> None:
        delay_ms = self.initial_delay_ms
        if group.new_member_added and group.delay_remaining_ms > 0:
            group.new_member_added = False
            group.delay_deadline_ms = now_ms + min(delay_ms, group.delay_remaining_ms)
            group.delay_remaining_ms = max(group.delay_remaining_ms - delay_ms, 0)
            return
        group.delay_deadline_ms = None
        if group.pending or any(mb.join_waiter is None for mb in group.members.values()):
            self.maybe_complete_join(group, now_ms)  # the rebalance timeout still runs
        else:
            self.complete_join(group, now_ms)
