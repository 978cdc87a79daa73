"""Admin operations as sans-I/O generators (see :mod:`odradek.client.ops`), shared by
:class:`odradek.client.admin.Admin` and :class:`odradek.client.admin.AsyncAdmin`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from odradek.client.errors import KafkaError, for_code
from odradek.client.ops import Call, Op, check, group_by_topic, list_offsets_op, metadata_op
from odradek.client.types import (
    ConfigEntry,
    LogDirDescription,
    NewTopic,
    PartitionInfo,
    SegmentInfo,
    TopicDescription,
    TopicPartition,
)
from odradek.protocol import messages as m

__all__ = [
    "alter_configs_op",
    "create_partitions_op",
    "create_topics_op",
    "delete_records_op",
    "delete_topics_op",
    "describe_configs_op",
    "describe_log_dirs_op",
    "describe_segments_op",
    "describe_topics_op",
    "list_topics_op",
]


def _first_error(results: Iterable[tuple[str, int, str | None]]) -> None:
    for name, code, message in results:
        if code:
            raise for_code(code, f"{name}: {message}" if message else name)


def create_topics_op(
    new_topics: list[NewTopic], validate_only: bool = False, timeout_ms: int = 30_000
) -> Op[None]:
    """Create topics; raises the first per-topic error (e.g. ``TopicAlreadyExistsError``)."""
    request = m.CreateTopicsRequest(
        correlation_id=0,
        topics=[
            m.CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs=dict(t.configs),
            )
            for t in new_topics
        ],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )
    resp, _ = yield Call(request)
    _first_error((t.name, t.error_code, t.error_message) for t in check(resp).topics)  # type: ignore[attr-defined]


def delete_topics_op(names: Iterable[str], timeout_ms: int = 30_000) -> Op[None]:
    resp, _ = yield Call(
        m.DeleteTopicsRequest(correlation_id=0, topic_names=list(names), timeout_ms=timeout_ms)
    )
    _first_error((t.name, t.error_code, t.error_message) for t in check(resp).topics)  # type: ignore[attr-defined]


def create_partitions_op(counts: Mapping[str, int], timeout_ms: int = 30_000) -> Op[None]:
    resp, _ = yield Call(
        m.CreatePartitionsRequest(
            correlation_id=0,
            topics=[m.CreatePartitionsTopic(name=n, count=c) for n, c in counts.items()],
            timeout_ms=timeout_ms,
        )
    )
    _first_error((t.name, t.error_code, t.error_message) for t in check(resp).results)  # type: ignore[attr-defined]


def list_topics_op(internal: bool = False) -> Op[set[str]]:
    meta = yield from metadata_op(None)
    return {
        name
        for name, info in meta.topics.items()
        if not info.error_code and (internal or not info.is_internal)
    }


def describe_topics_op(names: list[str] | None = None) -> Op[list[TopicDescription]]:
    """Topics with their partitions' log start offsets and high watermarks (ListOffsets).
    Raises the first topic error (``UnknownTopicOrPartitionError`` for a missing topic)."""
    meta = yield from metadata_op(names)
    infos = [meta.topics[n] for n in (names if names is not None else sorted(meta.topics))]
    _first_error((i.name, i.error_code, None) for i in infos)
    tps = [TopicPartition(i.name, p) for i in infos for p in i.partitions]
    starts = (yield from list_offsets_op(dict.fromkeys(tps, -2))) if tps else {}
    ends = (yield from list_offsets_op(dict.fromkeys(tps, -1))) if tps else {}
    out = []
    for info in infos:
        parts = []
        for p in info.partitions:
            tp = TopicPartition(info.name, p)
            start, end = starts.get(tp), ends.get(tp)
            parts.append(
                PartitionInfo(p, start.offset if start else None, end.offset if end else None)
            )
        out.append(TopicDescription(info.name, parts, info.is_internal))
    return out


def describe_configs_op(topic: str) -> Op[dict[str, ConfigEntry]]:
    resp, _ = yield Call(
        m.DescribeConfigsRequest(
            correlation_id=0,
            resources=[
                m.DescribeConfigsResource(
                    resource_type=m.ConfigResourceType.TOPIC, resource_name=topic
                )
            ],
        )
    )
    out: dict[str, ConfigEntry] = {}
    for result in check(resp).results:  # type: ignore[attr-defined]
        if result.error_code:
            raise for_code(result.error_code, result.error_message or topic)
        for c in result.configs:
            out[c.name] = ConfigEntry(
                c.name, c.value, c.config_source, c.is_default, c.read_only, c.is_sensitive
            )
    return out


def alter_configs_op(
    topic: str, set_: Mapping[str, str], delete: Iterable[str], validate_only: bool = False
) -> Op[None]:
    configs = [
        m.AlterableConfig(name=k, config_operation=m.AlterConfigOp.SET, value=v)
        for k, v in set_.items()
    ] + [m.AlterableConfig(name=k, config_operation=m.AlterConfigOp.DELETE) for k in delete]
    resp, _ = yield Call(
        m.AlterConfigsRequest(
            correlation_id=0,
            resources=[
                m.AlterConfigsResource(
                    resource_type=m.ConfigResourceType.TOPIC, resource_name=topic, configs=configs
                )
            ],
            validate_only=validate_only,
        )
    )
    _first_error(
        (r.resource_name, r.error_code, r.error_message)
        for r in check(resp).responses  # type: ignore[attr-defined]
    )


def describe_log_dirs_op(topics: list[str] | None = None) -> Op[dict[str, LogDirDescription]]:
    resp, _ = yield Call(m.DescribeLogDirsRequest(correlation_id=0, topics=topics))
    out = {}
    for result in check(resp).results:  # type: ignore[attr-defined]
        error: KafkaError | None = for_code(result.error_code) if result.error_code else None
        sizes = {
            TopicPartition(t.name, p.partition_index): p.size_bytes
            for t in result.topics
            for p in t.partitions
        }
        out[result.log_dir] = LogDirDescription(error, sizes)
    return out


def describe_segments_op(topic: str) -> Op[dict[int, list[SegmentInfo]]]:
    """Every segment of every partition of ``topic``, oldest first, by partition (odradek's
    DescribeLogDirs with ``include_segments``; a Kafka broker has no such request)."""
    resp, _ = yield Call(
        m.DescribeLogDirsRequest(correlation_id=0, topics=[topic], include_segments=True)
    )
    out: dict[int, list[SegmentInfo]] = {}
    for result in check(resp).results:  # type: ignore[attr-defined]
        for t in result.topics:
            for p in t.partitions:
                out.setdefault(p.partition_index, []).extend(
                    SegmentInfo(result.log_dir, s.base_offset, s.size_bytes, s.largest_timestamp_ms)
                    for s in p.segments
                )
    return out


def delete_records_op(
    before: Mapping[TopicPartition, int], timeout_ms: int = 30_000
) -> Op[dict[TopicPartition, int]]:
    """Delete records before each offset (-1: the high watermark); returns the new log start
    offsets. Raises the first per-partition error."""
    resp, _ = yield Call(
        m.DeleteRecordsRequest(
            correlation_id=0,
            topics=[
                m.DeleteRecordsTopic(
                    name=topic,
                    partitions=[
                        m.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in ps
                    ],
                )
                for topic, ps in group_by_topic(before.items()).items()
            ],
            timeout_ms=timeout_ms,
        )
    )
    out = {}
    for topic in check(resp).topics:  # type: ignore[attr-defined]
        for p in topic.partitions:
            if p.error_code:
                raise for_code(p.error_code, f"{topic.name}-{p.partition_index}")
            out[TopicPartition(topic.name, p.partition_index)] = p.low_watermark
    return out
