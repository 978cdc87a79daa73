"""Kafka's consumer protocol: a member's subscription and assignment bytes, as a
``GroupMetadataValue`` stores them and JoinGroup and SyncGroup carry them (v0 written, later
versions read; only the leading fields matter)::

    subscription  int16 version | array of string topics | nullable bytes userData
    assignment    int16 version | array of (string topic | array of int32 partitions) |
                  nullable bytes userData

Primitives as :mod:`odradek.broker.groups.schema` lays them out. The ``read_`` functions are
best effort: bytes that do not decode as the consumer protocol (a "connect" group's metadata)
give an empty view, never an error.
"""

from __future__ import annotations

from odradek.broker.groups.schema import I16, I32, Reader, RecordFormatError, string_field

__all__ = [
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "read_assignment",
    "read_subscription",
]

CONSUMER_PROTOCOL_VERSION = 0


def encode_subscription(topics: tuple[str, ...] | list[str]) -> bytes:
    parts = [I16.pack(CONSUMER_PROTOCOL_VERSION), I32.pack(len(topics))]
    parts += [string_field(t) for t in topics]
    parts.append(I32.pack(-1))  # userData: null
    return b"".join(parts)


def decode_subscription(data: bytes) -> tuple[str, ...]:
    reader = Reader(data)
    reader.i16()  # later versions only append fields (owned partitions, generation, rack)
    return tuple(reader.string() for _ in range(reader.count()))


def encode_assignment(assignment: dict[str, list[int]]) -> bytes:
    parts = [I16.pack(CONSUMER_PROTOCOL_VERSION), I32.pack(len(assignment))]
    for topic, partitions in assignment.items():
        parts += (string_field(topic), I32.pack(len(partitions)))
        parts += [I32.pack(p) for p in partitions]
    parts.append(I32.pack(-1))  # userData: null
    return b"".join(parts)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    reader = Reader(data)
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
