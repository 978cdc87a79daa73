"""One member of a consumer group: what it sent in its JoinGroup, what it was assigned, and the
replies it waits for.

Members are of one of two kinds (:attr:`Member.client_assigned`; :mod:`odradek.broker.groups.group`
says what a group of each holds):

- server-assigned (False; the native client): ``topics`` and ``assignors`` as sent, the
  ``assignment`` the broker computed;
- client-assigned (True; Kafka clients): ``protocols`` (name -> metadata bytes, in preference
  order; ``assignors`` holds their names) and the leader's ``assignment_bytes``, with ``topics``
  and ``assignment`` decoded from them for protocol type "consumer";
- None: replayed from ``__consumer_offsets`` and not rejoined since.

A member waiting on a JoinGroup or SyncGroup holds a :class:`Pending` reply that a later event
resolves; while it waits its session does not expire (:attr:`Member.awaiting`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from odradek.broker.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR_ORDER
from odradek.broker.groups.consumer_protocol import (
    encode_assignment,
    encode_subscription,
    read_assignment,
    read_subscription,
)
from odradek.protocol import messages as m

__all__ = ["NEVER", "Member", "Pending", "protocol_names", "resolve_assignors"]

NEVER = 2**63 - 1
T = TypeVar("T")


class Pending(Generic[T]):
    """A reply that a later event supplies (a join waits for the rebalance to complete)."""

    __slots__ = ("_callbacks", "result")

    def __init__(self, result: T | None = None) -> None:
        self.result = result
        self._callbacks: list[Callable[[], object]] = []

    @property
    def done(self) -> bool:
        return self.result is not None

    def resolve(self, result: T) -> None:
        if self.result is not None:
            return
        self.result = result
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], object]) -> None:
        if self.result is not None:
            callback()
        else:
            self._callbacks.append(callback)


def resolve_assignors(names: Sequence[str]) -> tuple[str, ...]:
    """A member's assignors in preference order, unknown names dropped; ``[]``: all of ours."""
    if not names:
        return DEFAULT_ASSIGNOR_ORDER
    return tuple(dict.fromkeys(n for n in names if n in ASSIGNORS))


def protocol_names(protocols: Sequence[m.JoinGroupProtocol]) -> tuple[str, ...]:
    """A client-assigned member's protocol names in preference order (a repeat is dropped)."""
    return tuple(dict.fromkeys(p.name for p in protocols))


def _protocol_map(protocols: Sequence[m.JoinGroupProtocol]) -> dict[str, bytes]:
    """name -> metadata in preference order; the first of a repeated name counts."""
    found: dict[str, bytes] = {}
    for p in protocols:
        found.setdefault(p.name, p.metadata)
    return found


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    protocol_type: str = "consumer"
    assignors: tuple[str, ...] = DEFAULT_ASSIGNOR_ORDER
    topics: tuple[str, ...] = ()
    assignment: dict[str, list[int]] = field(default_factory=dict)
    client_assigned: bool | None = False  # see the module docstring; None: replayed
    protocols: dict[str, bytes] = field(default_factory=dict)  # client-assigned: name -> metadata
    assignment_bytes: bytes = b""  # client-assigned: the leader's bytes for this member
    join_waiter: Pending[m.JoinGroupResponse] | None = None
    sync_waiter: Pending[m.SyncGroupResponse] | None = None
    deadline_ms: int = NEVER  # session expiry, while not waiting on a join or sync
    synced: bool = False  # has received its assignment for the current generation

    @property
    def awaiting(self) -> bool:
        return self.join_waiter is not None or self.sync_waiter is not None

    def update(self, req: m.JoinGroupRequest, assignors: tuple[str, ...], host: str) -> None:
        self.group_instance_id = req.group_instance_id
        self.client_id = req.client_id
        self.client_host = host
        self.session_timeout_ms = req.session_timeout_ms
        self.rebalance_timeout_ms = req.rebalance_timeout_ms
        self.protocol_type = req.protocol_type
        self.assignors = assignors
        if req.protocols:
            self.client_assigned = True
            self.protocols = _protocol_map(req.protocols)
            self.choose(assignors[0])
        else:
            self.client_assigned = False
            self.protocols = {}
            self.topics = tuple(sorted(set(req.topics)))

    def choose(self, protocol: str) -> None:
        """Client-assigned: take the subscription view from ``protocol``'s metadata."""
        if self.client_assigned and self.protocol_type == "consumer":
            self.topics = tuple(sorted(set(read_subscription(self.protocols.get(protocol, b"")))))

    def set_assignment_bytes(self, data: bytes) -> None:
        """Client-assigned: the leader's bytes for this member (and their decoded view)."""
        self.assignment_bytes = data
        self.assignment = read_assignment(data) if self.protocol_type == "consumer" else {}

    def matches(self, req: m.JoinGroupRequest, assignors: tuple[str, ...]) -> bool:
        """True if a rejoin changes nothing the assignment depends on (client-assigned: the
        same protocols with the same metadata, in the same order, as Kafka's ``matches``)."""
        if req.protocols:
            return (
                self.client_assigned is True
                and list(self.protocols.items()) == list(_protocol_map(req.protocols).items())
                and self.protocol_type == req.protocol_type
            )
        return (
            self.client_assigned is not True
            and self.topics == tuple(sorted(set(req.topics)))
            and self.assignors == assignors
            and self.protocol_type == req.protocol_type
        )

    def metadata(self, protocol: str | None) -> bytes:
        """The subscription bytes for ``protocol`` as Kafka stores and describes them."""
        if self.client_assigned is False:
            return encode_subscription(self.topics)
        return self.protocols.get(protocol or "", b"")

    def assignment_record(self) -> bytes:
        """The assignment bytes as Kafka stores and describes them."""
        if self.client_assigned is False:
            return encode_assignment(self.assignment)
        return self.assignment_bytes
