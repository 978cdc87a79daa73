"""The one place where exceptions become Kafka error codes (docs/architecture.md §5)."""

from __future__ import annotations

from odradek.protocol.compression import CompressionError, DecompressionLimitError
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import CorruptRecordError, InvalidRecordError
from odradek.storage.errors import (
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidTopicError,
    InvalidTxnStateError,
    LogCorruptedError,
    LogDirOfflineError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    PartitionLimitError,
    RecordTooLargeError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)

__all__ = ["PolicyViolationError", "TopicAuthorizationError", "error_code_for"]


class TopicAuthorizationError(StorageError):
    """The caller may not do this to this topic (ACLs). A :class:`StorageError` only so that
    every handler's ``except StorageError`` answers it per partition, like the others."""


class PolicyViolationError(StorageError):
    """A request the topic's configuration forbids, as Kafka's ``PolicyViolationException``:
    DeleteRecords on a topic whose ``cleanup.policy`` leaves out ``delete``."""


_CODES: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (TopicAuthorizationError, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (PolicyViolationError, ErrorCode.POLICY_VIOLATION),
    (OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (InvalidRecordError, ErrorCode.INVALID_RECORD),  # before its base class
    (CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (DecompressionLimitError, ErrorCode.MESSAGE_TOO_LARGE),  # before its base class
    (CompressionError, ErrorCode.CORRUPT_MESSAGE),
    (UnknownTopicOrPartitionError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (TopicExistsError, ErrorCode.TOPIC_ALREADY_EXISTS),
    (InvalidConfigError, ErrorCode.INVALID_CONFIG),
    (LogDirOfflineError, ErrorCode.KAFKA_STORAGE_ERROR),
    (LogCorruptedError, ErrorCode.KAFKA_STORAGE_ERROR),
    (PartitionLimitError, ErrorCode.INVALID_PARTITIONS),
    (OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (OSError, ErrorCode.KAFKA_STORAGE_ERROR),
)


def error_code_for(exc: BaseException) -> ErrorCode:
    """Kafka's error code for an exception raised while serving a request."""
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR
