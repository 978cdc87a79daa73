"""Handlers for DescribeConfigs and (incremental) AlterConfigs, for both protocols: topic
configs (Kafka's topic-level names, overrides kept in ``topic-configs.json``) and the broker's
static configuration (read-only). Secrets (``ssl.key.password`` and the like) are described as
Kafka describes them: ``is_sensitive``, with no value.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread

from odradek.broker.config import EMBEDDED_DEFAULTS
from odradek.broker.context import BrokerContext
from odradek.broker.errors import error_code_for
from odradek.broker.security.authorizer import allowed
from odradek.broker.security.keys import SECRET_KEYS
from odradek.protocol import messages as m
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.errors import ErrorCode
from odradek.storage.config import CONFIG_KEYS
from odradek.storage.errors import StorageError
from odradek.storage.topics import is_internal

__all__ = ["ConfigsApi"]


class ConfigsApi:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def describe_configs(self, req: m.DescribeConfigsRequest) -> m.DescribeConfigsResponse:
        results = []
        for res in req.resources:
            result = m.DescribeConfigsResult(
                resource_type=res.resource_type, resource_name=res.resource_name
            )
            if not _may_configure(Operation.DESCRIBE_CONFIGS, res):
                result.error_code = _denied(res)
            elif res.resource_type == m.ConfigResourceType.TOPIC:
                self._describe_topic_configs(res, result)
            elif res.resource_type == m.ConfigResourceType.BROKER:
                self._describe_broker_configs(res, result)
            else:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"unknown resource type {res.resource_type}"
            results.append(result)
        return m.DescribeConfigsResponse(correlation_id=req.correlation_id, results=results)

    def _describe_topic_configs(
        self, res: m.DescribeConfigsResource, result: m.DescribeConfigsResult
    ) -> None:
        metadata = self.ctx.manager.topics.get(res.resource_name)
        if metadata is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"unknown topic {res.resource_name!r}"
            return
        effective = self.ctx.manager.effective_config(res.resource_name).to_kafka()
        broker_sources = self.ctx.config.sources
        for name, value in effective.items():
            if res.configuration_keys is not None and name not in res.configuration_keys:
                continue
            if name in metadata.configs:
                source = m.ConfigSource.DYNAMIC_TOPIC_CONFIG
            elif any(
                broker_sources.get(key, EMBEDDED_DEFAULTS) != EMBEDDED_DEFAULTS
                for key in CONFIG_KEYS[name].broker_keys
            ):
                source = m.ConfigSource.STATIC_BROKER_CONFIG
            else:
                source = m.ConfigSource.DEFAULT_CONFIG
            result.configs.append(
                m.DescribeConfigsEntry(
                    name=name,
                    value=value,
                    config_source=source,
                    is_default=source == m.ConfigSource.DEFAULT_CONFIG,
                )
            )

    def _describe_broker_configs(
        self, res: m.DescribeConfigsResource, result: m.DescribeConfigsResult
    ) -> None:
        if res.resource_name not in ("", str(self.ctx.node_id)):
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"this broker is node {self.ctx.node_id}"
            return
        sources = self.ctx.config.sources
        for name, value in sorted(self.ctx.config.values.items()):
            if res.configuration_keys is not None and name not in res.configuration_keys:
                continue
            default = sources.get(name, EMBEDDED_DEFAULTS) == EMBEDDED_DEFAULTS
            sensitive = name in SECRET_KEYS
            result.configs.append(
                m.DescribeConfigsEntry(
                    name=name,
                    value=None if value is None or sensitive else str(value),
                    is_sensitive=sensitive,
                    read_only=True,
                    config_source=m.ConfigSource.DEFAULT_CONFIG
                    if default
                    else m.ConfigSource.STATIC_BROKER_CONFIG,
                    is_default=default,
                )
            )

    async def alter_configs(self, req: m.AlterConfigsRequest) -> m.AlterConfigsResponse:
        results = []
        manager = self.ctx.manager
        for res in req.resources:
            result = m.AlterConfigsResourceResult(
                resource_type=res.resource_type, resource_name=res.resource_name
            )
            results.append(result)
            if not _may_configure(Operation.ALTER_CONFIGS, res):
                result.error_code = _denied(res)
                continue
            if res.resource_type != m.ConfigResourceType.TOPIC:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = (
                    "only topic configs can be altered; broker configs are static"
                )
                continue
            names = [op.name for op in res.configs]
            duplicates = sorted({name for name in names if names.count(name) > 1})
            if duplicates:  # Kafka's words; e.g. a SET and a DELETE of one key
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = (
                    f"Error due to duplicate config keys : {','.join(duplicates)}"
                )
                continue
            nulls = [
                op.name
                for op in res.configs
                if op.config_operation != m.AlterConfigOp.DELETE and op.value is None
            ]
            if nulls:  # Kafka's words and code, before the topic or the names are looked at
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"Null value not supported for : {', '.join(nulls)}"
                continue
            metadata = manager.topics.get(res.resource_name)
            if metadata is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            configs = dict(metadata.configs)
            for op in res.configs:
                if op.config_operation not in (m.AlterConfigOp.SET, m.AlterConfigOp.DELETE):
                    result.error_code = ErrorCode.INVALID_REQUEST
                    result.error_message = (
                        f"unsupported operation {op.config_operation} for {op.name} "
                        "(0 = SET, 1 = DELETE)"
                    )
                elif op.name not in CONFIG_KEYS:  # Kafka's LogConfig.validateNames, any op
                    result.error_code = ErrorCode.INVALID_CONFIG
                    result.error_message = f"Unknown topic config name: {op.name}"
                elif op.config_operation == m.AlterConfigOp.DELETE:
                    configs.pop(op.name, None)
                else:
                    configs[op.name] = op.value
            if result.error_code:
                continue
            try:
                config = manager.default_config.with_overrides(configs)  # validate, naming the key
                if is_internal(res.resource_name) and config.cleanup_policy != ("compact",):
                    result.error_code = ErrorCode.INVALID_CONFIG
                    result.error_message = (
                        f"{res.resource_name} is an internal topic: its cleanup.policy must stay "
                        "compact (delete would drop committed offsets)"
                    )
                    continue
                if not req.validate_only:
                    async with self.ctx.admin_lock:
                        await anyio.to_thread.run_sync(
                            manager.alter_topic_configs, res.resource_name, configs
                        )
                    self.ctx.log.info(
                        "topic configs altered", topic=res.resource_name, configs=configs
                    )
            except StorageError as exc:
                result.error_code = error_code_for(exc)
                result.error_message = str(exc)
        return m.AlterConfigsResponse(correlation_id=req.correlation_id, responses=results)


def _may_configure(operation: Operation, res: Any) -> bool:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for broker configs."""
    if res.resource_type == m.ConfigResourceType.TOPIC:
        return allowed(operation, ResourceType.TOPIC, res.resource_name)
    return allowed(operation, ResourceType.CLUSTER)


def _denied(res: Any) -> ErrorCode:
    if res.resource_type == m.ConfigResourceType.TOPIC:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
