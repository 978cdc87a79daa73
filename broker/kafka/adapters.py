"""The routing table of the Kafka listener: api key -> adapter, and what is advertised.

ApiVersions advertises exactly the APIs routed here, each with the range the codec speaks
(:func:`odradek.protocol.kafka.api_version_ranges`); without a group coordinator the group
APIs are neither routed nor advertised.

Advertised ranges may stop below what the codec speaks (``_ADVERTISED_MAX``) where a client
is known to send a version wrongly: librdkafka (at least to 2.16) writes an all-topics
Metadata v9+ request with a 4-byte zero for the compact (1-byte) null array (librdkafka#5049),
which leaves trailing bytes (Kafka's broker ignores them; this codec refuses them). Capped at
v8, librdkafka sends the classic ``-1`` instead (a client that sends v9 anyway is served).

``waits`` marks the requests answered by a task of their own because they may wait (a long
poll, a rebalance, an fsync, a topic creation): the connection's reader goes on meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odradek.broker.kafka.acls import AclApis
from odradek.broker.kafka.admin import AdminApis
from odradek.broker.kafka.data import KafkaReply, RecordApis
from odradek.broker.kafka.groups import GroupApis
from odradek.broker.kafka.security import SecurityApis
from odradek.protocol import kafka

if TYPE_CHECKING:
    from odradek.broker.connection import Connection

__all__ = ["KafkaReply", "Route", "Routes", "build_routes"]

# api key -> the highest version advertised, below the codec's (module docstring)
_ADVERTISED_MAX = {3: 8}  # Metadata: librdkafka's flexible all-topics request is malformed

Handler = Callable[[kafka.RequestHeader, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Route:
    handler: Handler
    waits: bool = False


@dataclass(frozen=True)
class Routes:
    by_key: dict[int, Route]
    advertised: list[tuple[int, int, int]]  # (api_key, min_version, max_version)


def build_routes(conn: Connection) -> Routes:
    ctx, apis = conn.ctx, conn.apis
    records = RecordApis(apis.data, conn.log, ctx.manager.allocate_producer_id)
    by_name: dict[str, Route] = {
        "Produce": Route(records.produce),
        "Fetch": Route(records.fetch, waits=True),
        "ListOffsets": Route(records.list_offsets),
        "DeleteRecords": Route(records.delete_records, waits=True),
        "InitProducerId": Route(records.init_producer_id),
    }
    admin = AdminApis(apis.admin, ctx, [], conn.listener)
    by_name |= {
        "ApiVersions": Route(admin.api_versions),
        "Metadata": Route(admin.metadata, waits=True),  # may auto-create topics
        "CreateTopics": Route(admin.create_topics, waits=True),
        "DeleteTopics": Route(admin.delete_topics, waits=True),
        "CreatePartitions": Route(admin.create_partitions, waits=True),
        "DescribeConfigs": Route(admin.describe_configs),
        "AlterConfigs": Route(admin.alter_configs, waits=True),
        "IncrementalAlterConfigs": Route(admin.incremental_alter_configs, waits=True),
        "DescribeLogDirs": Route(admin.describe_log_dirs, waits=True),
    }
    security = SecurityApis(conn)
    by_name |= {
        "SaslHandshake": Route(security.sasl_handshake),
        "SaslAuthenticate": Route(security.sasl_authenticate, waits=True),  # a failure waits
        "DescribeUserScramCredentials": Route(security.describe_user_scram_credentials),
        "AlterUserScramCredentials": Route(security.alter_user_scram_credentials, waits=True),
    }
    acls = AclApis(conn)
    by_name |= {
        "DescribeAcls": Route(acls.describe_acls),
        "CreateAcls": Route(acls.create_acls, waits=True),
        "DeleteAcls": Route(acls.delete_acls, waits=True),
    }
    if apis.groups is not None:
        groups = GroupApis(apis.groups, ctx, conn.peer, conn.listener)
        by_name |= {
            "FindCoordinator": Route(groups.find_coordinator),
            "JoinGroup": Route(groups.join_group, waits=True),
            "SyncGroup": Route(groups.sync_group, waits=True),
            "Heartbeat": Route(groups.heartbeat),
            "LeaveGroup": Route(groups.leave_group),
            "OffsetCommit": Route(groups.offset_commit, waits=True),
            "OffsetFetch": Route(groups.offset_fetch),
            "ListGroups": Route(groups.list_groups),
            "DescribeGroups": Route(groups.describe_groups),
            "DeleteGroups": Route(groups.delete_groups, waits=True),
            "OffsetDelete": Route(groups.offset_delete, waits=True),
        }
    by_key = {key: by_name[api.name] for key, api in kafka.APIS.items() if api.name in by_name}
    unknown = by_name.keys() - {api.name for api in kafka.APIS.values()}
    if unknown:
        raise RuntimeError(f"routes for APIs the codec does not know: {sorted(unknown)}")
    advertised = [
        (key, lo, min(hi, _ADVERTISED_MAX.get(key, hi)))
        for key, lo, hi in kafka.api_version_ranges()
        if key in by_key
    ]
    admin.advertised[:] = advertised
    return Routes(by_key, advertised)
