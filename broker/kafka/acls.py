"""Kafka's ACL admin APIs: DescribeAcls, CreateAcls, DeleteAcls (``kafka-acls``, the admin
clients' ``create_acls`` / ``describe_acls`` / ``delete_acls``), over the broker's
:class:`~odradek.storage.acls.AclStore`.

As Kafka answers them: without an authorizer every call is ``SECURITY_DISABLED``; describing
needs DESCRIBE on the cluster, creating and deleting ALTER (``CLUSTER_AUTHORIZATION_FAILED``);
a binding that cannot exist (ANY or UNKNOWN where a concrete value is needed, an empty
name, a malformed principal) is ``INVALID_REQUEST`` with the reason. Changes are written to
every log dir (``acls.json``) before the answer and apply to the next request.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread

from odradek.broker.security.authorizer import allowed
from odradek.protocol.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka import RequestHeader

if TYPE_CHECKING:
    from odradek.broker.connection import Connection

__all__ = ["AclApis"]

E = TypeVar("E", bound=IntEnum)


def _enum(cls: type[E], value: int) -> E:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN: refused by AclBinding.invalid, matched by nothing


# the wire fields of a binding (CreateAcls) and of a filter (DescribeAcls, DeleteAcls), in
# AclBinding's / AclFilter's order, with the enum each is read as (None: kept as it is)
_ENUMS = (ResourceType, None, PatternType, None, None, Operation, Permission)
_CREATION = ("resource_type", "resource_name", "resource_pattern_type", "principal", "host",
             "operation", "permission_type")  # fmt: skip
_FILTER = ("resource_type_filter", "resource_name_filter", "pattern_type_filter",
           "principal_filter", "host_filter", "operation", "permission_type")  # fmt: skip


def _read(fields: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    return [
        fields[name] if cls is None else _enum(cls, fields[name])
        for name, cls in zip(names, _ENUMS, strict=True)
    ]


def _filter(f: dict[str, Any]) -> AclFilter:
    return AclFilter(*_read(f, _FILTER))


def _binding_fields(b: AclBinding) -> dict[str, Any]:
    return {
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation,
        "permission_type": b.permission,
    }


class AclApis:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.ctx = conn.ctx

    def _refusal(self, operation: Operation) -> tuple[ErrorCode, str | None]:
        if self.ctx.authorizer is None:
            return ErrorCode.SECURITY_DISABLED, "no authorizer: set authorizer.class.name"
        if not allowed(operation, ResourceType.CLUSTER):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
        return ErrorCode.NONE, None

    async def describe_acls(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        code, message = self._refusal(Operation.DESCRIBE)
        answer: dict[str, Any] = {"throttle_time_ms": 0, "error_code": code}
        if code:
            return answer | {"error_message": message, "resources": []}
        wanted = _filter(req)
        groups: dict[tuple[int, str, int], list[dict]] = {}
        for b in sorted(self.ctx.authorizer.store.bindings):  # type: ignore[union-attr]
            if wanted.matches(b):
                key = (b.resource_type, b.name, b.pattern_type)
                groups.setdefault(key, []).append(_binding_fields(b))
        resources = [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in groups.items()
        ]
        return answer | {"error_message": None, "resources": resources}

    async def create_acls(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        code, message = self._refusal(Operation.ALTER)
        results, created = [], []
        for c in req["creations"]:
            binding = AclBinding(*_read(c, _CREATION))
            why = None if code else binding.invalid()
            if code:
                results.append({"error_code": code, "error_message": message})
            elif why is not None:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": why})
            else:
                results.append({"error_code": ErrorCode.NONE, "error_message": None})
                created.append(binding)
        if created:
            await self._apply(lambda store, roots: store.apply(roots, add=created))
            self._log("ACLs created", created)
        return {"throttle_time_ms": 0, "results": results}

    async def delete_acls(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        code, message = self._refusal(Operation.ALTER)
        if code:
            failed = {"error_code": code, "error_message": message, "matching_acls": []}
            return {"throttle_time_ms": 0, "filter_results": [failed for _ in req["filters"]]}
        store = self.ctx.authorizer.store  # type: ignore[union-attr]
        results, removed = [], set()
        for f in req["filters"]:
            wanted = _filter(f)
            matching = [b for b in sorted(store.bindings) if wanted.matches(b)]
            removed.update(matching)
            results.append(
                {
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "matching_acls": [
                        {
                            "error_code": ErrorCode.NONE,
                            "error_message": None,
                            "resource_type": b.resource_type,
                            "resource_name": b.name,
                            "pattern_type": b.pattern_type,
                            **_binding_fields(b),
                        }
                        for b in matching
                    ],
                }
            )
        if removed:
            await self._apply(lambda store, roots: store.apply(roots, remove=removed))
            self._log("ACLs deleted", sorted(removed))
        return {"throttle_time_ms": 0, "filter_results": results}

    async def _apply(self, change: Callable[[Any, Any], None]) -> None:
        store = self.ctx.authorizer.store  # type: ignore[union-attr]
        async with self.ctx.admin_lock:
            await anyio.to_thread.run_sync(change, store, self.ctx.manager.online_dirs)

    def _log(self, event: str, bindings: list[AclBinding]) -> None:
        self.ctx.log.info(
            event,
            by=self.conn.principal,
            acls=[
                f"{b.permission.name} {b.principal}@{b.host} {b.operation.name} "
                f"{b.resource_type.name}:{b.pattern_type.name}:{b.name}"
                for b in bindings
            ],
        )
