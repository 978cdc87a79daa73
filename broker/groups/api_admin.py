"""ListGroups, DescribeGroups and DeleteGroups: the groups seen and removed from outside.

Listing and describing read the coordinator's groups; each group is shown only to a caller
that may DESCRIBE it (ListGroups: or the cluster). DeleteGroups needs DELETE on the group and
an Empty group: it writes the tombstones of the group's offsets and group record
through :meth:`GroupApi.delete_group <odradek.broker.groups.api.GroupApi.delete_group>`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.groups.replies import error_reply
from odradek.broker.security.authorizer import allowed
from odradek.protocol import messages as m
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.groups.api import GroupApi

__all__ = ["GroupAdminApi"]

E = ErrorCode
GROUP = ResourceType.GROUP


class GroupAdminApi:
    def __init__(self, groups: GroupApi) -> None:
        self.groups = groups

    async def list_groups(self, req: m.ListGroupsRequest) -> m.ListGroupsResponse:
        if self.groups.loading:
            return error_reply(m.ListGroupsResponse, req, E.COORDINATOR_LOAD_IN_PROGRESS)
        states = {s.lower() for s in req.states_filter}
        everything = allowed(Operation.DESCRIBE, ResourceType.CLUSTER)  # Kafka: else, each group
        groups = [
            m.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
            )
            for g in sorted(self.groups.coordinator.groups.values(), key=lambda g: g.group_id)
            if (not states or g.state.value.lower() in states)
            and (everything or allowed(Operation.DESCRIBE, GROUP, g.group_id))
        ]
        return m.ListGroupsResponse(correlation_id=req.correlation_id, groups=groups)

    async def describe_groups(self, req: m.DescribeGroupsRequest) -> m.DescribeGroupsResponse:
        if self.groups.loading:
            return error_reply(m.DescribeGroupsResponse, req, E.COORDINATOR_LOAD_IN_PROGRESS)
        described = []
        for group_id in req.groups:
            group = self.groups.coordinator.groups.get(group_id)
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
            code = E.COORDINATOR_LOAD_IN_PROGRESS if self.groups.loading else E.NONE
            if not allowed(Operation.DELETE, GROUP, group_id):
                code = E.GROUP_AUTHORIZATION_FAILED
            if not code:
                code = self.groups.coordinator.delete(group_id)
            if not code:
                code = await self.groups.delete_group(group_id)
            results.append(m.DeletableGroupResult(group_id=group_id, error_code=code))
        return m.DeleteGroupsResponse(correlation_id=req.correlation_id, results=results)
