"""The admin clients: the cluster, topics, partitions, configs, log dirs, offsets, record
deletion, groups.

:class:`AdminCore` writes each method once, as a sans-I/O operation (its own, or one of
:mod:`odradek.client.ops` and :mod:`odradek.client.group_ops`); :class:`Admin` runs them
blocking, :class:`AsyncAdmin` as coroutines (:func:`odradek.client.drivers.operation`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from odradek.client import group_ops
from odradek.client.async_client import AsyncClient
from odradek.client.blocking_client import Client
from odradek.client.config import ClientConfig, options_of
from odradek.client.core import ClientCore
from odradek.client.drivers import (
    AsyncClosing,
    Call,
    Closing,
    async_face,
    blocking_face,
    operation,
)
from odradek.client.errors import KafkaError, for_code
from odradek.client.group_ops import (
    GroupDescription,
    GroupListing,
    MemberDescription,
    OffsetAndMetadata,
)
from odradek.client.ops import (
    Op,
    check,
    list_offsets_op,
    metadata_op,
    request_topics,
    response_partitions,
)
from odradek.client.types import (
    ClusterDescription,
    ConfigEntry,
    LogDirDescription,
    NewTopic,
    PartitionInfo,
    SegmentInfo,
    TopicDescription,
    TopicPartition,
)
from odradek.protocol import messages as m

__all__ = ["Admin", "AdminCore", "AsyncAdmin"]

_INT32_MAX = 2**31 - 1  # the broker's timeout_ms is an Int32 on the wire


def _first_error(results: Iterable[Any], name: str = "name") -> None:
    """Raise the error of the first result with an ``error_code``, in request order, naming
    the item by its ``name`` attribute (and the result's ``error_message``, if any)."""
    for result in results:
        if result.error_code:
            item, message = getattr(result, name), getattr(result, "error_message", None)
            raise for_code(result.error_code, f"{item}: {message}" if message else item)


def _configs(configs: Mapping[str, str]) -> dict[str, str]:
    """``configs`` as a dict; ``TypeError`` naming the first key whose value is not a ``str``
    (sent as it is, the broker could not decode the request and would close the connection)."""
    for key, value in configs.items():
        if not isinstance(value, str):
            raise TypeError(f"config values must be str, not {type(value).__name__} for {key!r}")
    return dict(configs)


class AdminCore:
    """An admin client: topics, partitions, configs, log dirs, offsets, groups.

    Args and the errors of the constructor and the calls: those of
    :class:`~odradek.client.core.ClientCore`, whose client it uses (``request_timeout_ms`` is
    also the broker's own timeout for creating and deleting topics, adding partitions and
    deleting records, at most 2**31 - 1 ms). Each call also raises the first per-item error the
    broker answers, in request order (``create_topics``: ``TopicAlreadyExistsError``,
    ``InvalidTopicError``, ...), rather than returning a per-item dict (``delete_group_offsets``
    alone returns its partitions' errors: there a partial result is the usual one), and, before
    sending, ``TypeError`` or ``ValueError`` naming a field the broker could not decode
    (:func:`~odradek.client.ops.check_decodable`).
    """

    _client_type: Any  # the face's client class: Client or AsyncClient

    @options_of(ClientConfig)
    def __init__(self, bootstrap_servers: str | Sequence[str], **options: Any) -> None:
        self._client = self._io = self._client_type(bootstrap_servers, **options)
        self.config = self._client.config
        self._timeout_ms = min(self.config.request_timeout_ms, _INT32_MAX)

    @operation
    def create_topics(self, new_topics: list[NewTopic], *, validate_only: bool = False) -> Op[None]:
        """Create topics (``validate_only``: only check that they could be); raises the first
        per-topic error (e.g. ``TopicAlreadyExistsError``), and ``TypeError`` at once for a
        config value that is not a ``str``."""
        request = m.CreateTopicsRequest(
            correlation_id=0,
            topics=[
                m.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=_configs(t.configs),
                )
                for t in new_topics
            ],
            timeout_ms=self._timeout_ms,
            validate_only=validate_only,
        )
        resp, _ = yield Call(request)
        _first_error(check(resp).topics)  # type: ignore[attr-defined]

    @operation
    def delete_topics(self, names: Iterable[str]) -> Op[None]:
        """Delete topics and their data."""
        resp, _ = yield Call(
            m.DeleteTopicsRequest(
                correlation_id=0, topic_names=list(names), timeout_ms=self._timeout_ms
            )
        )
        _first_error(check(resp).topics)  # type: ignore[attr-defined]

    @operation
    def create_partitions(
        self, counts: Mapping[str, int], *, validate_only: bool = False
    ) -> Op[None]:
        """Raise topics' partition counts to ``counts`` (topic -> new total; ``validate_only``:
        only check that they could be)."""
        resp, _ = yield Call(
            m.CreatePartitionsRequest(
                correlation_id=0,
                topics=[m.CreatePartitionsTopic(name=n, count=c) for n, c in counts.items()],
                timeout_ms=self._timeout_ms,
                validate_only=validate_only,
            )
        )
        _first_error(check(resp).results)  # type: ignore[attr-defined]

    @operation
    def list_topics(self, *, internal: bool = False) -> Op[set[str]]:
        """The topic names (internal topics too with ``internal``)."""
        meta = yield from metadata_op(None)
        return meta.topic_names(internal)

    @operation
    def describe_topics(self, names: list[str] | None = None) -> Op[list[TopicDescription]]:
        """The topics' partitions (every topic's for ``None``) with their log start offsets and
        high watermarks (ListOffsets). Raises the first topic error
        (``UnknownTopicOrPartitionError`` for a missing topic)."""
        meta = yield from metadata_op(names)
        infos = [meta.topics[n] for n in (names if names is not None else sorted(meta.topics))]
        _first_error(infos)
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

    @operation
    def describe_cluster(self) -> Op[ClusterDescription]:
        """The cluster's id, its controller and its brokers (one: this node)."""
        meta = yield from metadata_op([])
        return ClusterDescription(meta.cluster_id, meta.controller_id, meta.brokers)

    @operation
    def describe_configs(
        self, topic: str | None = None, *, broker: int | None = None
    ) -> Op[dict[str, ConfigEntry]]:
        """The configuration of ``topic``, by Kafka's topic-level names, or of the broker
        whose node id is ``broker`` (``describe_cluster`` lists it), by Kafka's broker keys
        and with their sources (``ValueError`` unless exactly one of the two is given)."""
        if (topic is None) == (broker is None):
            raise ValueError("describe the configs of a topic or of a broker (one of them)")
        kind = m.ConfigResourceType.TOPIC if broker is None else m.ConfigResourceType.BROKER
        name = topic if broker is None else str(broker)
        resources = [m.DescribeConfigsResource(resource_type=kind, resource_name=name)]
        resp, _ = yield Call(m.DescribeConfigsRequest(correlation_id=0, resources=resources))
        results = check(resp).results  # type: ignore[attr-defined]
        _first_error(results, "resource_name")
        return {
            c.name: ConfigEntry(
                c.name, c.value, c.config_source, c.is_default, c.read_only, c.is_sensitive
            )
            for result in results
            for c in result.configs
        }

    @operation
    def alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> Op[None]:
        """Set (``set``) and remove (``delete``) topic-level overrides; the others stay (Kafka's
        IncrementalAlterConfigs; ``validate_only``: only check that they could be). A value
        that is not a ``str`` is a ``TypeError``."""
        configs = [
            m.AlterableConfig(name=k, config_operation=m.AlterConfigOp.SET, value=v)
            for k, v in _configs(set or {}).items()
        ] + [m.AlterableConfig(name=k, config_operation=m.AlterConfigOp.DELETE) for k in delete]
        resources = [
            m.AlterConfigsResource(
                resource_type=m.ConfigResourceType.TOPIC, resource_name=topic, configs=configs
            )
        ]
        resp, _ = yield Call(
            m.AlterConfigsRequest(
                correlation_id=0, resources=resources, validate_only=validate_only
            )
        )
        _first_error(check(resp).responses, "resource_name")  # type: ignore[attr-defined]

    @operation
    def describe_log_dirs(
        self, topics: list[str] | None = None
    ) -> Op[dict[str, LogDirDescription]]:
        """Each log directory and the sizes of the partitions in it."""
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

    @operation
    def describe_segments(self, topic: str) -> Op[dict[int, list[SegmentInfo]]]:
        """Each partition's segments, oldest first (odradek brokers only: DescribeLogDirs with
        ``include_segments``; a Kafka broker has no such request)."""
        resp, _ = yield Call(
            m.DescribeLogDirsRequest(correlation_id=0, topics=[topic], include_segments=True)
        )
        out: dict[int, list[SegmentInfo]] = {}
        for result in check(resp).results:  # type: ignore[attr-defined]
            for t in result.topics:
                for p in t.partitions:
                    out.setdefault(p.partition_index, []).extend(
                        SegmentInfo(
                            result.log_dir, s.base_offset, s.size_bytes, s.largest_timestamp_ms
                        )
                        for s in p.segments
                    )
        return out

    list_offsets = ClientCore.list_offsets  # the low-level client's operation, as it is

    @operation
    def delete_records(self, before: Mapping[TopicPartition, int]) -> Op[dict[TopicPartition, int]]:
        """Delete the records below each offset (-1: the high watermark); returns the new log
        start offsets. Raises the first per-partition error."""
        topics = request_topics(
            before,
            m.DeleteRecordsTopic,
            lambda p, o: m.DeleteRecordsPartition(partition_index=p, offset=o),
        )
        resp, _ = yield Call(
            m.DeleteRecordsRequest(correlation_id=0, topics=topics, timeout_ms=self._timeout_ms)
        )
        return {tp: p.low_watermark for tp, p in response_partitions(resp)}

    # -- consumer groups (client.group_ops) ----------------------------------------------------
    @operation
    def list_groups(self, states: Iterable[str] = ()) -> Op[list[GroupListing]]:
        """The consumer groups (those in ``states`` if given)."""
        resp, _ = yield Call(m.ListGroupsRequest(correlation_id=0, states_filter=list(states)))
        return [
            GroupListing(g.group_id, g.protocol_type, g.group_state)
            for g in check(resp).groups  # type: ignore[attr-defined]
        ]

    @operation
    def describe_groups(self, group_ids: Iterable[str]) -> Op[list[GroupDescription]]:
        """The groups' state, protocol and members; an unknown group is described as
        ``Dead`` with no members (Kafka)."""
        resp, _ = yield Call(m.DescribeGroupsRequest(correlation_id=0, groups=list(group_ids)))
        _first_error(check(resp).groups, "group_id")  # type: ignore[attr-defined]
        out = []
        for g in resp.groups:  # type: ignore[attr-defined]
            members = [
                MemberDescription(
                    mb.member_id,
                    mb.group_instance_id,
                    mb.client_id,
                    mb.client_host,
                    list(mb.topics),
                    group_ops.assignment_set(mb.assignment),
                )
                for mb in g.members
            ]
            out.append(
                GroupDescription(
                    g.group_id, g.group_state, g.protocol_type, g.protocol_data, members
                )
            )
        return out

    @operation
    def delete_groups(self, group_ids: Iterable[str]) -> Op[None]:
        """Delete empty groups and their committed offsets; raises the first per-group error
        (``NonEmptyGroupError``, ``GroupIdNotFoundError``)."""
        resp, _ = yield Call(m.DeleteGroupsRequest(correlation_id=0, groups_names=list(group_ids)))
        _first_error(check(resp).results, "group_id")  # type: ignore[attr-defined]

    @operation
    def list_group_offsets(self, group_id: str) -> Op[dict[TopicPartition, OffsetAndMetadata]]:
        """Every committed offset of the group (the next offset to read per partition)."""
        found = yield from group_ops.fetch_offsets_op(group_id, None)
        return {tp: om for tp, om in found.items() if om is not None}

    @operation
    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> Op[None]:
        """Set committed offsets of an inactive group (commit outside membership: generation
        -1; an active group answers ``UnknownMemberIdError``)."""
        return group_ops.commit_offsets_op(group_id, group_ops.normalize_offsets(offsets))

    @operation
    def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> Op[dict[TopicPartition, KafkaError | None]]:
        """Delete the group's committed offsets of ``partitions`` (Kafka's OffsetDelete, as
        ``kafka-consumer-groups --delete-offsets``): its consumers then start there by
        ``auto_offset_reset``. Raises ``GroupIdNotFoundError``, or ``NonEmptyGroupError`` for
        an active group that is not a consumer group. Each partition succeeds or fails on its
        own, so, unlike the other calls, this returns each partition's error (``None``:
        deleted): ``GroupSubscribedToTopicError`` (an active member subscribes to the topic),
        ``UnknownTopicOrPartitionError``, ``TopicAuthorizationFailedError``."""
        return group_ops.delete_offsets_op(group_id, partitions)


@blocking_face
class Admin(Closing, AdminCore):
    """The blocking admin client. Parameters, methods and errors: :class:`AdminCore`.

    Thread-safety: any thread may call it, several at once (requests are pipelined).
    """

    _client_type = Client

    def close(self) -> None:
        """Close the connection."""
        self._client.close()


@async_face
class AsyncAdmin(AsyncClosing, AdminCore):
    """The async admin client: :class:`AdminCore`'s methods as coroutines.

    Use it in one event loop (asyncio, uvloop or trio); its tasks may call it at once.
    """

    _client_type = AsyncClient

    async def close(self) -> None:
        """Close the connection."""
        await self._client.close()
