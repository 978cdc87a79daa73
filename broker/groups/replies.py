"""How a group request is refused: the READ authorization of the member-facing APIs and the
reply that carries only an error code. Shared by the three request families
(:mod:`~odradek.broker.groups.api_membership`, :mod:`~odradek.broker.groups.api_offsets`,
:mod:`~odradek.broker.groups.api_admin`).
"""

from __future__ import annotations

from typing import TypeVar

from odradek.broker.security.authorizer import allowed
from odradek.protocol import messages as m
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.errors import ErrorCode

__all__ = ["error_reply", "read_denied"]

R = TypeVar("R", bound=m.Response)


def read_denied(group_id: str) -> ErrorCode:
    """GROUP_AUTHORIZATION_FAILED unless the caller may READ the group (join, sync,
    heartbeat, leave, commit: Kafka's rule), else NONE."""
    if allowed(Operation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.NONE
    return ErrorCode.GROUP_AUTHORIZATION_FAILED


def error_reply(cls: type[R], req: m.Request, code: ErrorCode) -> R:
    """A ``cls`` answering ``req`` with ``code`` and nothing else."""
    return cls(correlation_id=req.correlation_id, error_code=int(code))
