"""The consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

Layouts per :mod:`odradek.protocol.kafka.schema`, transcribed from Apache Kafka's message
definitions and cut to the versions spoken here (each ``Api``'s range).
"""

from __future__ import annotations

from odradek.protocol.kafka.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Api,
    ArrayOf,
    F,
)

FIND_COORDINATOR = Api(
    10,
    "FindCoordinator",
    (0, 3),
    flexible=3,
    request=(
        F("key", STRING, "0-3"),
        F("key_type", INT8, "1+"),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0-3"),
        F("error_message", STRING, "1-3", nullable="1-3"),
        F("node_id", INT32, "0-3"),
        F("host", STRING, "0-3"),
        F("port", INT32, "0-3"),
    ),
)

JOIN_GROUP = Api(
    11,
    "JoinGroup",
    (0, 7),
    flexible=6,
    request=(
        F("group_id", STRING, "0+"),
        F("session_timeout_ms", INT32, "0+"),
        F("rebalance_timeout_ms", INT32, "1+", default=-1),
        F("member_id", STRING, "0+"),
        F("group_instance_id", STRING, "5+", nullable="5+", default=None),
        F("protocol_type", STRING, "0+"),
        F(
            "protocols",
            ArrayOf(
                F("name", STRING, "0+"),
                F("metadata", BYTES, "0+"),
            ),
            "0+",
        ),
    ),
    response=(
        F("throttle_time_ms", INT32, "2+"),
        F("error_code", INT16, "0+"),
        F("generation_id", INT32, "0+", default=-1),
        F("protocol_type", STRING, "7+", nullable="7+", default=None),
        F("protocol_name", STRING, "0+", nullable="7+"),
        F("leader", STRING, "0+"),
        F("member_id", STRING, "0+"),
        F(
            "members",
            ArrayOf(
                F("member_id", STRING, "0+"),
                F("group_instance_id", STRING, "5+", nullable="5+", default=None),
                F("metadata", BYTES, "0+"),
            ),
            "0+",
        ),
    ),
)

SYNC_GROUP = Api(
    14,
    "SyncGroup",
    (0, 5),
    flexible=4,
    request=(
        F("group_id", STRING, "0+"),
        F("generation_id", INT32, "0+"),
        F("member_id", STRING, "0+"),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F(
            "assignments",
            ArrayOf(
                F("member_id", STRING, "0+"),
                F("assignment", BYTES, "0+"),
            ),
            "0+",
        ),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0+"),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignment", BYTES, "0+"),
    ),
)

HEARTBEAT = Api(
    12,
    "Heartbeat",
    (0, 4),
    flexible=4,
    request=(
        F("group_id", STRING, "0+"),
        F("generation_id", INT32, "0+"),
        F("member_id", STRING, "0+"),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0+"),
    ),
)

LEAVE_GROUP = Api(
    13,
    "LeaveGroup",
    (0, 5),
    flexible=4,
    request=(
        F("group_id", STRING, "0+"),
        F("member_id", STRING, "0-2"),
        F(
            "members",
            ArrayOf(
                F("member_id", STRING, "3+"),
                F("group_instance_id", STRING, "3+", nullable="3+", default=None),
                F("reason", STRING, "5+", nullable="5+", default=None),
            ),
            "3+",
        ),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0+"),
        F(
            "members",
            ArrayOf(
                F("member_id", STRING, "3+"),
                F("group_instance_id", STRING, "3+", nullable="3+"),
                F("error_code", INT16, "3+"),
            ),
            "3+",
        ),
    ),
)

OFFSET_COMMIT = Api(
    8,
    "OffsetCommit",
    (2, 8),
    flexible=8,
    request=(
        F("group_id", STRING, "2+"),
        F("generation_id_or_member_epoch", INT32, "2+", default=-1),
        F("member_id", STRING, "2+"),
        F("group_instance_id", STRING, "7+", nullable="7+", default=None),
        F("retention_time_ms", INT64, "2-4", default=-1),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "2-9"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "2+"),
                        F("committed_offset", INT64, "2+"),
                        F("committed_leader_epoch", INT32, "6+", default=-1),
                        F("committed_metadata", STRING, "2+", nullable="2+"),
                    ),
                    "2+",
                ),
            ),
            "2+",
        ),
    ),
    response=(
        F("throttle_time_ms", INT32, "3+"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "2-9"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "2+"),
                        F("error_code", INT16, "2+"),
                    ),
                    "2+",
                ),
            ),
            "2+",
        ),
    ),
)

OFFSET_FETCH = Api(
    9,
    "OffsetFetch",
    (1, 7),
    flexible=6,
    request=(
        F("group_id", STRING, "1-7"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "1-7"),
                F("partition_indexes", ArrayOf(INT32), "1-7"),
            ),
            "1-7",
            nullable="2-7",
        ),
        F("require_stable", BOOL, "7+", default=False),
    ),
    response=(
        F("throttle_time_ms", INT32, "3+"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "1-7"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "1-7"),
                        F("committed_offset", INT64, "1-7"),
                        F("committed_leader_epoch", INT32, "5-7", default=-1),
                        F("metadata", STRING, "1-7", nullable="1-7"),
                        F("error_code", INT16, "1-7"),
                    ),
                    "1-7",
                ),
            ),
            "1-7",
        ),
        F("error_code", INT16, "2-7"),
    ),
)

LIST_GROUPS = Api(
    16,
    "ListGroups",
    (0, 4),
    flexible=3,
    request=(F("states_filter", ArrayOf(STRING), "4+"),),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0+"),
        F(
            "groups",
            ArrayOf(
                F("group_id", STRING, "0+"),
                F("protocol_type", STRING, "0+"),
                F("group_state", STRING, "4+"),
            ),
            "0+",
        ),
    ),
)

DESCRIBE_GROUPS = Api(
    15,
    "DescribeGroups",
    (0, 5),
    flexible=5,
    request=(
        F("groups", ArrayOf(STRING), "0+"),
        F("include_authorized_operations", BOOL, "3+"),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F(
            "groups",
            ArrayOf(
                F("error_code", INT16, "0+"),
                F("group_id", STRING, "0+"),
                F("group_state", STRING, "0+"),
                F("protocol_type", STRING, "0+"),
                F("protocol_data", STRING, "0+"),
                F(
                    "members",
                    ArrayOf(
                        F("member_id", STRING, "0+"),
                        F("group_instance_id", STRING, "4+", nullable="4+", default=None),
                        F("client_id", STRING, "0+"),
                        F("client_host", STRING, "0+"),
                        F("member_metadata", BYTES, "0+"),
                        F("member_assignment", BYTES, "0+"),
                    ),
                    "0+",
                ),
                F("authorized_operations", INT32, "3+", default=-2147483648),
            ),
            "0+",
        ),
    ),
)

DELETE_GROUPS = Api(
    42,
    "DeleteGroups",
    (0, 2),
    flexible=2,
    request=(F("groups_names", ArrayOf(STRING), "0+"),),
    response=(
        F("throttle_time_ms", INT32, "0+"),
        F(
            "results",
            ArrayOf(
                F("group_id", STRING, "0+"),
                F("error_code", INT16, "0+"),
            ),
            "0+",
        ),
    ),
)

OFFSET_DELETE = Api(
    47,
    "OffsetDelete",
    (0, 0),
    flexible=None,
    request=(
        F("group_id", STRING, "0+"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "0+"),
                F("partitions", ArrayOf(F("partition_index", INT32, "0+")), "0+"),
            ),
            "0+",
        ),
    ),
    response=(
        F("error_code", INT16, "0+"),
        F("throttle_time_ms", INT32, "0+"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "0+"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "0+"),
                        F("error_code", INT16, "0+"),
                    ),
                    "0+",
                ),
            ),
            "0+",
        ),
    ),
)
