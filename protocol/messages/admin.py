"""Messages of the metadata and admin APIs: ApiVersions, Metadata, CreateTopics,
DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs (incremental), DescribeLogDirs."""

from __future__ import annotations

from odradek.protocol.messages.base import (
    AlterConfigOp,
    ConfigSource,
    Int8,
    Int16,
    Int32,
    Int64,
    Port,
    Request,
    Response,
    Str,
    _Item,
)


# ---- ApiVersions -------------------------------------------------------------------------
class ApiVersionsRequest(Request, tag=18, kw_only=True):
    client_software_name: Str = ""
    client_software_version: Str = ""


class ApiVersionRange(_Item, kw_only=True):
    api_key: Int16
    min_version: Int16
    max_version: Int16


class ApiVersionsResponse(Response, tag=18, kw_only=True):
    api_keys: list[ApiVersionRange] = []


# ---- Metadata ----------------------------------------------------------------------------
class MetadataRequest(Request, tag=3, kw_only=True):
    topics: list[Str] | None = None  # None: every topic
    allow_auto_topic_creation: bool = True


class MetadataBroker(_Item, kw_only=True):
    node_id: Int32
    host: Str
    port: Port
    rack: Str | None = None


class MetadataPartition(_Item, kw_only=True):
    error_code: Int16 = 0
    partition_index: Int32
    leader_id: Int32 = -1
    leader_epoch: Int32 = -1
    replica_nodes: list[Int32] = []
    isr_nodes: list[Int32] = []


class MetadataTopic(_Item, kw_only=True):
    error_code: Int16 = 0
    name: Str
    topic_id: Str = ""  # base64 UUID, as in partition.metadata
    is_internal: bool = False
    partitions: list[MetadataPartition] = []


class MetadataResponse(Response, tag=3, kw_only=True):
    brokers: list[MetadataBroker] = []
    cluster_id: Str | None = None
    controller_id: Int32 = -1
    topics: list[MetadataTopic] = []


# ---- CreateTopics / DeleteTopics / CreatePartitions ----------------------------------------
class CreatableTopic(_Item, kw_only=True):
    name: Str
    num_partitions: Int32 = -1  # -1: the broker's num.partitions
    replication_factor: Int16 = -1  # -1 or 1 on a single node
    configs: dict[Str, Str] = {}


class CreateTopicsRequest(Request, tag=19, kw_only=True):
    topics: list[CreatableTopic] = []
    timeout_ms: Int32 = 30_000
    validate_only: bool = False


class CreatableTopicResult(_Item, kw_only=True):
    name: Str
    topic_id: Str = ""
    error_code: Int16 = 0
    error_message: Str | None = None
    num_partitions: Int32 = -1
    replication_factor: Int16 = -1


class CreateTopicsResponse(Response, tag=19, kw_only=True):
    topics: list[CreatableTopicResult] = []


class DeleteTopicsRequest(Request, tag=20, kw_only=True):
    topic_names: list[Str] = []
    timeout_ms: Int32 = 30_000


class DeletableTopicResult(_Item, kw_only=True):
    name: Str
    error_code: Int16 = 0
    error_message: Str | None = None


class DeleteTopicsResponse(Response, tag=20, kw_only=True):
    topics: list[DeletableTopicResult] = []


class CreatePartitionsTopic(_Item, kw_only=True):
    name: Str
    count: Int32  # the new total number of partitions


class CreatePartitionsRequest(Request, tag=37, kw_only=True):
    topics: list[CreatePartitionsTopic] = []
    timeout_ms: Int32 = 30_000
    validate_only: bool = False


class CreatePartitionsTopicResult(_Item, kw_only=True):
    name: Str
    error_code: Int16 = 0
    error_message: Str | None = None


class CreatePartitionsResponse(Response, tag=37, kw_only=True):
    results: list[CreatePartitionsTopicResult] = []


# ---- DescribeConfigs / AlterConfigs ------------------------------------------------------
class DescribeConfigsResource(_Item, kw_only=True):
    resource_type: Int8  # ConfigResourceType
    resource_name: Str  # topic name, or the node id as a string ("" = this broker)
    configuration_keys: list[Str] | None = None  # None: every key


class DescribeConfigsRequest(Request, tag=32, kw_only=True):
    resources: list[DescribeConfigsResource] = []
    include_documentation: bool = False


class DescribeConfigsEntry(_Item, kw_only=True):
    name: Str
    value: Str | None
    read_only: bool = False
    config_source: Int8 = ConfigSource.DEFAULT_CONFIG
    is_default: bool = False
    is_sensitive: bool = False
    documentation: Str | None = None


class DescribeConfigsResult(_Item, kw_only=True):
    error_code: Int16 = 0
    error_message: Str | None = None
    resource_type: Int8
    resource_name: Str
    configs: list[DescribeConfigsEntry] = []


class DescribeConfigsResponse(Response, tag=32, kw_only=True):
    results: list[DescribeConfigsResult] = []


class AlterableConfig(_Item, kw_only=True):
    name: Str
    config_operation: Int8 = AlterConfigOp.SET
    value: Str | None = None  # ignored by DELETE


class AlterConfigsResource(_Item, kw_only=True):
    resource_type: Int8
    resource_name: Str
    configs: list[AlterableConfig] = []


class AlterConfigsRequest(Request, tag=44, kw_only=True):
    resources: list[AlterConfigsResource] = []
    validate_only: bool = False


class AlterConfigsResourceResult(_Item, kw_only=True):
    error_code: Int16 = 0
    error_message: Str | None = None
    resource_type: Int8
    resource_name: Str


class AlterConfigsResponse(Response, tag=44, kw_only=True):
    responses: list[AlterConfigsResourceResult] = []


# ---- DescribeLogDirs -----------------------------------------------------------------------
class DescribeLogDirsRequest(Request, tag=35, kw_only=True):
    topics: list[Str] | None = None  # None: every topic
    include_segments: bool = False  # odradek's own: list each partition's segments too


class SegmentDescription(_Item, kw_only=True):
    """One segment of a partition: files ``<base_offset, 20 digits>.log/.index/.timeindex``."""

    base_offset: Int64
    size_bytes: Int64  # of its .log file
    largest_timestamp_ms: Int64 = -1  # the largest record timestamp in it; -1 if empty


class DescribeLogDirsPartition(_Item, kw_only=True):
    partition_index: Int32
    size_bytes: Int64  # bytes of every segment's .log file
    offset_lag: Int64 = 0  # always 0 on a single node (no future replica)
    is_future_key: bool = False
    segments: list[SegmentDescription] = []  # oldest first; with include_segments only


class DescribeLogDirsTopic(_Item, kw_only=True):
    name: Str
    partitions: list[DescribeLogDirsPartition] = []


class DescribeLogDirsResult(_Item, kw_only=True):
    error_code: Int16 = 0  # KAFKA_STORAGE_ERROR for an offline log dir
    log_dir: Str
    topics: list[DescribeLogDirsTopic] = []


class DescribeLogDirsResponse(Response, tag=35, kw_only=True):
    results: list[DescribeLogDirsResult] = []
