"""Which partition's log a client's record request may reach: the topic ACL, an unknown or
illegal topic name, and the internal topics no client may change. Shared by Produce, Fetch,
ListOffsets and DeleteRecords (:mod:`odradek.broker.produce`, :mod:`odradek.broker.fetch`,
:mod:`odradek.broker.data`).
"""

from __future__ import annotations

from odradek.broker.context import BrokerContext
from odradek.broker.errors import TopicAuthorizationError
from odradek.broker.security.authorizer import allowed
from odradek.protocol.acl import Operation, ResourceType
from odradek.storage.errors import InvalidTopicError, UnknownTopicOrPartitionError
from odradek.storage.log import Log
from odradek.storage.topics import is_internal, validate_topic_name

__all__ = ["client_writable_log", "partition_log"]


def partition_log(
    ctx: BrokerContext, topic: str, partition: int, operation: Operation = Operation.READ
) -> Log:
    """The partition's log, if the caller may do ``operation`` on its topic (ACLs)."""
    if not allowed(operation, ResourceType.TOPIC, topic):
        raise TopicAuthorizationError(f"not authorized to {operation.name} topic {topic}")
    try:
        return ctx.manager.partitions.get_log(topic, partition)
    except UnknownTopicOrPartitionError:
        validate_topic_name(topic)  # an illegal name is INVALID_TOPIC_EXCEPTION
        raise


def client_writable_log(
    ctx: BrokerContext,
    topic: str,
    partition: int,
    action: str = "append to",
    operation: Operation = Operation.WRITE,
) -> Log:
    """The log a client may change (produce, delete records): never an internal topic
    (Kafka's ReplicaManager answers INVALID_TOPIC_EXCEPTION); the coordinator writes those
    through Log.append."""
    if is_internal(topic):
        raise InvalidTopicError(f"Cannot {action} internal topic {topic}")
    return partition_log(ctx, topic, partition, operation)
