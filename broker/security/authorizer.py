"""Kafka's ACL authorizer, and who is asking.

Turned on by ``authorizer.class.name`` (any of Kafka's authorizer class names; empty: off,
everything is allowed, as in Kafka). Then, for a principal from a host wanting an operation on
a resource (:meth:`Authorizer.authorize`), Kafka's rules in order:

1. a principal in ``super.users`` may do anything;
2. the bindings that apply to the resource are those of its type whose name is equal,
   ``*``, or a prefix (PREFIXED) of its name; if there are none, the answer is
   ``allow.everyone.if.no.acl.found`` (default false);
3. a DENY binding for the principal (or ``User:*``) and host (or ``*``) with the operation
   (or ALL) refuses, whatever allows it: deny wins;
4. else an ALLOW binding for the principal and host with the operation, ALL, or an operation
   that implies it, allows: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
   implies DESCRIBE_CONFIGS;
5. else it is refused.

Who is asking: each connection sets :data:`CALLER` to itself when it starts serving, so every
task of the connection (they are started from its task group, and tasks copy the context they
start in) sees it; the shared handlers of both protocols call :func:`allowed` and never take
the caller as a parameter. Work that is no connection's (the group coordinator's own appends,
retention, the cleaner) runs without a caller and is not checked.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

from odradek.protocol.acl import CLUSTER_NAME, AclBinding, Operation, Permission, ResourceType
from odradek.storage.acls import AclStore

__all__ = ["CALLER", "KNOWN_AUTHORIZERS", "Authorizer", "allowed", "may_write_idempotently"]

# What Kafka names its authorizers; any of them turns ACLs on.
KNOWN_AUTHORIZERS = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
)
_IMPLIED_BY = {
    Operation.DESCRIBE: {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
    Operation.DESCRIBE_CONFIGS: {Operation.ALTER_CONFIGS},
}
_EVERYONE = "User:*"


class Caller(Protocol):
    principal: str
    host: str
    authorizer: Authorizer | None


CALLER: ContextVar[Caller | None] = ContextVar("odradek_caller", default=None)


class Authorizer:
    def __init__(self, store: AclStore, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        self._indexed_version = -1

    def _bindings(self, resource_type: ResourceType) -> list[AclBinding]:
        if self._indexed_version != self.store.version:
            self._by_type = {}
            for binding in self.store.bindings:
                self._by_type.setdefault(binding.resource_type, []).append(binding)
            self._indexed_version = self.store.version
        return self._by_type.get(resource_type, [])

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        bindings = [b for b in self._bindings(resource_type) if b.applies_to(name)]
        if not bindings:
            return self.allow_if_no_acl
        mine = [
            b for b in bindings if b.principal in (principal, _EVERYONE) and b.host in (host, "*")
        ]
        if any(
            b.permission == Permission.DENY and b.operation in (operation, Operation.ALL)
            for b in mine
        ):
            return False
        granting = {operation, Operation.ALL} | _IMPLIED_BY.get(operation, set())
        return any(b.permission == Permission.ALLOW and b.operation in granting for b in mine)

    def allows_some(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type is open to the principal for ``operation``
        (KIP-679: WRITE on any topic lets a producer be idempotent). Simpler than Kafka's
        ``authorizeByResourceType``: an ALLOW binding suffices, whatever DENY names one of
        its resources (the producer still needs WRITE on each topic it writes)."""
        if principal in self.super_users:
            return True
        bindings = self._bindings(resource_type)
        if not bindings:
            return self.allow_if_no_acl
        return any(
            b.permission == Permission.ALLOW
            and b.operation in (operation, Operation.ALL)
            and b.principal in (principal, _EVERYONE)
            and b.host in (host, "*")
            for b in bindings
        )


def may_write_idempotently() -> bool:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE
    on some topic (KIP-679)."""
    caller = CALLER.get()
    if caller is None or caller.authorizer is None:
        return True
    return allowed(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER) or (
        caller.authorizer.allows_some(
            caller.principal, caller.host, Operation.WRITE, ResourceType.TOPIC
        )
    )


def allowed(operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
    """Whether the current caller (:data:`CALLER`) may do ``operation`` on the resource; True
    without a caller (the broker's own work) or without an authorizer."""
    caller = CALLER.get()
    if caller is None or caller.authorizer is None:
        return True
    return caller.authorizer.authorize(
        caller.principal, caller.host, operation, resource_type, name
    )
