"""Handlers for the metadata and admin APIs: ApiVersions, Metadata, Create/DeleteTopics,
CreatePartitions and DescribeLogDirs; DescribeConfigs and (incremental) AlterConfigs are in the
base class, :class:`odradek.broker.configs_api.ConfigsApi`.

Topic creation and deletion touch the filesystem (mkdir, fsync, rmtree): they run in a worker
thread under the broker's admin lock, so the event loop keeps serving produce and fetch.

Metadata runs on the event loop, so its cost is linear, never topics x partitions: partition
counts are taken in one pass over the partitions per request, and each topic's answer is
cached until what it is built from changes (:meth:`AdminApi._describe_topic`).
"""

from __future__ import annotations

from collections import Counter

import anyio
import anyio.to_thread

from odradek.broker.configs_api import ConfigsApi
from odradek.broker.context import BrokerContext
from odradek.broker.errors import error_code_for
from odradek.broker.listeners import Listener
from odradek.broker.security.authorizer import allowed
from odradek.protocol import messages as m
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.errors import ErrorCode
from odradek.storage.errors import (
    InvalidTopicError,
    PartitionLimitError,
    StorageError,
    is_resource_exhaustion,
)
from odradek.storage.log import Log
from odradek.storage.topics import INTERNAL_TOPICS, is_internal, validate_topic_name

__all__ = ["AdminApi"]

TOPIC, DESCRIBE = ResourceType.TOPIC, Operation.DESCRIBE


# What a topic's Metadata answer is built from: its id, its partition count, and how many dirs
# and partitions are offline (they only ever go offline while the broker runs).
_TopicKey = tuple[str, int, int, int]


class AdminApi(ConfigsApi):
    def __init__(self, ctx: BrokerContext) -> None:
        super().__init__(ctx)
        self._described: dict[str, tuple[_TopicKey, m.MetadataTopic]] = {}

    async def api_versions(self, req: m.ApiVersionsRequest) -> m.ApiVersionsResponse:
        return m.ApiVersionsResponse(
            correlation_id=req.correlation_id, api_keys=m.supported_api_versions()
        )

    # -- Metadata --------------------------------------------------------------------------

    async def metadata(
        self, req: m.MetadataRequest, listener: Listener | None = None
    ) -> m.MetadataResponse:
        ctx = self.ctx
        manager = ctx.manager
        if req.topics is None:  # every topic the caller may describe (ACLs), no error
            names = [n for n in sorted(manager.topics) if allowed(DESCRIBE, TOPIC, n)]
        else:
            names = list(dict.fromkeys(req.topics))
            auto = req.allow_auto_topic_creation and ctx.config["auto.create.topics.enable"]
            missing = [n for n in names if n not in manager.topics and _may_create(n)]
            if auto and missing:
                await self._auto_create(missing)
        counts = self._partition_counts()
        topics = [
            self._describe_topic(name, counts)
            if allowed(DESCRIBE, TOPIC, name)
            else m.MetadataTopic(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for name in names
        ]
        if len(self._described) > 2 * len(manager.topics) + 64:  # drop deleted topics' entries
            self._described = {n: v for n, v in self._described.items() if n in manager.topics}
        listener = listener or ctx.advertised_listener  # the one the client came in on
        return m.MetadataResponse(
            correlation_id=req.correlation_id,
            brokers=[m.MetadataBroker(node_id=ctx.node_id, host=listener.host, port=listener.port)],
            cluster_id=manager.cluster_id,
            controller_id=ctx.node_id,
            topics=topics,
        )

    async def _auto_create(self, names: list[str]) -> None:
        """Create the missing topics one by one (each rolled back whole if it fails). Out of
        descriptors or memory, or at ``max.broker.partitions``, the rest of the request is
        skipped: one log line, and the skipped topics answer UNKNOWN_TOPIC_OR_PARTITION."""
        partitions = self.ctx.config.int("num.partitions")
        for i, name in enumerate(names):
            if name in INTERNAL_TOPICS:
                continue  # created by their coordinator, with their own configs
            try:
                validate_topic_name(name)
            except InvalidTopicError:
                continue  # reported by _describe_topic
            async with self.ctx.admin_lock:
                if name not in self.ctx.manager.topics:
                    try:
                        await anyio.to_thread.run_sync(
                            self.ctx.manager.create_topic, name, partitions
                        )
                        self.ctx.log.info("topic auto-created", topic=name, partitions=partitions)
                    except (StorageError, OSError) as exc:
                        exhausted = isinstance(exc, PartitionLimitError) or (
                            isinstance(exc, OSError) and is_resource_exhaustion(exc)
                        )
                        self.ctx.log.warning(
                            "topic auto-creation failed",
                            topic=name,
                            error=str(exc),
                            skipped_topics=len(names) - i - 1 if exhausted else 0,
                        )
                        if exhausted:
                            return

    def _partition_counts(self) -> Counter[str]:
        """Every topic's partition count (online and offline), in one pass over partitions."""
        manager = self.ctx.manager
        counts = Counter(topic for topic, _ in manager.partitions.logs)
        counts.update(topic for topic, _ in manager.partitions.offline)
        return counts

    def _describe_topic(self, name: str, counts: Counter[str]) -> m.MetadataTopic:
        """One topic's Metadata answer, from the cache while its key is unchanged (the struct
        is shared by responses and never modified)."""
        manager = self.ctx.manager
        metadata = manager.topics.get(name)
        if metadata is None:
            self._described.pop(name, None)
            try:
                validate_topic_name(name)
            except InvalidTopicError:
                return m.MetadataTopic(name=name, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION)
            return m.MetadataTopic(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        offline = (len(manager.offline_dirs), len(manager.partitions.offline))
        key = (metadata.topic_id, counts[name], *offline)
        cached = self._described.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        topic = self._build_topic(name, metadata.topic_id, counts[name])
        self._described[name] = (key, topic)
        return topic

    def _build_topic(self, name: str, topic_id: str, partition_count: int) -> m.MetadataTopic:
        manager = self.ctx.manager
        node = self.ctx.node_id
        partitions = []
        for partition in range(partition_count):
            online = (name, partition) in manager.partitions.logs
            partitions.append(
                m.MetadataPartition(
                    partition_index=partition,
                    error_code=ErrorCode.NONE if online else ErrorCode.KAFKA_STORAGE_ERROR,
                    leader_id=node if online else -1,
                    leader_epoch=0,
                    replica_nodes=[node],
                    isr_nodes=[node] if online else [],
                )
            )
        return m.MetadataTopic(
            name=name, topic_id=topic_id, is_internal=is_internal(name), partitions=partitions
        )

    # -- topics ----------------------------------------------------------------------------

    async def create_topics(self, req: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
        results = []
        default_partitions = self.ctx.config.int("num.partitions")
        for topic in req.topics:
            partitions = topic.num_partitions if topic.num_partitions != -1 else default_partitions
            result = m.CreatableTopicResult(name=topic.name, num_partitions=partitions)
            try:
                validate_topic_name(topic.name)
                if not _may_create(topic.name):
                    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif is_internal(topic.name):  # its layout places the groups: the broker's
                    result.error_code = ErrorCode.INVALID_REQUEST
                    result.error_message = f"Internal topic {topic.name} is created by the broker"
                elif partitions < 1:
                    result.error_code = ErrorCode.INVALID_PARTITIONS
                    result.error_message = f"Number of partitions must be at least 1: {partitions}"
                elif topic.replication_factor not in (-1, 1):  # Kafka's (KRaft's) messages
                    factor = topic.replication_factor
                    result.error_code = ErrorCode.INVALID_REPLICATION_FACTOR
                    result.error_message = (
                        "Replication factor must be larger than 0, or -1 to use the default value."
                        if factor < 1
                        else f"Unable to replicate the partition {factor} time(s): The target "
                        f"replication factor of {factor} cannot be reached because only 1 "
                        "broker(s) are registered."
                    )
                elif req.validate_only:
                    if topic.name in self.ctx.manager.topics:
                        result.error_code = ErrorCode.TOPIC_ALREADY_EXISTS
                        result.error_message = f"Topic '{topic.name}' already exists."
                    self.ctx.manager.default_config.with_overrides(topic.configs)
                    self.ctx.manager.partitions.check_limit(partitions)
                else:
                    async with self.ctx.admin_lock:
                        await anyio.to_thread.run_sync(
                            self.ctx.manager.create_topic, topic.name, partitions, topic.configs
                        )
                    result.topic_id = self.ctx.manager.topics[topic.name].topic_id
                    result.replication_factor = 1
                    self.ctx.log.info("topic created", topic=topic.name, partitions=partitions)
            except (StorageError, OSError) as exc:  # OSError: out of descriptors or memory
                result.error_code = error_code_for(exc)
                result.error_message = str(exc)
                self.ctx.log.warning("topic creation failed", topic=topic.name, error=str(exc))
            results.append(result)
        return m.CreateTopicsResponse(correlation_id=req.correlation_id, topics=results)

    async def delete_topics(self, req: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
        results = []
        for name in req.topic_names:
            result = m.DeletableTopicResult(name=name)
            if not allowed(Operation.DELETE, TOPIC, name):
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not self.ctx.config["delete.topic.enable"]:
                result.error_code = ErrorCode.TOPIC_DELETION_DISABLED
            elif is_internal(name):  # Kafka leaves this to its tools; a broker must refuse it
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"Cannot delete internal topic {name}"
                self.ctx.log.info("topic deletion refused", topic=name, reason="internal topic")
            else:
                try:
                    validate_topic_name(name)
                    async with self.ctx.admin_lock:
                        await anyio.to_thread.run_sync(self.ctx.manager.delete_topic, name)
                    self.ctx.log.info("topic deleted", topic=name)
                    if self.ctx.metrics is not None:
                        self.ctx.metrics.topic_deleted(name)
                    if self.ctx.groups is not None:  # tombstones for the groups' offsets
                        await self.ctx.groups.topics_deleted([name])
                except (StorageError, OSError) as exc:
                    result.error_code = error_code_for(exc)
                    result.error_message = str(exc)
            results.append(result)
        self.ctx.notify_all()  # wake long polls on deleted partitions: they now fail
        return m.DeleteTopicsResponse(correlation_id=req.correlation_id, topics=results)

    async def create_partitions(self, req: m.CreatePartitionsRequest) -> m.CreatePartitionsResponse:
        results = []
        manager = self.ctx.manager
        for topic in req.topics:
            result = m.CreatePartitionsTopicResult(name=topic.name)
            current = manager.partitions.partition_count(topic.name)
            if not allowed(Operation.ALTER, TOPIC, topic.name):
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic.name not in manager.topics:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif is_internal(topic.name):  # more partitions would move every group's offsets
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"Cannot add partitions to internal topic {topic.name}"
            elif topic.count <= current:
                result.error_code = ErrorCode.INVALID_PARTITIONS
                result.error_message = (
                    f"Topic currently has {current} partitions, which is higher than or equal "
                    f"to the requested {topic.count}."
                )
            elif req.validate_only:
                try:
                    manager.partitions.check_limit(topic.count - current)
                except StorageError as exc:
                    result.error_code = error_code_for(exc)
                    result.error_message = str(exc)
            else:
                try:
                    async with self.ctx.admin_lock:
                        await anyio.to_thread.run_sync(
                            manager.add_partitions, topic.name, topic.count
                        )
                    if self.ctx.groups is not None:  # rebalance the groups subscribed to it
                        self.ctx.groups.partitions_added(topic.name)
                except (StorageError, OSError) as exc:  # OSError: out of descriptors or memory
                    result.error_code = error_code_for(exc)
                    result.error_message = str(exc)
            results.append(result)
        return m.CreatePartitionsResponse(correlation_id=req.correlation_id, results=results)

    # -- log dirs --------------------------------------------------------------------------

    async def describe_log_dirs(self, req: m.DescribeLogDirsRequest) -> m.DescribeLogDirsResponse:
        manager = self.ctx.manager
        wanted = None if req.topics is None else set(req.topics)
        results = []
        for log_dir in manager.log_dirs:
            result = m.DescribeLogDirsResult(log_dir=str(log_dir))
            results.append(result)
            if not allowed(DESCRIBE, ResourceType.CLUSTER):
                result.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                continue
            if log_dir in manager.offline_dirs:
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            by_topic: dict[str, list[m.DescribeLogDirsPartition]] = {}
            for (topic, partition), log in sorted(manager.partitions.logs.items()):
                in_dir = manager.partitions.log_dir_of[(topic, partition)] == log_dir
                if in_dir and (wanted is None or topic in wanted):
                    by_topic.setdefault(topic, []).append(
                        m.DescribeLogDirsPartition(
                            partition_index=partition,
                            size_bytes=log.size_bytes,
                            segments=_segments(log) if req.include_segments else [],
                        )
                    )
            result.topics = [
                m.DescribeLogDirsTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()
            ]
        return m.DescribeLogDirsResponse(correlation_id=req.correlation_id, results=results)


def _may_create(topic: str) -> bool:
    """Kafka: CREATE on the cluster, or on the topic."""
    return allowed(Operation.CREATE, ResourceType.CLUSTER) or allowed(
        Operation.CREATE, TOPIC, topic
    )


def _segments(log: Log) -> list[m.SegmentDescription]:
    """``log``'s segments, oldest first, from memory (no file is touched)."""
    return [
        m.SegmentDescription(
            base_offset=segment.base_offset,
            size_bytes=segment.size_bytes,
            largest_timestamp_ms=segment.max_timestamp,
        )
        for segment in list(log.segments)
    ]
