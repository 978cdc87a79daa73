"""Exceptions the storage layer raises. The broker maps each to one Kafka error code, in one place.

| exception                      | Kafka error code               |
|--------------------------------|--------------------------------|
| InvalidTopicError              | INVALID_TOPIC_EXCEPTION (17)   |
| UnknownTopicOrPartitionError   | UNKNOWN_TOPIC_OR_PARTITION (3) |
| SegmentClosedError (a subclass)| UNKNOWN_TOPIC_OR_PARTITION (3) |
| TopicExistsError               | TOPIC_ALREADY_EXISTS (36)      |
| OffsetOutOfRangeError          | OFFSET_OUT_OF_RANGE (1)        |
| RecordTooLargeError            | MESSAGE_TOO_LARGE (10)         |
| InvalidConfigError             | INVALID_CONFIG (40)            |
| LogDirOfflineError             | KAFKA_STORAGE_ERROR (56)       |
| LogCorruptedError              | KAFKA_STORAGE_ERROR (56)       |
| PartitionLimitError            | INVALID_PARTITIONS (37)        |
| OutOfOrderSequenceError        | OUT_OF_ORDER_SEQUENCE_NUMBER (45) |
| InvalidProducerEpochError      | INVALID_PRODUCER_EPOCH (47)    |
| InvalidTxnStateError           | INVALID_TXN_STATE (48)         |
| protocol CorruptRecordError    | CORRUPT_MESSAGE (2)            |
"""

from __future__ import annotations

import errno
from pathlib import Path

__all__ = [
    "InvalidConfigError",
    "InvalidProducerEpochError",
    "InvalidTopicError",
    "InvalidTxnStateError",
    "LogCorruptedError",
    "LogDirOfflineError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionLimitError",
    "RecordTooLargeError",
    "SegmentClosedError",
    "StorageError",
    "TopicExistsError",
    "UnknownTopicOrPartitionError",
]


class StorageError(Exception):
    """Base class of every storage-layer error."""


class InvalidTopicError(StorageError):
    """A topic name that Kafka's rules reject; raised before anything touches the filesystem."""


class UnknownTopicOrPartitionError(StorageError):
    pass


class SegmentClosedError(UnknownTopicOrPartitionError):
    """A read reached a segment whose file was closed: its partition was deleted (or its log
    dir went offline) while the read was under way."""


class TopicExistsError(StorageError):
    pass


class OffsetOutOfRangeError(StorageError):
    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(StorageError):
    pass


class InvalidConfigError(StorageError):
    pass


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer's batch does not continue its sequence (a gap, or a new epoch
    not starting at 0): nothing of the append was written
    (:mod:`odradek.storage.producer_state`)."""


class InvalidProducerEpochError(StorageError):
    """An idempotent producer's batch carries an epoch older than the partition has seen."""


class InvalidTxnStateError(StorageError):
    """A transactional batch: this broker runs no transaction coordinator, so no transaction
    can be ongoing (Kafka's answer to a transactional write outside a verified transaction)."""


class PartitionLimitError(StorageError):
    """Creating the partitions asked for would pass ``max.broker.partitions``; nothing was
    created."""


class LogDirOfflineError(StorageError):
    """A ``log.dirs`` root that failed (missing, unwritable, I/O error) and was taken offline."""

    def __init__(self, log_dir: Path, reason: str) -> None:
        super().__init__(f"log dir {log_dir} is offline: {reason}")
        self.log_dir = log_dir
        self.reason = reason


class LogCorruptedError(StorageError):
    """A partition whose log is damaged where no crash could have torn it (see
    :mod:`odradek.storage.loader`): it stays offline, every file in place, until an operator
    runs ``odradek repair-log`` on its directory and restarts the broker."""

    def __init__(self, log_file: Path, position: int, reason: str) -> None:
        super().__init__(
            f"{log_file} is damaged at byte {position}: {reason}; the partition is offline, "
            f"its files untouched (see `odradek repair-log {log_file.parent}`)"
        )
        self.log_file = log_file
        self.position = position
        self.reason = reason


# Errors of the process, not of the disk: out of file descriptors or memory. They fail the
# operation that hit them but never take a log dir offline (the disk is fine).
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def is_resource_exhaustion(error: OSError) -> bool:
    """True for EMFILE / ENFILE / ENOMEM: the broker ran out, the log dir did not fail."""
    return error.errno in RESOURCE_ERRNOS
