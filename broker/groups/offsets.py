"""The ``__consumer_offsets`` record format: Kafka's own schemas, byte for byte.

The topic is compacted; each record's key says what it is about, its value the latest state,
and a tombstone (null value) deletes it. Every integer is big-endian; a ``string`` is an int16
length then UTF-8 bytes (``-1`` = null, only where the schema allows it); ``bytes`` is an int32
length then the bytes; an array is an int32 count then the elements.

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

A member's ``subscription`` and ``assignment`` use Kafka's consumer protocol (v0 written,
later versions read; only the leading fields matter)::

    subscription  int16 version | array of string topics | nullable bytes userData
    assignment    int16 version | array of (string topic | array of int32 partitions) |
                  nullable bytes userData

Those two byte strings are authoritative as stored: a client-assigned group (Kafka clients)
writes its members' bytes exactly as the clients sent them (:attr:`MemberValue.subscription_bytes`
and :attr:`MemberValue.assignment_bytes`, kept on decode too), whatever their protocol type
("connect" metadata is not the consumer protocol). The decoded views (``topics``,
``assignment``) are best effort: bytes that do not decode as the consumer protocol give an
empty view, never an undecodable record.

A group lives in partition ``abs(java_string_hashcode(group)) % partitions`` with Kafka's
``Utils.abs``, which maps ``Integer.MIN_VALUE`` to 0 (Java's ``Math.abs`` would keep it
negative): see :func:`partition_for`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

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
    "RecordFormatError",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_assignment",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "encode_subscription",
    "java_string_hashcode",
    "partition_for",
    "read_assignment",
    "read_subscription",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
CONSUMER_PROTOCOL_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not decode under the schema its version names."""


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
            _I16.pack(OFFSET_COMMIT_KEY_VERSION),
            _string(key.group),
            _string(key.topic),
            _I32.pack(key.partition),
        )
    )


def encode_group_key(key: GroupKey) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(key.group)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key's type from its version; None for versions this broker does not use (KIP-848)."""
    reader = _Reader(data)
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
            _I16.pack(OFFSET_COMMIT_VALUE_VERSION),
            _I64.pack(value.offset),
            _I32.pack(value.leader_epoch),
            _string(value.metadata),
            _I64.pack(value.commit_timestamp_ms),
        )
    )


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = _Reader(data)
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
        _I16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(value.protocol_type),
        _I32.pack(value.generation),
        _string(value.protocol),
        _string(value.leader),
        _I64.pack(value.current_state_timestamp_ms),
        _I32.pack(len(value.members)),
    ]
    for member in value.members:
        subscription = member.subscription_bytes
        assignment = member.assignment_bytes
        parts += (
            _string(member.member_id),
            _string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _I32.pack(member.rebalance_timeout_ms),
            _I32.pack(member.session_timeout_ms),
            _bytes(encode_subscription(member.topics) if subscription is None else subscription),
            _bytes(encode_assignment(member.assignment) if assignment is None else assignment),
        )
    return b"".join(parts)


def decode_group_value(data: bytes) -> GroupValue:
    reader = _Reader(data)
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


# -- the consumer protocol (a member's subscription and assignment) ------------------------


def encode_subscription(topics: tuple[str, ...] | list[str]) -> bytes:
    parts = [_I16.pack(CONSUMER_PROTOCOL_VERSION), _I32.pack(len(topics))]
    parts += [_string(t) for t in topics]
    parts.append(_I32.pack(-1))  # userData: null
    return b"".join(parts)


def decode_subscription(data: bytes) -> tuple[str, ...]:
    reader = _Reader(data)
    reader.i16()  # later versions only append fields (owned partitions, generation, rack)
    return tuple(reader.string() for _ in range(reader.count()))


def encode_assignment(assignment: dict[str, list[int]]) -> bytes:
    parts = [_I16.pack(CONSUMER_PROTOCOL_VERSION), _I32.pack(len(assignment))]
    for topic, partitions in assignment.items():
        parts += (_string(topic), _I32.pack(len(partitions)))
        parts += [_I32.pack(p) for p in partitions]
    parts.append(_I32.pack(-1))  # userData: null
    return b"".join(parts)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    reader = _Reader(data)
    reader.i16()
    result: dict[str, list[int]] = {}
    for _ in range(reader.count()):
        topic = reader.string()
        result[topic] = [reader.i32() for _ in range(reader.count())]
    return result


def read_subscription(data: bytes) -> tuple[str, ...]:
    """The topics of consumer-protocol subscription bytes; ``()`` if they do not decode."""
    try:
        return decode_subscription(data) if data else ()
    except RecordFormatError:
        return ()


def read_assignment(data: bytes) -> dict[str, list[int]]:
    """The partitions of consumer-protocol assignment bytes; ``{}`` if they do not decode."""
    try:
        return decode_assignment(data) if data else {}
    except RecordFormatError:
        return {}


# -- primitives --------------------------------------------------------------------------------


def _string(text: str | None) -> bytes:
    if text is None:
        return _I16.pack(-1)
    data = text.encode()
    if len(data) > 0x7FFF:
        raise RecordFormatError(f"string of {len(data)} bytes exceeds the int16 length")
    return _I16.pack(len(data)) + data


def _bytes(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


class _Reader:
    """Reads the primitives above from one buffer; any overrun is a RecordFormatError."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise RecordFormatError(f"record cut short: need {size} bytes at {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.data):
            raise RecordFormatError(f"invalid array length {n}")
        return n

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise RecordFormatError("null where the schema requires a string")
        return text

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self._take(n)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(f"{len(self.data) - self.pos} trailing bytes")
