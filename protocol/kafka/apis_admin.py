"""The admin APIs: CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, CreatePartitions, DeleteRecords, DescribeLogDirs.

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
    STRING,
    UUID,
    Api,
    ArrayOf,
    F,
)

CREATE_TOPICS = Api(
    19,
    "CreateTopics",
    (2, 7),
    flexible=5,
    request=(
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "2+"),
                F("num_partitions", INT32, "2+"),
                F("replication_factor", INT16, "2+"),
                F(
                    "assignments",
                    ArrayOf(
                        F("partition_index", INT32, "2+"),
                        F("broker_ids", ArrayOf(INT32), "2+"),
                    ),
                    "2+",
                ),
                F(
                    "configs",
                    ArrayOf(
                        F("name", STRING, "2+"),
                        F("value", STRING, "2+", nullable="2+"),
                    ),
                    "2+",
                ),
            ),
            "2+",
        ),
        F("timeout_ms", INT32, "2+", default=60000),
        F("validate_only", BOOL, "2+", default=False),
    ),
    response=(
        F("throttle_time_ms", INT32, "2+"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "2+"),
                F("topic_id", UUID, "7+"),
                F("error_code", INT16, "2+"),
                F("error_message", STRING, "2+", nullable="2+"),
                F("topic_config_error_code", INT16, "5+", tag=0),
                F("num_partitions", INT32, "5+", default=-1),
                F("replication_factor", INT16, "5+", default=-1),
                F(
                    "configs",
                    ArrayOf(
                        F("name", STRING, "5+"),
                        F("value", STRING, "5+", nullable="5+"),
                        F("read_only", BOOL, "5+"),
                        F("config_source", INT8, "5+", default=-1),
                        F("is_sensitive", BOOL, "5+"),
                    ),
                    "5+",
                    nullable="5+",
                ),
            ),
            "2+",
        ),
    ),
)

DELETE_TOPICS = Api(
    20,
    "DeleteTopics",
    (1, 5),
    flexible=4,
    request=(
        F("topic_names", ArrayOf(STRING), "1-5"),
        F("timeout_ms", INT32, "1+"),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F(
            "responses",
            ArrayOf(
                F("name", STRING, "1+"),
                F("error_code", INT16, "1+"),
                F("error_message", STRING, "5+", nullable="5+", default=None),
            ),
            "1+",
        ),
    ),
)

DESCRIBE_CONFIGS = Api(
    32,
    "DescribeConfigs",
    (1, 4),
    flexible=4,
    request=(
        F(
            "resources",
            ArrayOf(
                F("resource_type", INT8, "1+"),
                F("resource_name", STRING, "1+"),
                F("configuration_keys", ArrayOf(STRING), "1+", nullable="1+"),
            ),
            "1+",
        ),
        F("include_synonyms", BOOL, "1+", default=False),
        F("include_documentation", BOOL, "3+", default=False),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F(
            "results",
            ArrayOf(
                F("error_code", INT16, "1+"),
                F("error_message", STRING, "1+", nullable="1+"),
                F("resource_type", INT8, "1+"),
                F("resource_name", STRING, "1+"),
                F(
                    "configs",
                    ArrayOf(
                        F("name", STRING, "1+"),
                        F("value", STRING, "1+", nullable="1+"),
                        F("read_only", BOOL, "1+"),
                        F("config_source", INT8, "1+", default=-1),
                        F("is_sensitive", BOOL, "1+"),
                        F(
                            "synonyms",
                            ArrayOf(
                                F("name", STRING, "1+"),
                                F("value", STRING, "1+", nullable="1+"),
                                F("source", INT8, "1+"),
                            ),
                            "1+",
                        ),
                        F("config_type", INT8, "3+"),
                        F("documentation", STRING, "3+", nullable="1+"),
                    ),
                    "1+",
                ),
            ),
            "1+",
        ),
    ),
)

ALTER_CONFIGS = Api(
    33,
    "AlterConfigs",
    (0, 2),
    flexible=2,
    request=(
        F(
            "resources",
            ArrayOf(
                F("resource_type", INT8, "0+"),
                F("resource_name", STRING, "0+"),
                F(
                    "configs",
                    ArrayOf(
                        F("name", STRING, "0+"),
                        F("value", STRING, "0+", nullable="0+"),
                    ),
                    "0+",
                ),
            ),
            "0+",
        ),
        F("validate_only", BOOL, "0+"),
    ),
    response=(
        F("throttle_time_ms", INT32, "0+"),
        F(
            "responses",
            ArrayOf(
                F("error_code", INT16, "0+"),
                F("error_message", STRING, "0+", nullable="0+"),
                F("resource_type", INT8, "0+"),
                F("resource_name", STRING, "0+"),
            ),
            "0+",
        ),
    ),
)

INCREMENTAL_ALTER_CONFIGS = Api(
    44,
    "IncrementalAlterConfigs",
    (0, 1),
    flexible=1,
    request=(
        F(
            "resources",
            ArrayOf(
                F("resource_type", INT8, "0+"),
                F("resource_name", STRING, "0+"),
                F(
                    "configs",
                    ArrayOf(
                        F("name", STRING, "0+"),
                        F("config_operation", INT8, "0+"),
                        F("value", STRING, "0+", nullable="0+"),
                    ),
                    "0+",
                ),
            ),
            "0+",
        ),
        F("validate_only", BOOL, "0+"),
    ),
    response=(
        F("throttle_time_ms", INT32, "0+"),
        F(
            "responses",
            ArrayOf(
                F("error_code", INT16, "0+"),
                F("error_message", STRING, "0+", nullable="0+"),
                F("resource_type", INT8, "0+"),
                F("resource_name", STRING, "0+"),
            ),
            "0+",
        ),
    ),
)

CREATE_PARTITIONS = Api(
    37,
    "CreatePartitions",
    (0, 3),
    flexible=2,
    request=(
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "0+"),
                F("count", INT32, "0+"),
                F(
                    "assignments",
                    ArrayOf(
                        F("broker_ids", ArrayOf(INT32), "0+"),
                    ),
                    "0+",
                    nullable="0+",
                ),
            ),
            "0+",
        ),
        F("timeout_ms", INT32, "0+"),
        F("validate_only", BOOL, "0+"),
    ),
    response=(
        F("throttle_time_ms", INT32, "0+"),
        F(
            "results",
            ArrayOf(
                F("name", STRING, "0+"),
                F("error_code", INT16, "0+"),
                F("error_message", STRING, "0+", nullable="0+", default=None),
            ),
            "0+",
        ),
    ),
)

DELETE_RECORDS = Api(
    21,
    "DeleteRecords",
    (0, 2),
    flexible=2,
    request=(
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "0+"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "0+"),
                        F("offset", INT64, "0+"),
                    ),
                    "0+",
                ),
            ),
            "0+",
        ),
        F("timeout_ms", INT32, "0+"),
    ),
    response=(
        F("throttle_time_ms", INT32, "0+"),
        F(
            "topics",
            ArrayOf(
                F("name", STRING, "0+"),
                F(
                    "partitions",
                    ArrayOf(
                        F("partition_index", INT32, "0+"),
                        F("low_watermark", INT64, "0+"),
                        F("error_code", INT16, "0+"),
                    ),
                    "0+",
                ),
            ),
            "0+",
        ),
    ),
)

DESCRIBE_LOG_DIRS = Api(
    35,
    "DescribeLogDirs",
    (1, 4),
    flexible=2,
    request=(
        F(
            "topics",
            ArrayOf(
                F("topic", STRING, "1+"),
                F("partitions", ArrayOf(INT32), "1+"),
            ),
            "1+",
            nullable="1+",
        ),
    ),
    response=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "3+"),
        F(
            "results",
            ArrayOf(
                F("error_code", INT16, "1+"),
                F("log_dir", STRING, "1+"),
                F(
                    "topics",
                    ArrayOf(
                        F("name", STRING, "1+"),
                        F(
                            "partitions",
                            ArrayOf(
                                F("partition_index", INT32, "1+"),
                                F("partition_size", INT64, "1+"),
                                F("offset_lag", INT64, "1+"),
                                F("is_future_key", BOOL, "1+"),
                            ),
                            "1+",
                        ),
                    ),
                    "1+",
                ),
                F("total_bytes", INT64, "4+", default=-1),
                F("usable_bytes", INT64, "4+", default=-1),
            ),
            "1+",
        ),
    ),
)
