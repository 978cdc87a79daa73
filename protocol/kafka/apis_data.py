"""The data-path APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets, InitProducerId.

Layouts per :mod:`odradek.protocol.kafka.schema`, transcribed from Apache Kafka's message
definitions and cut to the versions spoken here (each ``Api``'s range).
"""

from __future__ import annotations

from odradek.protocol.kafka.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Api,
    ArrayOf,
    F,
    StructOf,
)

API_VERSIONS = Api(
    18,
    "ApiVersions",
    (0, 3),
    flexible=3,
    request=(
        F("client_software_name", STRING, "3+"),
        F("client_software_version", STRING, "3+"),
    ),
    response=(
        F("error_code", INT16, "0+"),
        F(
            "api_keys",
            ArrayOf(
                F("api_key", INT16, "0+"),
                F("min_version", INT16, "0+"),
                F("max_version", INT16, "0+"),
            ),
            "0+",
        ),
        F("throttle_time_ms", INT32, "1+"),
        F(
            "supported_features",
            ArrayOf(
                F("name", STRING, "3+"),
                F("min_version", INT16, "3+"),
                F("max_version", INT16, "3+"),
            ),
            "3+",
            tag=0,
        ),
        F("finalized_features_epoch", INT64, "3+", tag=1, default=-1),
        F(
            "finalized_features",
            ArrayOf(
                F("name", STRING, "3+"),
                F("max_version_level", INT16, "3+"),
                F("min_version_level", INT16, "3+"),
            ),
            "3+",
            tag=2,
        ),
        F("zk_migration_ready", BOOL, "3+", tag=3, default=False),
    ),
)

METADATA = Api(
    3,
    "Metadata",
    (0, 9),
    flexible=9,
    request=(
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "0+"),
            ),
            "0+",
            nullable="1+",
        ),
        F("allow_auto_topic_creation", BOOL, "4+", default=True),
        F("include_cluster_authorized_operations", BOOL, "8-10"),
        F("include_topic_authorized_operations", BOOL, "8+"),
    ),
    response=(
        F("throttle_time_ms", INT32, "3+"),
        F(
            "brokers",
            ArrayOf(
                F("node_id", INT32, "0+"),
                F("host", STRING, "0+"),
                F("port", INT32, "0+"),
                F("rack", STRING, "1+", nullable="1+", default=None),
            ),
            "0+",
        ),
        F("cluster_id", STRING, "2+", nullable="2+", default=None),
        F("controller_id", INT32, "1+", default=-1),
        F(
            "topics",
            ArrayOf(
                F("error_code", INT16, "0+"),
                F("name", STRING, "0+"),
                F("is_internal", BOOL, "1+", default=False),
                F(
                    "partitions",
                    ArrayOf(
                        F("error_code", INT16, "0+"),
                        F("partition_index", INT32, "0+"),
                        F("leader_id", INT32, "0+"),
                        F("leader_epoch", INT32, "7+", default=-1),
                        F("replica_nodes", ArrayOf(INT32), "0+"),
                        F("isr_nodes", ArrayOf(INT32), "0+"),
                        F("offline_replicas", ArrayOf(INT32), "5+"),
                    ),
                    "0+",
                ),
                F("topic_authorized_operations", INT32, "8+", default=-2147483648),
            ),
            "0+",
        ),
        F("cluster_authorized_operations", INT32, "8-10", default=-2147483648),
    ),
)

PRODUCE = Api(
    0,
    "Produce",
    (0, 9),
    flexible=9,
    served=(3, 9),
    request=(
        F("transactional_id", STRING, "3+", nullable="3+", default=None),
        F("acks", INT16, "0+"),
        F("timeout_ms", INT32, "0+"),
        F(
            "topic_data",
            ArrayOf(
                F("name", STRING, "0-12"),
                F(
                    "partition_data",
                    ArrayOf(
                        F("index", INT32, "0+"),
                        F("records", RECORDS, "0+", nullable="0+"),
                    ),
                    "0+",
                ),
            ),
            "0+",
        ),
    ),
    response=(
        F(
            "responses",
            ArrayOf(
                F("name", STRING, "0-12"),
                F(
                    "partition_responses",
                    ArrayOf(
                        F("index", INT32, "0+"),
                        F("error_code", INT16, "0+"),
                        F("base_offset", INT64, "0+"),
                        F("log_append_time_ms", INT64, "2+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F(
                            "record_errors",
                            ArrayOf(
                                F("batch_index", INT32, "8+"),
                                F(
                                    "batch_index_error_message",
                                    STRING,
                                    "8+",
                                    nullable="8+",
                                    default=None,
                                ),
                            ),
                            "8+",
                        ),
                        F("error_message", STRING, "8+", nullable="8+", default=None),
                    ),
                    "0+",
                ),
            ),
            "0+",
        ),
        F("throttle_time_ms", INT32, "1+"),
    ),
)

FETCH = Api(
    1,
    "Fetch",
    (4, 12),
    flexible=12,
    request=(
        F("cluster_id", STRING, "12+", nullable="12+", tag=0, default=None),
        F("replica_id", INT32, "4-14", default=-1),
        F("max_wait_ms", INT32, "4+"),
        F("min_bytes", INT32, "4+"),
        F("max_bytes", INT32, "4+", default=2147483647),
        F("isolation_level", INT8, "4+"),
        F("session_id", INT32, "7+"),
        F("session_epoch", INT32, "7+", default=-1),
        F(
            "topics",
            ArrayOf(
                F("topic", STRING, "4-12"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition", INT32, "4+"),
                        F("current_leader_epoch", INT32, "9+", default=-1),
                        F("fetch_offset", INT64, "4+"),
                        F("last_fetched_epoch", INT32, "12+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("partition_max_bytes", INT32, "4+"),
                    ),
                    "4+",
                ),
            ),
            "4+",
        ),
        F(
            "forgotten_topics_data",
            ArrayOf(
                F("topic", STRING, "7-12"),
                F("partitions", ArrayOf(INT32), "7+"),
            ),
            "7+",
        ),
        F("rack_id", STRING, "11+", default=""),
    ),
    response=(
        F("throttle_time_ms", INT32, "4+"),
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+"),
        F(
            "responses",
            ArrayOf(
                F("topic", STRING, "4-12"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "4+"),
                        F("error_code", INT16, "4+"),
                        F("high_watermark", INT64, "4+"),
                        F("last_stable_offset", INT64, "4+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F(
                            "diverging_epoch",
                            StructOf(
                                F("epoch", INT32, "12+", default=-1),
                                F("end_offset", INT64, "12+", default=-1),
                            ),
                            "12+",
                            tag=0,
                        ),
                        F(
                            "current_leader",
                            StructOf(
                                F("leader_id", INT32, "12+", default=-1),
                                F("leader_epoch", INT32, "12+", default=-1),
                            ),
                            "12+",
                            tag=1,
                        ),
                        F(
                            "snapshot_id",
                            StructOf(
                                F("end_offset", INT64, "4+", default=-1),
                                F("epoch", INT32, "4+", default=-1),
                            ),
                            "12+",
                            tag=2,
                        ),
                        F(
                            "aborted_transactions",
                            ArrayOf(
                                F("producer_id", INT64, "4+"),
                                F("first_offset", INT64, "4+"),
                            ),
                            "4+",
                            nullable="4+",
                        ),
                        F("preferred_read_replica", INT32, "11+", default=-1),
                        F("records", RECORDS, "4+", nullable="4+"),
                    ),
                    "4+",
                ),
            ),
            "4+",
        ),
    ),
)

LIST_OFFSETS = Api(  # v7: the layout of v6, and timestamp -3 (max timestamp, KIP-734)
    2,
    "ListOffsets",
    (1, 7),
    flexible=6,
    request=(
        F("replica_id", INT32, "1+"),
        F("isolation_level", INT8, "2+"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "1+"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "1+"),
                        F("current_leader_epoch", INT32, "4+", default=-1),
                        F("timestamp", INT64, "1+"),
                    ),
                    "1+",
                ),
            ),
            "1+",
        ),
    ),
    response=(
        F("throttle_time_ms", INT32, "2+"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "1+"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "1+"),
                        F("error_code", INT16, "1+"),
                        F("timestamp", INT64, "1+", default=-1),
                        F("offset", INT64, "1+", default=-1),
                        F("leader_epoch", INT32, "4+", default=-1),
                    ),
                    "1+",
                ),
            ),
            "1+",
        ),
    ),
)

INIT_PRODUCER_ID = Api(
    22,
    "InitProducerId",
    (0, 4),
    flexible=2,
    request=(
        F("transactional_id", STRING, "0+", nullable="0+"),
        F("transaction_timeout_ms", INT32, "0+"),
        F("producer_id", INT64, "3+", default=-1),
        F("producer_epoch", INT16, "3+", default=-1),
    ),
    response=(
        F("throttle_time_ms", INT32, "0+"),
        F("error_code", INT16, "0+"),
        F("producer_id", INT64, "0+", default=-1),
        F("producer_epoch", INT16, "0+"),
    ),
)
