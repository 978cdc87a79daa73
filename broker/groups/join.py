"""JoinGroup's admission: which member a join is (new, pending, known, a static instance
returning) and what it does to the group; the coordinator has checked the request and found
the group (:meth:`GroupCoordinator.join <odradek.broker.groups.coordinator.GroupCoordinator.join>`).

Kafka's rules, on one group, on the event-loop thread, without I/O:

1. A static member (``group_instance_id``) is admitted at once. A known instance id with the
   old member id rejoins; with no member id it is a restarted member: it takes the old
   member's place under a new id (the old id is fenced, ``FENCED_INSTANCE_ID``), without a
   rebalance if the group is Stable and nothing the assignment depends on changed (the group
   record is stored again: it must name the new id). Another member id is fenced.
2. JoinGroup v0-v3 (``require_known_member_id`` False) with no member id: admitted at once
   under a generated id.
3. Otherwise a first join gets ``MEMBER_ID_REQUIRED`` and a generated id, pending until it
   joins again with it (KIP-394); a pending id joining is admitted.
4. A known member rejoining with the same protocols and metadata in CompletingRebalance or
   Stable keeps the current generation (but a client-side leader in Stable always rebalances);
   anything else starts or joins a rebalance (:mod:`odradek.broker.groups.rebalance`), and an
   older join of the same member still waiting is answered ``REBALANCE_IN_PROGRESS``.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.broker.groups.group import Group, GroupState, fence, join_error
from odradek.broker.groups.member import Member, Pending
from odradek.broker.groups.rebalance import Rebalancer
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

__all__ = ["Admission"]

E = ErrorCode


class Admission:
    """Admits JoinGroups into their group (module docstring)."""

    def __init__(
        self,
        new_member_id: Callable[[str], str],
        rebalance: Rebalancer,
        store: Callable[[Group], None],
    ) -> None:
        self._new_member_id = new_member_id  # client id -> a member id never used before
        self.rebalance = rebalance
        self._store = store  # a group record to write for the group's current generation

    def admit(
        self,
        group: Group,
        req: m.JoinGroupRequest,
        assignors: tuple[str, ...],
        host: str,
        now_ms: int,
    ) -> Pending[m.JoinGroupResponse]:
        """The member ``req`` is, admitted (or refused) into ``group``; its reply, or the
        :class:`Pending` one a rebalance resolves."""
        if req.group_instance_id is not None:
            return self._join_static(group, req, assignors, host, now_ms)
        if not req.member_id and not req.require_known_member_id:  # JoinGroup v0-v3
            member = Member(self._new_member_id(req.client_id))
            return self._add_member(group, member, req, assignors, host, now_ms)
        if not req.member_id:
            member_id = self._new_member_id(req.client_id)
            group.pending[member_id] = now_ms + req.session_timeout_ms
            return Pending(join_error(req, E.MEMBER_ID_REQUIRED, member_id))
        if req.member_id in group.pending:
            del group.pending[req.member_id]
            return self._add_member(group, Member(req.member_id), req, assignors, host, now_ms)
        member = group.members.get(req.member_id)
        if member is None:
            return Pending(join_error(req, E.UNKNOWN_MEMBER_ID, req.member_id))
        return self._rejoin(group, member, req, assignors, host, now_ms)

    def _join_static(
        self,
        group: Group,
        req: m.JoinGroupRequest,
        assignors: tuple[str, ...],
        host: str,
        now_ms: int,
    ) -> Pending[m.JoinGroupResponse]:
        old = next(
            (mb for mb in group.members.values() if mb.group_instance_id == req.group_instance_id),
            None,
        )
        if old is None:
            if req.member_id:
                return Pending(join_error(req, E.UNKNOWN_MEMBER_ID, req.member_id))
            member = Member(self._new_member_id(req.client_id))
            return self._add_member(group, member, req, assignors, host, now_ms)
        if req.member_id and req.member_id != old.member_id:
            return Pending(join_error(req, E.FENCED_INSTANCE_ID, req.member_id))
        if req.member_id:  # the same member joining again
            return self._rejoin(group, old, req, assignors, host, now_ms)
        # A restarted static member: it takes the old member's place under a new id.
        new_id = self._new_member_id(req.client_id)
        previous_leader = group.leader
        fence(old, E.FENCED_INSTANCE_ID)
        del group.members[old.member_id]
        old.member_id = new_id
        group.members[new_id] = old
        if group.leader not in group.members:
            group.leader = new_id
        if group.state == GroupState.STABLE and old.matches(req, assignors):
            old.update(req, assignors, host)
            if old.client_assigned:
                old.choose(group.protocol or "")
            old.deadline_ms = now_ms + old.session_timeout_ms
            # The record now names the new id (a replay must know it); no rebalance.
            self._store(group)
            if old.client_assigned:
                # Kafka: announce the old leader id, so that the restarted member does not
                # compute an assignment that a Stable group would never hand out.
                return Pending(group.join_response(old, req, leader=previous_leader or ""))
            return Pending(group.join_response(old, req))
        return self._rejoin(group, old, req, assignors, host, now_ms, force=True)

    def _add_member(
        self,
        group: Group,
        member: Member,
        req: m.JoinGroupRequest,
        assignors: tuple[str, ...],
        host: str,
        now_ms: int,
    ) -> Pending[m.JoinGroupResponse]:
        member.update(req, assignors, host)
        member.join_waiter = waiter = Pending()
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member.member_id] = member
        group.new_member_added = True
        self.rebalance.member_joined(group, now_ms)
        return waiter

    def _rejoin(
        self,
        group: Group,
        member: Member,
        req: m.JoinGroupRequest,
        assignors: tuple[str, ...],
        host: str,
        now_ms: int,
        *,
        force: bool = False,
    ) -> Pending[m.JoinGroupResponse]:
        unchanged = member.matches(req, assignors) and not force
        if (
            group.state == GroupState.STABLE
            and member.client_assigned
            and member.member_id == group.leader
        ):
            unchanged = False  # Kafka: a client-side leader rejoins to assign anew
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and unchanged:
            # Nothing the assignment depends on changed: the current generation stands.
            member.deadline_ms = now_ms + member.session_timeout_ms
            return Pending(group.join_response(member, req))
        member.update(req, assignors, host)
        if member.join_waiter is not None:  # a duplicate join: the older one is superseded
            member.join_waiter.resolve(join_error(req, E.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_waiter = waiter = Pending()
        self.rebalance.member_joined(group, now_ms)
        return waiter
