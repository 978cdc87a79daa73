"""Kafka's protocol error codes: the numbers and names of Kafka's ``Errors`` enum.

Every response carries these codes (top level and/or per item). The numbers are part of the
wire contract and never change; the descriptions are ours (short paraphrases) and the
``retriable`` flag follows Kafka's (whether a client may simply retry the same request).

Error codes travel as plain ``int`` on the wire so that a peer sending a code this table does
not know yet still decodes; :meth:`ErrorCode.from_code` maps an unknown number to
``UNKNOWN_SERVER_ERROR`` exactly as Kafka's ``Errors.forCode`` does.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ErrorCode", "KafkaProtocolError", "raise_for_error"]


class ErrorCode(IntEnum):
    """A Kafka error code, with ``retriable`` and ``description`` attributes."""

    retriable: bool
    description: str

    def __new__(cls, code: int, retriable: bool, description: str) -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.description = description
        return member

    @classmethod
    def from_code(cls, code: int) -> ErrorCode:
        """The member for ``code``; an unknown code becomes ``UNKNOWN_SERVER_ERROR``."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR

    UNKNOWN_SERVER_ERROR = (-1, False, "The server hit an unexpected error handling the request.")
    NONE = (0, False, "")
    OFFSET_OUT_OF_RANGE = (1, False, "The offset is outside the range the server holds.")
    CORRUPT_MESSAGE = (2, True, "A record batch failed its CRC, its size checks, or is corrupt.")
    UNKNOWN_TOPIC_OR_PARTITION = (3, True, "This server does not host this topic-partition.")
    INVALID_FETCH_SIZE = (4, False, "The requested fetch size is invalid.")
    LEADER_NOT_AVAILABLE = (5, True, "The topic-partition has no leader right now.")
    NOT_LEADER_OR_FOLLOWER = (6, True, "This server is not the leader for the topic-partition.")
    REQUEST_TIMED_OUT = (7, True, "The request timed out.")
    BROKER_NOT_AVAILABLE = (8, False, "The broker is not available.")
    REPLICA_NOT_AVAILABLE = (9, True, "The replica is not available for the topic-partition.")
    MESSAGE_TOO_LARGE = (10, False, "A record batch is larger than the server accepts.")
    STALE_CONTROLLER_EPOCH = (11, False, "The controller moved to another broker.")
    OFFSET_METADATA_TOO_LARGE = (12, False, "The offset commit metadata is too large.")
    NETWORK_EXCEPTION = (13, True, "The server disconnected before a response was received.")
    COORDINATOR_LOAD_IN_PROGRESS = (14, True, "The coordinator is still loading its state.")
    COORDINATOR_NOT_AVAILABLE = (15, True, "The coordinator is not available.")
    NOT_COORDINATOR = (16, True, "This is not the correct coordinator.")
    INVALID_TOPIC_EXCEPTION = (17, False, "The topic name is invalid.")
    RECORD_LIST_TOO_LARGE = (18, False, "A record batch is larger than the segment size.")
    NOT_ENOUGH_REPLICAS = (19, True, "Fewer in-sync replicas than required.")
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (20, True, "Appended, but to fewer in-sync replicas.")
    INVALID_REQUIRED_ACKS = (21, False, "acks must be 0, 1 or -1 (all).")
    ILLEGAL_GENERATION = (22, False, "The group generation id is not current.")
    INCONSISTENT_GROUP_PROTOCOL = (
        23,
        False,
        "The member's protocols are incompatible with the group's (or empty).",
    )
    INVALID_GROUP_ID = (24, False, "The group id is invalid.")
    UNKNOWN_MEMBER_ID = (25, False, "The coordinator does not know this member.")
    INVALID_SESSION_TIMEOUT = (26, False, "The session timeout is outside the broker's range.")
    REBALANCE_IN_PROGRESS = (27, False, "The group is rebalancing; the member must rejoin.")
    INVALID_COMMIT_OFFSET_SIZE = (28, False, "The committed offset data size is invalid.")
    TOPIC_AUTHORIZATION_FAILED = (29, False, "Topic authorization failed.")
    GROUP_AUTHORIZATION_FAILED = (30, False, "Group authorization failed.")
    CLUSTER_AUTHORIZATION_FAILED = (31, False, "Cluster authorization failed.")
    INVALID_TIMESTAMP = (32, False, "A record timestamp is out of the accepted range.")
    UNSUPPORTED_SASL_MECHANISM = (33, False, "The SASL mechanism is not supported.")
    ILLEGAL_SASL_STATE = (34, False, "The request is invalid in the current SASL state.")
    UNSUPPORTED_VERSION = (35, False, "This version of the API is not supported.")
    TOPIC_ALREADY_EXISTS = (36, False, "A topic with this name already exists.")
    INVALID_PARTITIONS = (37, False, "The number of partitions is invalid.")
    INVALID_REPLICATION_FACTOR = (38, False, "The replication factor is invalid.")
    INVALID_REPLICA_ASSIGNMENT = (39, False, "The replica assignment is invalid.")
    INVALID_CONFIG = (40, False, "The configuration is invalid.")
    NOT_CONTROLLER = (41, True, "This is not the controller of the cluster.")
    INVALID_REQUEST = (42, False, "The request is malformed or not valid for this broker.")
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (43, False, "The message format does not support this.")
    POLICY_VIOLATION = (44, False, "The request violates the configured policy.")
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, False, "Out-of-order producer sequence number.")
    DUPLICATE_SEQUENCE_NUMBER = (46, False, "Duplicate producer sequence number.")
    INVALID_PRODUCER_EPOCH = (47, False, "The producer epoch is stale.")
    INVALID_TXN_STATE = (48, False, "Transactional operation in an invalid state.")
    INVALID_PRODUCER_ID_MAPPING = (49, False, "The producer id is not mapped to this txn id.")
    INVALID_TRANSACTION_TIMEOUT = (50, False, "The transaction timeout is too large.")
    CONCURRENT_TRANSACTIONS = (51, True, "Another operation on the transaction is ongoing.")
    TRANSACTION_COORDINATOR_FENCED = (52, False, "The transaction coordinator was fenced.")
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (53, False, "Transactional id authorization failed.")
    SECURITY_DISABLED = (54, False, "Security features are disabled.")
    OPERATION_NOT_ATTEMPTED = (55, False, "Not attempted because another item in it failed.")
    KAFKA_STORAGE_ERROR = (56, True, "Disk error accessing the log.")
    LOG_DIR_NOT_FOUND = (57, False, "The log directory is not in the broker configuration.")
    SASL_AUTHENTICATION_FAILED = (58, False, "SASL authentication failed.")
    UNKNOWN_PRODUCER_ID = (59, False, "The broker has no state for this producer id.")
    REASSIGNMENT_IN_PROGRESS = (60, False, "A partition reassignment is in progress.")
    DELEGATION_TOKEN_AUTH_DISABLED = (61, False, "Delegation tokens are disabled.")
    DELEGATION_TOKEN_NOT_FOUND = (62, False, "Delegation token not found.")
    DELEGATION_TOKEN_OWNER_MISMATCH = (63, False, "Not a valid delegation token owner/renewer.")
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = (64, False, "Delegation token requests not allowed.")
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = (65, False, "Delegation token authorization failed.")
    DELEGATION_TOKEN_EXPIRED = (66, False, "Delegation token expired.")
    INVALID_PRINCIPAL_TYPE = (67, False, "The principal type is not supported.")
    NON_EMPTY_GROUP = (68, False, "The group is not empty.")
    GROUP_ID_NOT_FOUND = (69, False, "The group id does not exist.")
    FETCH_SESSION_ID_NOT_FOUND = (70, True, "The fetch session id was not found.")
    INVALID_FETCH_SESSION_EPOCH = (71, True, "The fetch session epoch is invalid.")
    LISTENER_NOT_FOUND = (72, True, "No listener matches the one the request came in on.")
    TOPIC_DELETION_DISABLED = (73, False, "Topic deletion is disabled.")
    FENCED_LEADER_EPOCH = (74, True, "The leader epoch in the request is older than the broker's.")
    UNKNOWN_LEADER_EPOCH = (75, True, "The leader epoch in the request is newer than the broker's.")
    UNSUPPORTED_COMPRESSION_TYPE = (76, False, "The client does not support this compression.")
    STALE_BROKER_EPOCH = (77, False, "The broker epoch has changed.")
    OFFSET_NOT_AVAILABLE = (78, True, "The offset is not available yet.")
    MEMBER_ID_REQUIRED = (79, False, "The member must rejoin with the member id it was given.")
    PREFERRED_LEADER_NOT_AVAILABLE = (80, True, "The preferred leader is not available.")
    GROUP_MAX_SIZE_REACHED = (81, False, "The group has reached its maximum size.")
    FENCED_INSTANCE_ID = (82, False, "Another member registered this group.instance.id.")
    ELIGIBLE_LEADERS_NOT_AVAILABLE = (83, True, "No eligible partition leader is available.")
    ELECTION_NOT_NEEDED = (84, False, "Leader election is not needed.")
    NO_REASSIGNMENT_IN_PROGRESS = (85, False, "No partition reassignment is in progress.")
    GROUP_SUBSCRIBED_TO_TOPIC = (86, False, "The group is subscribed to the topic.")
    INVALID_RECORD = (87, False, "A record failed broker-side validation.")
    UNSTABLE_OFFSET_COMMIT = (88, True, "There are unstable offsets to clear first.")
    THROTTLING_QUOTA_EXCEEDED = (89, True, "The throttling quota was exceeded.")
    PRODUCER_FENCED = (90, False, "A newer producer with this transactional id exists.")
    RESOURCE_NOT_FOUND = (91, False, "The request named a resource that does not exist.")
    DUPLICATE_RESOURCE = (92, False, "The request named the same resource twice.")
    UNACCEPTABLE_CREDENTIAL = (93, False, "The credential is not acceptable.")
    INCONSISTENT_VOTER_SET = (94, False, "The sender or recipient is not an expected voter.")
    INVALID_UPDATE_VERSION = (95, False, "The update version is invalid.")
    FEATURE_UPDATE_FAILED = (96, False, "Updating the finalized features failed.")
    PRINCIPAL_DESERIALIZATION_FAILURE = (97, False, "The request principal did not decode.")
    SNAPSHOT_NOT_FOUND = (98, False, "The snapshot was not found.")
    POSITION_OUT_OF_RANGE = (99, False, "The snapshot position is out of range.")
    UNKNOWN_TOPIC_ID = (100, True, "This server does not host this topic id.")
    DUPLICATE_BROKER_REGISTRATION = (101, False, "This broker id is already in use.")
    BROKER_ID_NOT_REGISTERED = (102, False, "The broker id is not registered.")
    INCONSISTENT_TOPIC_ID = (103, True, "The log's topic id does not match the request's.")
    INCONSISTENT_CLUSTER_ID = (104, False, "The cluster id does not match the server's.")
    TRANSACTIONAL_ID_NOT_FOUND = (105, False, "The transactional id was not found.")
    FETCH_SESSION_TOPIC_ID_ERROR = (106, True, "Inconsistent topic id use in a fetch session.")
    INELIGIBLE_REPLICA = (107, False, "The new ISR contains an ineligible replica.")
    NEW_LEADER_ELECTED = (108, False, "The partition state changed but the leader moved.")
    OFFSET_MOVED_TO_TIERED_STORAGE = (109, False, "The offset moved to tiered storage.")
    FENCED_MEMBER_EPOCH = (110, False, "The member epoch is fenced; rejoin the group.")
    UNRELEASED_INSTANCE_ID = (111, False, "The instance id is still used by another member.")
    UNSUPPORTED_ASSIGNOR = (112, False, "The assignor is not supported by the group.")
    STALE_MEMBER_EPOCH = (113, False, "The member epoch is stale.")
    MISMATCHED_ENDPOINT_TYPE = (114, False, "The request reached an endpoint of the wrong type.")
    UNSUPPORTED_ENDPOINT_TYPE = (115, False, "This endpoint type is not supported.")
    UNKNOWN_CONTROLLER_ID = (116, False, "This controller id is not known.")


class KafkaProtocolError(Exception):
    """An error that maps to one :class:`ErrorCode` (raised by the broker's handlers, by the
    storage-to-protocol mapping, and by clients reading an error code from a response)."""

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        self.code = ErrorCode.from_code(int(code))
        self.message = message or self.code.description or self.code.name
        super().__init__(f"{self.code.name} ({int(self.code)}): {self.message}")

    @property
    def retriable(self) -> bool:
        return self.code.retriable

    def __reduce__(self) -> tuple[type[KafkaProtocolError], tuple[ErrorCode, str]]:
        return (type(self), (self.code, self.message))


def raise_for_error(code: int, message: str | None = None) -> None:
    """Raise :class:`KafkaProtocolError` unless ``code`` is ``NONE`` (0)."""
    if code != 0:
        raise KafkaProtocolError(code, message)
