"""The value types of the client API (immutable named tuples, cheap to create and pickle)."""

from __future__ import annotations

from typing import NamedTuple

from odradek.client.errors import KafkaError

__all__ = [
    "BrokerMetadata",
    "ClusterDescription",
    "ClusterMetadata",
    "ConfigEntry",
    "ConsumerRecord",
    "FetchedPartition",
    "LogDirDescription",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "RecordMetadata",
    "SegmentInfo",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartition",
]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int  # ms
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int  # ms: the broker's append time under LogAppendTime, else the record's
    serialized_key_size: int  # -1 for a null key
    serialized_value_size: int  # -1 for a null value


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class NewTopic(NamedTuple):
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = 1
    configs: dict[str, str] = {}


class BrokerMetadata(NamedTuple):
    node_id: int
    host: str
    port: int


class TopicMetadata(NamedTuple):
    name: str
    error_code: int
    partitions: list[int]
    is_internal: bool = False


class ClusterMetadata(NamedTuple):
    cluster_id: str | None
    brokers: list[BrokerMetadata]
    topics: dict[str, TopicMetadata]
    controller_id: int = -1

    def topic_names(self, internal: bool = False) -> set[str]:
        """The topics answered without an error (internal ones only with ``internal``)."""
        return {
            name
            for name, info in self.topics.items()
            if not info.error_code and (internal or not info.is_internal)
        }


class ClusterDescription(NamedTuple):
    """``Admin.describe_cluster``: what Kafka's ``DescribeClusterResult`` holds (a single
    node is its own controller)."""

    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerMetadata]


class FetchedPartition(NamedTuple):
    """One partition of a Fetch response. ``records`` are the raw RecordBatch bytes as the
    broker sent them (they may end in a partial batch); empty when ``error`` is set."""

    error: KafkaError | None
    high_watermark: int
    log_start_offset: int
    records: memoryview


class PartitionInfo(NamedTuple):
    partition: int
    log_start_offset: int | None = None
    high_watermark: int | None = None


class TopicDescription(NamedTuple):
    name: str
    partitions: list[PartitionInfo]
    internal: bool


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    source: int  # protocol.messages.ConfigSource
    is_default: bool
    read_only: bool
    sensitive: bool


class SegmentInfo(NamedTuple):
    """One segment of a partition (its files are ``<base_offset, 20 digits>.log`` and the
    ``.index`` / ``.timeindex`` beside it); ``largest_timestamp_ms`` is -1 while it is empty."""

    log_dir: str
    base_offset: int
    size_bytes: int
    largest_timestamp_ms: int

    @property
    def file_name(self) -> str:
        return f"{self.base_offset:020d}.log"


class LogDirDescription(NamedTuple):
    """One log dir of DescribeLogDirs: ``partitions`` maps each partition to its size."""

    error: KafkaError | None
    partitions: dict[TopicPartition, int]  # size_bytes
