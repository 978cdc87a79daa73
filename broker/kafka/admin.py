"""Kafka's metadata and admin APIs onto the shared handlers (:class:`AdminApi`): ApiVersions,
Metadata, CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DescribeLogDirs.

The native responses carry Kafka's field names, so most answers are the native response as
plain data (:func:`plain`) with what only Kafka's protocol has added. Settled here:

- **Metadata**: this node is the one broker, the controller and every partition's leader,
  replica and in-sync replica; ``leader_epoch`` 0 (v7+). v0 asks for every topic with an empty
  list, v1+ with null. Requests before v4 allow auto-creation (they cannot say otherwise).
- **AlterConfigs** (not incremental) *replaces* a topic's overrides with the ones given, as
  Kafka does: keys not named go back to their defaults.
- **Replica assignments** in CreateTopics/CreatePartitions must name this node only
  (``INVALID_REPLICA_ASSIGNMENT`` otherwise); with assignments, the partition count is theirs.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import msgspec

from odradek.broker.admin import AdminApi
from odradek.broker.context import BrokerContext
from odradek.broker.listeners import Listener
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka import RequestHeader
from odradek.storage.uuids import uuid_bytes

__all__ = ["AdminApis", "plain"]

_LEADER_EPOCH = 0
_NULL_UUID = uuid.UUID(int=0)
_AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def plain(native: msgspec.Struct) -> dict[str, Any]:
    """A native message as nested dicts (by field name) and lists; other values as they are.
    (``msgspec.to_builtins`` would give lists: the native structs are array-like.)"""
    return {name: _plain(getattr(native, name)) for name in native.__struct_fields__}


def _plain(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return plain(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class AdminApis:
    def __init__(
        self, admin: AdminApi, ctx: BrokerContext, advertised: list[tuple], listener: Listener
    ) -> None:
        self.admin = admin
        self.ctx = ctx
        self.listener = listener  # the connection's, as its clients are told to reach it
        self.advertised = advertised  # (api_key, min, max) of every api routed here

    async def api_versions(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        return {
            "error_code": 0,
            "api_keys": [
                {"api_key": key, "min_version": lo, "max_version": hi}
                for key, lo, hi in self.advertised
            ],
            "throttle_time_ms": 0,
        }

    async def metadata(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        topics = req["topics"]
        if topics is not None:
            topics = [t["name"] for t in topics]
            if not topics and header.api_version == 0:
                topics = None  # v0: an empty list means every topic
        native = await self.admin.metadata(
            m.MetadataRequest(
                correlation_id=header.correlation_id,
                topics=topics,
                allow_auto_topic_creation=req.get("allow_auto_topic_creation", True),
            ),
            self.listener,
        )
        fields = plain(native)
        for topic in fields["topics"]:
            topic["topic_authorized_operations"] = _AUTHORIZED_OPERATIONS_OMITTED
            for p in topic["partitions"]:
                p["leader_epoch"] = _LEADER_EPOCH if p["leader_id"] >= 0 else -1
                p["offline_replicas"] = [] if p["leader_id"] >= 0 else p["replica_nodes"]
        fields["throttle_time_ms"] = 0
        fields["cluster_authorized_operations"] = _AUTHORIZED_OPERATIONS_OMITTED
        return fields

    # -- topics ----------------------------------------------------------------------------

    async def create_topics(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        topics, refused = [], []
        for t in req["topics"]:
            count = t["num_partitions"]
            if t["assignments"]:
                if any(a["broker_ids"] != [self.ctx.node_id] for a in t["assignments"]):
                    refused.append(_refusal(t["name"], "replicas must be this node only"))
                    continue
                count = len(t["assignments"])
            configs = {c["name"]: c["value"] for c in t["configs"]}
            topics.append(
                m.CreatableTopic(
                    name=t["name"],
                    num_partitions=count,
                    replication_factor=t["replication_factor"],
                    configs=configs,  # type: ignore[arg-type]  # a null value: refused there
                )
            )
        native = await self.admin.create_topics(
            m.CreateTopicsRequest(
                correlation_id=header.correlation_id,
                topics=topics,
                timeout_ms=req["timeout_ms"],
                validate_only=req["validate_only"],
            )
        )
        results = plain(native)["topics"] + refused
        for result in results:
            result["topic_id"] = _uuid(result.get("topic_id", ""))
            result["configs"] = []
        return {"throttle_time_ms": 0, "topics": results}

    async def delete_topics(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.admin.delete_topics(
            m.DeleteTopicsRequest(
                correlation_id=header.correlation_id,
                topic_names=req["topic_names"],
                timeout_ms=req["timeout_ms"],
            )
        )
        return {"throttle_time_ms": 0, "responses": plain(native)["topics"]}

    async def create_partitions(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        topics, refused = [], []
        for t in req["topics"]:
            assignments = t["assignments"] or []
            if any(a["broker_ids"] != [self.ctx.node_id] for a in assignments):
                refused.append(_refusal(t["name"], "replicas must be this node only"))
                continue
            topics.append(m.CreatePartitionsTopic(name=t["name"], count=t["count"]))
        native = await self.admin.create_partitions(
            m.CreatePartitionsRequest(
                correlation_id=header.correlation_id,
                topics=topics,
                timeout_ms=req["timeout_ms"],
                validate_only=req["validate_only"],
            )
        )
        return {"throttle_time_ms": 0, "results": plain(native)["results"] + refused}

    # -- configs ---------------------------------------------------------------------------

    async def describe_configs(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        native = await self.admin.describe_configs(
            m.DescribeConfigsRequest(
                correlation_id=header.correlation_id,
                resources=[
                    m.DescribeConfigsResource(
                        resource_type=r["resource_type"],
                        resource_name=r["resource_name"],
                        configuration_keys=r["configuration_keys"],
                    )
                    for r in req["resources"]
                ],
                include_documentation=req.get("include_documentation", False),
            )
        )
        results = plain(native)["results"]
        for result in results:
            for entry in result["configs"]:
                entry["synonyms"] = []
                entry["config_type"] = 0  # UNKNOWN: the native protocol does not type values
        return {"throttle_time_ms": 0, "results": results}

    async def alter_configs(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        """Kafka's non-incremental AlterConfigs: the overrides given replace the current ones."""
        resources = []
        for r in req["resources"]:
            given = {c["name"]: c["value"] for c in r["configs"]}
            ops = [
                m.AlterableConfig(name=name, config_operation=m.AlterConfigOp.SET, value=value)
                for name, value in given.items()
            ]
            current = self.ctx.manager.topics.get(r["resource_name"])
            if r["resource_type"] == m.ConfigResourceType.TOPIC and current is not None:
                ops += [
                    m.AlterableConfig(name=name, config_operation=m.AlterConfigOp.DELETE)
                    for name in current.configs
                    if name not in given
                ]
            resources.append((r, ops))
        return await self._alter(header, req, resources)

    async def incremental_alter_configs(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        resources = [
            (
                r,
                [
                    m.AlterableConfig(
                        name=c["name"], config_operation=c["config_operation"], value=c["value"]
                    )
                    for c in r["configs"]
                ],
            )
            for r in req["resources"]
        ]
        return await self._alter(header, req, resources)

    async def _alter(
        self,
        header: RequestHeader,
        req: dict[str, Any],
        resources: list[tuple[dict[str, Any], list[m.AlterableConfig]]],
    ) -> dict:
        native = await self.admin.alter_configs(
            m.AlterConfigsRequest(
                correlation_id=header.correlation_id,
                resources=[
                    m.AlterConfigsResource(
                        resource_type=r["resource_type"],
                        resource_name=r["resource_name"],
                        configs=ops,
                    )
                    for r, ops in resources
                ],
                validate_only=req["validate_only"],
            )
        )
        return {"throttle_time_ms": 0, "responses": plain(native)["responses"]}

    # -- log dirs --------------------------------------------------------------------------

    async def describe_log_dirs(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        wanted = None
        if req["topics"] is not None:
            wanted = {(t["topic"], p) for t in req["topics"] for p in t["partitions"]}
        native = await self.admin.describe_log_dirs(
            m.DescribeLogDirsRequest(
                correlation_id=header.correlation_id,
                topics=None if wanted is None else sorted({t for t, _ in wanted}),
            )
        )
        results = plain(native)["results"]
        for result in results:
            for topic in result["topics"]:
                parts = topic["partitions"]
                if wanted is not None:
                    parts = [p for p in parts if (topic["name"], p["partition_index"]) in wanted]
                for p in parts:
                    p["partition_size"] = p["size_bytes"]
                topic["partitions"] = parts
            result["total_bytes"], result["usable_bytes"] = _volume_bytes(result)
        return {"throttle_time_ms": 0, "error_code": 0, "results": results}


def _volume_bytes(result: dict[str, Any]) -> tuple[int, int]:
    """(total, usable) bytes of the volume holding an online log dir, as Kafka's
    ``FileStore.getTotalSpace`` / ``getUsableSpace``; -1 for an offline one (v4+)."""
    if result["error_code"]:
        return -1, -1
    try:
        usage = os.statvfs(result["log_dir"])
    except OSError:
        return -1, -1
    return usage.f_blocks * usage.f_frsize, usage.f_bavail * usage.f_frsize


def _refusal(name: str, why: str) -> dict[str, Any]:
    return {
        "name": name,
        "error_code": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "error_message": why,
        "num_partitions": -1,
        "replication_factor": -1,
    }


def _uuid(base64_id: str) -> uuid.UUID:
    """A topic id as Kafka's UUID type (native carries the base64 form)."""
    return uuid.UUID(bytes=uuid_bytes(base64_id)) if base64_id else _NULL_UUID
