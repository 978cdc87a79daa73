"""Kafka's consumer-group APIs onto the shared coordinator (:class:`GroupApi`):
FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

Kafka clients assign partitions themselves (the classic protocol's client-side assignment):
JoinGroup carries each member's protocols with their metadata bytes and the leader's
SyncGroup the assignment bytes; the coordinator passes them through and stores them in
``__consumer_offsets`` as Kafka does. Commits land in the same records whichever protocol made
them. Settled here:

- **FindCoordinator**: this node for a group (key type 0); a transaction coordinator (key type
  1) answers ``INVALID_REQUEST`` with the reason: odradek has no transactions.
- **JoinGroup** before v4 never retries with ``MEMBER_ID_REQUIRED``, so such members are
  admitted at once; v0 has no rebalance timeout (the session timeout stands in, as in Kafka).
- **LeaveGroup** before v3 names one member; its result is the top-level error.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import BrokerContext
from odradek.broker.groups.api import GroupApi
from odradek.broker.kafka.admin import plain
from odradek.broker.kafka.data import NO_TRANSACTIONS
from odradek.broker.listeners import Listener
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka import RequestHeader

__all__ = ["GroupApis"]

_KEY_TYPE_GROUP = 0
_AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class GroupApis:
    def __init__(self, groups: GroupApi, ctx: BrokerContext, peer: str, listener: Listener) -> None:
        self.groups = groups
        self.ctx = ctx
        self.peer = peer
        self.listener = listener  # the connection's, as its clients are told to reach it

    async def find_coordinator(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        fields: dict[str, Any] = {"throttle_time_ms": 0, "error_message": None}
        if req.get("key_type", _KEY_TYPE_GROUP) != _KEY_TYPE_GROUP:
            self.ctx.log.info("transactions are not supported", api="FindCoordinator")
            code = ErrorCode.INVALID_REQUEST
            fields["error_message"] = NO_TRANSACTIONS
        else:
            code = self.groups.coordinator_error(req["key"])
        listener = self.listener
        if code:
            return fields | {"error_code": code, "node_id": -1, "host": "", "port": -1}
        return fields | {
            "error_code": 0,
            "node_id": self.ctx.node_id,
            "host": listener.host,
            "port": listener.port,
        }

    # -- membership ------------------------------------------------------------------------

    async def join_group(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        rebalance_timeout_ms = req.get("rebalance_timeout_ms", -1)
        if rebalance_timeout_ms < 0:  # v0
            rebalance_timeout_ms = req["session_timeout_ms"]
        native = await self.groups.membership.join_group(
            m.JoinGroupRequest(
                correlation_id=header.correlation_id,
                group_id=req["group_id"],
                session_timeout_ms=req["session_timeout_ms"],
                rebalance_timeout_ms=rebalance_timeout_ms,
                member_id=req["member_id"],
                group_instance_id=req.get("group_instance_id"),
                client_id=header.client_id or "",
                protocol_type=req["protocol_type"],
                protocols=[
                    m.JoinGroupProtocol(name=p["name"], metadata=bytes(p["metadata"]))
                    for p in req["protocols"]
                ],
                require_known_member_id=header.api_version >= 4,
            ),
            self.peer,
        )
        return {
            "throttle_time_ms": 0,
            "error_code": native.error_code,
            "generation_id": native.generation_id,
            "protocol_type": native.protocol_type,
            # before v7 the name is not nullable: "" when there is none
            "protocol_name": native.protocol_name
            if native.protocol_name is not None or header.api_version >= 7
            else "",
            "leader": native.leader,
            "member_id": native.member_id,
            "members": [
                {
                    "member_id": mb.member_id,
                    "group_instance_id": mb.group_instance_id,
                    "metadata": mb.metadata,
                }
                for mb in native.members
            ],
        }

    async def sync_group(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.groups.membership.sync_group(
            m.SyncGroupRequest(
                correlation_id=header.correlation_id,
                group_id=req["group_id"],
                generation_id=req["generation_id"],
                member_id=req["member_id"],
                group_instance_id=req.get("group_instance_id"),
                protocol_type=req.get("protocol_type"),
                protocol_name=req.get("protocol_name"),
                assignments=[
                    m.SyncGroupAssignment(
                        member_id=a["member_id"], assignment=bytes(a["assignment"])
                    )
                    for a in req["assignments"]
                ],
            )
        )
        return {
            "throttle_time_ms": 0,
            "error_code": native.error_code,
            "protocol_type": native.protocol_type,
            "protocol_name": native.protocol_name,
            "assignment": native.assignment_bytes,
        }

    async def heartbeat(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.groups.membership.heartbeat(
            m.HeartbeatRequest(
                correlation_id=header.correlation_id,
                group_id=req["group_id"],
                generation_id=req["generation_id"],
                member_id=req["member_id"],
                group_instance_id=req.get("group_instance_id"),
            )
        )
        return {"throttle_time_ms": 0, "error_code": native.error_code}

    async def leave_group(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        if header.api_version < 3:
            members = [m.MemberIdentity(member_id=req["member_id"])]
        else:
            members = [
                m.MemberIdentity(
                    member_id=mb["member_id"], group_instance_id=mb["group_instance_id"]
                )
                for mb in req["members"]
            ]
        native = await self.groups.membership.leave_group(
            m.LeaveGroupRequest(
                correlation_id=header.correlation_id, group_id=req["group_id"], members=members
            )
        )
        code = native.error_code
        if header.api_version < 3 and not code and native.members:
            code = native.members[0].error_code
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "members": [
                {
                    "member_id": mb.member_id,
                    "group_instance_id": mb.group_instance_id,
                    "error_code": mb.error_code,
                }
                for mb in native.members
            ],
        }

    # -- offsets ---------------------------------------------------------------------------

    async def offset_commit(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.groups.offsets.offset_commit(
            m.OffsetCommitRequest(
                correlation_id=header.correlation_id,
                group_id=req["group_id"],
                generation_id=req["generation_id_or_member_epoch"],
                member_id=req["member_id"],
                group_instance_id=req.get("group_instance_id"),
                topics=[
                    m.OffsetCommitTopic(
                        name=t["name"],
                        partitions=[
                            m.OffsetCommitPartition(
                                partition_index=p["partition_index"],
                                committed_offset=p["committed_offset"],
                                committed_leader_epoch=p.get("committed_leader_epoch", -1),
                                committed_metadata=p["committed_metadata"],
                            )
                            for p in t["partitions"]
                        ],
                    )
                    for t in req["topics"]
                ],
            )
        )
        return {"throttle_time_ms": 0, "topics": plain(native)["topics"]}

    async def offset_fetch(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        topics = req["topics"]
        native = await self.groups.offsets.offset_fetch(
            m.OffsetFetchRequest(
                correlation_id=header.correlation_id,
                group_id=req["group_id"],
                topics=None
                if topics is None
                else [
                    m.OffsetFetchTopic(name=t["name"], partition_indexes=t["partition_indexes"])
                    for t in topics
                ],
            )
        )
        fields = plain(native)
        return {
            "throttle_time_ms": 0,
            "topics": fields["topics"],
            "error_code": fields["error_code"],
        }

    # -- administration --------------------------------------------------------------------

    async def list_groups(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.groups.admin.list_groups(
            m.ListGroupsRequest(
                correlation_id=header.correlation_id, states_filter=req.get("states_filter", [])
            )
        )
        fields = plain(native)
        return {
            "throttle_time_ms": 0,
            "error_code": fields["error_code"],
            "groups": fields["groups"],
        }

    async def describe_groups(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.groups.admin.describe_groups(
            m.DescribeGroupsRequest(correlation_id=header.correlation_id, groups=req["groups"])
        )
        groups = []
        for group in native.groups:
            fields = plain(group)
            fields["authorized_operations"] = _AUTHORIZED_OPERATIONS_OMITTED
            fields["members"] = [
                {
                    "member_id": mb.member_id,
                    "group_instance_id": mb.group_instance_id,
                    "client_id": mb.client_id,
                    "client_host": mb.client_host,
                    "member_metadata": mb.metadata,
                    "member_assignment": mb.assignment_bytes,
                }
                for mb in group.members
            ]
            groups.append(fields)
        return {"throttle_time_ms": 0, "groups": groups}

    async def delete_groups(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.groups.admin.delete_groups(
            m.DeleteGroupsRequest(
                correlation_id=header.correlation_id, groups_names=req["groups_names"]
            )
        )
        return {"throttle_time_ms": 0, "results": plain(native)["results"]}

    async def offset_delete(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.groups.offsets.offset_delete(
            m.OffsetDeleteRequest(
                correlation_id=header.correlation_id,
                group_id=req["group_id"],
                topics=[
                    m.OffsetFetchTopic(
                        name=t["name"],
                        partition_indexes=[p["partition_index"] for p in t["partitions"]],
                    )
                    for t in req["topics"]
                ],
            )
        )
        fields = plain(native)
        return {
            "error_code": fields["error_code"],
            "throttle_time_ms": 0,
            "topics": fields["topics"],
        }
