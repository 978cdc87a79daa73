"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: a member's requests onto the coordinator.

The coordinator answers at once or hands back a :class:`Pending` reply (a rebalance must form
first); this module waits for it on the event loop. A waiting JoinGroup or SyncGroup answers
``COORDINATOR_NOT_AVAILABLE`` when a graceful shutdown begins. Until the replay of
``__consumer_offsets`` is done every request answers ``COORDINATOR_LOAD_IN_PROGRESS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import anyio

from odradek.broker.groups.member import Pending
from odradek.broker.groups.replies import error_reply, read_denied
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.groups.api import GroupApi

__all__ = ["MembershipApi"]

E = ErrorCode
R = TypeVar("R", bound=m.Response)


class MembershipApi:
    def __init__(self, groups: GroupApi) -> None:
        self.groups = groups

    async def _wait(self, cls: type[R], req: m.Request, pending: Pending[R]) -> R:
        """The pending reply to ``req``, or ``COORDINATOR_NOT_AVAILABLE`` if a graceful
        shutdown began first."""
        ctx = self.groups.ctx
        done = anyio.Event()
        pending.add_callback(done.set)
        while not done.is_set():
            if ctx.stopping:
                return error_reply(cls, req, E.COORDINATOR_NOT_AVAILABLE)
            woke = ctx.data_event()  # set by begin_shutdown (and by notify_all)
            async with anyio.create_task_group() as tg:

                async def watch(event: anyio.Event = woke) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                await done.wait()
                tg.cancel_scope.cancel()
        reply = pending.result
        assert reply is not None
        reply.correlation_id = req.correlation_id
        return reply

    def _refused(self, group_id: str) -> ErrorCode:
        """Why a member's request is answered at once with an error (the caller may not READ
        the group, or the replay is still running), else NONE."""
        if code := read_denied(group_id):
            return code
        return E.COORDINATOR_LOAD_IN_PROGRESS if self.groups.loading else E.NONE

    async def join_group(self, req: m.JoinGroupRequest, peer: str = "") -> m.JoinGroupResponse:
        groups = self.groups
        if code := read_denied(req.group_id) or groups.availability(req.group_id):
            return error_reply(m.JoinGroupResponse, req, code)
        host = "/" + peer.rsplit(":", 1)[0] if peer else ""
        pending = groups.coordinator.join(req, host, groups.now_ms())
        return await self._wait(m.JoinGroupResponse, req, pending)

    async def sync_group(self, req: m.SyncGroupRequest) -> m.SyncGroupResponse:
        groups = self.groups
        if code := self._refused(req.group_id):
            return error_reply(m.SyncGroupResponse, req, code)
        pending = groups.coordinator.sync(req, groups.now_ms())
        return await self._wait(m.SyncGroupResponse, req, pending)

    async def heartbeat(self, req: m.HeartbeatRequest) -> m.HeartbeatResponse:
        groups = self.groups
        if code := self._refused(req.group_id):
            return error_reply(m.HeartbeatResponse, req, code)
        code = groups.coordinator.heartbeat(req, groups.now_ms())
        return error_reply(m.HeartbeatResponse, req, code)

    async def leave_group(self, req: m.LeaveGroupRequest) -> m.LeaveGroupResponse:
        groups = self.groups
        if code := self._refused(req.group_id):
            return error_reply(m.LeaveGroupResponse, req, code)
        code, members = groups.coordinator.leave(req.group_id, req.members, groups.now_ms())
        reply = error_reply(m.LeaveGroupResponse, req, code)
        reply.members = members
        return reply
