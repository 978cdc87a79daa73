"""Kafka's ACL model, as its admin APIs (CreateAcls, DescribeAcls, DeleteAcls) number it:
resource types, pattern types, operations, permissions, a binding and a binding filter.

A binding says: ``principal`` (``User:alice``, or ``User:*`` for everyone) from ``host``
(an address, or ``*``) is ``permission`` (ALLOW or DENY) to do ``operation`` on the resources
of ``resource_type`` whose name is ``name`` (LITERAL; ``*`` is every name) or starts with it
(PREFIXED). A filter has the same fields, where ANY (and a None name, principal or host)
matches everything and the pattern type MATCH matches every binding that applies to the
given name (literal equal, literal ``*``, or a prefix of it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["AclBinding", "AclFilter", "Operation", "PatternType", "Permission", "ResourceType"]

WILDCARD = "*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name, as Kafka spells it


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def invalid(self) -> str | None:
        """Why this binding cannot be created (Kafka's INVALID_REQUEST reasons), or None."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return "resource type must be concrete"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "pattern type must be LITERAL or PREFIXED"
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            return "operation must be concrete"
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            return "permission must be ALLOW or DENY"
        if not self.name:
            return "resource name must not be empty"
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            return f"the cluster resource is named {CLUSTER_NAME}"
        kind, sep, who = self.principal.partition(":")
        if not sep or not kind or not who:
            return f"principal must be TYPE:name, got {self.principal!r}"
        if not self.host:
            return "host must be an address or *"
        return None

    def applies_to(self, name: str) -> bool:
        """Whether this binding covers the resource called ``name``."""
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)


@dataclass(frozen=True)
class AclFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not binding.applies_to(self.name):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, binding.pattern_type):
                return False
            if self.name is not None and self.name != binding.name:
                return False
        return (
            self.principal in (None, binding.principal)
            and self.host in (None, binding.host)
            and self.operation in (Operation.ANY, binding.operation)
            and self.permission in (Permission.ANY, binding.permission)
        )
