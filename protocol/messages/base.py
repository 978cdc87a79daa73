"""Scalar types, enums, errors and base structs shared by every message module."""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, ClassVar

from msgspec import Meta, Struct

from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import FrameError

Int8 = Annotated[int, Meta(ge=-(2**7), le=2**7 - 1)]
Int16 = Annotated[int, Meta(ge=-(2**15), le=2**15 - 1)]
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
Size32 = Annotated[int, Meta(ge=0, le=2**31 - 1)]  # byte counts, waits: never negative
Port = Annotated[int, Meta(ge=0, le=65535)]
Version = Annotated[int, Meta(ge=0, le=2**15 - 1)]
Str = Annotated[str, Meta(max_length=2**15 - 1)]  # Kafka strings are int16-length
Assignment = dict[Str, list[Int32]]  # topic -> partitions

ACKS_NONE, ACKS_LEADER, ACKS_ALL = 0, 1, -1
VALID_ACKS = (ACKS_NONE, ACKS_LEADER, ACKS_ALL)
LATEST_TIMESTAMP = -1  # ListOffsets: the next offset to be written (the high watermark)
EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
MAX_TIMESTAMP = -3  # ListOffsets: the first record with the largest timestamp (KIP-734)


class ApiKey(IntEnum):
    """Kafka's api keys (the header tag)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    DESCRIBE_CONFIGS = 32
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    ALTER_CONFIGS = 44  # incremental (set/delete): Kafka's IncrementalAlterConfigs key


class ConfigResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class AlterConfigOp(IntEnum):
    SET = 0
    DELETE = 1


class MalformedMessage(FrameError):
    """A frame body that is not a valid message: the broker closes the connection.

    ``api_key``, ``version`` and ``correlation_id`` are set when the header got that far
    (``None`` otherwise); ``error_code`` is the Kafka code that describes the failure."""

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_REQUEST

    def __init__(
        self,
        reason: str,
        *,
        api_key: int | None = None,
        version: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id


class UnsupportedVersion(MalformedMessage):
    """A known api key at a version this side does not speak. The frame boundaries are intact,
    so the broker answers with ``error_response(...UNSUPPORTED_VERSION)`` and keeps going."""

    error_code: ClassVar[ErrorCode] = ErrorCode.UNSUPPORTED_VERSION


class _Item(Struct, array_like=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A nested element of a message (encoded as a msgpack array, fields in order)."""


class Message(_Item, kw_only=True):
    version: Version = 0
    correlation_id: Int32  # required: a header without one is malformed

    def declared_raw_bytes(self) -> int:
        """Bytes of the raw tail this header announces (0 but for Produce/Fetch records)."""
        return 0


class Request(Message, kw_only=True):
    pass


class Response(Message, kw_only=True):
    error_code: Int16 = 0  # whole-request failures; item errors live in the items
    error_message: Str | None = None
