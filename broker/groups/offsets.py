"""The ``__consumer_offsets`` record format: Kafka's own schemas, byte for byte.

The topic is compacted; each record's key says what it is about, its value the latest state,
and a tombstone (null value) deletes it. Integers, strings, bytes and arrays are laid out as
:mod:`odradek.broker.groups.schema` says.

Keys (``OffsetCommitKey.json`` / ``GroupMetadataKey.json``; the int16 version picks the type)::

    offset commit   int16 version = 1 | string group | string topic | int32 partition
    group metadata  int16 version = 2 | string group

Kafka writes offset-commit keys at version 1 (version 0 has the same layout and is read too).
Key versions 3 and up belong to Kafka's KIP-848 groups: :func:`decode_key` returns None for
them and replay skips them.

Values (``OffsetCommitValue.json`` v3, written; v0..v3 read)::

    int16 version = 3 | int64 offset | int32 leaderEpoch | string metadata | int64 commitTimestamp
    (v0, v2: offset, metadata, commitTimestamp; v1: ... commitTimestamp, int64 expireTimestamp)

``GroupMetadataValue.json`` v3 (written; v0..v3 read)::

    int16 version = 3 | string protocolType | int32 generation | nullable string protocol |
    nullable string leader | int64 currentStateTimestamp (v2+) | array members:
        string memberId | nullable string groupInstanceId (v3+) | string clientId |
        string clientHost | int32 rebalanceTimeout (v1+) | int32 sessionTimeout |
        bytes subscription | bytes assignment

A member's ``subscription`` and ``assignment`` use Kafka's consumer protocol
(:mod:`odradek.broker.groups.consumer_protocol`). Those two byte strings are authoritative as
stored: a client-assigned group (Kafka clients) writes its members' bytes exactly as the
clients sent them (:attr:`MemberValue.subscription_bytes` and
:attr:`MemberValue.assignment_bytes`, kept on decode too), whatever their protocol type
("connect" metadata is not the consumer protocol). The decoded views (``topics``,
``assignment``) are best effort: bytes that do not decode as the consumer protocol give an
empty view, never an undecodable record.

A group lives in partition ``abs(java_string_hashcode(group)) % partitions`` with Kafka's
``Utils.abs``, which maps ``Integer.MIN_VALUE`` to 0 (Java's ``Math.abs`` would keep it
negative): see :func:`partition_for`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.broker.groups.consumer_protocol import (
    encode_assignment,
    encode_subscription,
    read_assignment,
    read_subscription,
)
from odradek.broker.groups.schema import (
    I16,
    I32,
    I64,
    Reader,
    RecordFormatError,
    bytes_field,
    string_field,
)
from odradek.storage.topics import OFFSETS_TOPIC

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "OFFSETS_TOPIC",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupKey",
    "GroupValue",
    "MemberValue",
    "OffsetKey",
    "OffsetValue",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "java_string_hashcode",
    "partition_for",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    as a signed int32."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFF_FFFF
    return h - (1 << 32) if h & 0x8000_0000 else h


def partition_for(group: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(group.hashCode()) % partitions`` (``abs(MIN_VALUE)`` is 0)."""
    h = java_string_hashcode(group)
    return (0 if h == -(2**31) else abs(h)) % partitions


# -- keys ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


def encode_offset_key(key: OffsetKey) -> bytes:
    return b"".join(
        (
            I16.pack(OFFSET_COMMIT_KEY_VERSION),
            string_field(key.group),
            string_field(key.topic),
            I32.pack(key.partition),
        )
    )


def encode_group_key(key: GroupKey) -> bytes:
    return I16.pack(GROUP_METADATA_KEY_VERSION) + string_field(key.group)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key's type from its version; None for versions this broker does not use (KIP-848)."""
    reader = Reader(data)
    version = reader.i16()
    if version in (0, 1):
        key: OffsetKey | GroupKey = OffsetKey(reader.string(), reader.string(), reader.i32())
    elif version == 2:
        key = GroupKey(reader.string())
    else:
        return None
    reader.end()
    return key


# -- offset commit values --------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetValue:
    offset: int  # the next offset to read
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


def encode_offset_value(value: OffsetValue) -> bytes:
    return b"".join(
        (
            I16.pack(OFFSET_COMMIT_VALUE_VERSION),
            I64.pack(value.offset),
            I32.pack(value.leader_epoch),
            string_field(value.metadata),
            I64.pack(value.commit_timestamp_ms),
        )
    )


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = Reader(data)
    version = reader.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unsupported OffsetCommitValue version {version}")
    offset = reader.i64()
    epoch = reader.i32() if version >= 3 else -1
    metadata = reader.string()
    timestamp = reader.i64()
    if version == 1:
        reader.i64()  # expireTimestamp: Kafka ignores it since 2.1 (KIP-211), and so do we
    reader.end()
    return OffsetValue(offset, epoch, metadata, timestamp)


# -- group metadata values -------------------------------------------------------------------


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    session_timeout_ms: int = 45_000
    topics: tuple[str, ...] = ()  # the subscription (a view of subscription_bytes)
    assignment: dict[str, list[int]] = field(default_factory=dict)  # a view, likewise
    # The bytes as stored (None when encoding: the consumer-protocol encoding of the views).
    subscription_bytes: bytes | None = field(default=None, compare=False)
    assignment_bytes: bytes | None = field(default=None, compare=False)


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberValue, ...] = ()


def encode_group_value(value: GroupValue) -> bytes:
    parts = [
        I16.pack(GROUP_METADATA_VALUE_VERSION),
        string_field(value.protocol_type),
        I32.pack(value.generation),
        string_field(value.protocol),
        string_field(value.leader),
        I64.pack(value.current_state_timestamp_ms),
        I32.pack(len(value.members)),
    ]
    for member in value.members:
        subscription = member.subscription_bytes
        assignment = member.assignment_bytes
        parts += (
            string_field(member.member_id),
            string_field(member.group_instance_id),
            string_field(member.client_id),
            string_field(member.client_host),
            I32.pack(member.rebalance_timeout_ms),
            I32.pack(member.session_timeout_ms),
            bytes_field(
                encode_subscription(member.topics) if subscription is None else subscription
            ),
            bytes_field(encode_assignment(member.assignment) if assignment is None else assignment),
        )
    return b"".join(parts)


def decode_group_value(data: bytes) -> GroupValue:
    reader = Reader(data)
    version = reader.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = reader.string()
    generation = reader.i32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    timestamp = reader.i64() if version >= 2 else -1
    members = []
    for _ in range(reader.count()):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.i32() if version >= 1 else -1
        session_timeout = reader.i32()
        subscription = reader.bytes_()
        assignment = reader.bytes_()
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout if rebalance_timeout >= 0 else session_timeout,
                session_timeout,
                read_subscription(subscription),
                read_assignment(assignment),
                subscription,
                assignment,
            )
        )
    reader.end()
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))
