"""``acls.json``: the ACL bindings (odradek's own file; Kafka keeps them in its metadata
log). One copy per online root; versions, copies and crash safety:
:mod:`odradek.storage.replicated`::

    {"version": 4,
     "acls": [["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"], ...]}

Each binding is its seven fields by name (:class:`odradek.protocol.acl.AclBinding`), sorted,
so equal sets write equal bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from odradek.protocol.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from odradek.storage.replicated import read_table, write_table

__all__ = ["ACLS", "AclStore"]

ACLS = "acls.json"


def _decode(rows: list[Any]) -> set[AclBinding]:
    bindings = set()
    for resource_type, name, pattern, principal, host, operation, permission in rows:
        binding = AclBinding(
            ResourceType[resource_type],
            str(name),
            PatternType[pattern],
            str(principal),
            str(host),
            Operation[operation],
            Permission[permission],
        )
        why = binding.invalid()
        if why is not None:
            raise ValueError(f"invalid ACL {rows!r}: {why}")
        bindings.add(binding)
    return bindings


def _encode(bindings: Iterable[AclBinding]) -> list[list[str]]:
    return [
        [
            b.resource_type.name,
            b.name,
            b.pattern_type.name,
            b.principal,
            b.host,
            b.operation.name,
            b.permission.name,
        ]
        for b in sorted(bindings)
    ]


class AclStore:
    """Every binding, loaded from and saved to every root (single writer)."""

    def __init__(self, roots: Iterable[Path]) -> None:
        version, bindings = read_table(roots, ACLS, "acls", _decode)
        self.version, self.bindings = version, frozenset(bindings or ())

    def apply(
        self,
        roots: Iterable[Path],
        add: Iterable[AclBinding] = (),
        remove: Iterable[AclBinding] = (),
    ) -> None:
        """Add and remove bindings, then write the set to every root in ``roots``; on
        failure nothing changes in memory."""
        bindings = (set(self.bindings) | set(add)) - set(remove)
        write_table(roots, ACLS, "acls", self.version + 1, _encode(bindings))
        self.version, self.bindings = self.version + 1, frozenset(bindings)
