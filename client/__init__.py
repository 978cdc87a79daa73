"""odradek's Python client: blocking and async producers, consumers, admin and a low-level
client, over the native protocol (:mod:`protocol`). See DESIGN §8 and the module docs.

Blocking: :class:`Client`, :class:`Producer`, :class:`Consumer`, :class:`Admin`.
Async (anyio: asyncio, uvloop, trio): :class:`AsyncClient`, :class:`AsyncProducer`,
:class:`AsyncConsumer`, :class:`AsyncAdmin`. Errors: :mod:`client.errors`.
"""

from __future__ import annotations

from client import errors
from client.admin import Admin, AsyncAdmin
from client.async_client import AsyncClient
from client.async_consumer import AsyncConsumer
from client.async_producer import AsyncProducer, DeliveryHandle
from client.consumer import Consumer
from client.errors import *  # noqa: F403 - one class per error code
from client.group_ops import (
    GroupDescription,
    GroupListing,
    MemberDescription,
    OffsetAndMetadata,
)
from client.partitioner import murmur2
from client.producer import Producer
from client.sync_client import Client
from client.types import (
    BrokerMetadata,
    ClusterMetadata,
    ConfigEntry,
    ConsumerRecord,
    FetchedPartition,
    LogDirDescription,
    NewTopic,
    OffsetAndTimestamp,
    PartitionInfo,
    RecordMetadata,
    TopicDescription,
    TopicMetadata,
    TopicPartition,
)

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncClient",
    "AsyncConsumer",
    "AsyncProducer",
    "Client",
    "Consumer",
    "DeliveryHandle",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "OffsetAndMetadata",
    "Producer",
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigEntry",
    "ConsumerRecord",
    "FetchedPartition",
    "LogDirDescription",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "RecordMetadata",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartition",
    "errors",
    "murmur2",
    *errors.__all__,  # KafkaError, KafkaConnectionError, ..., for_code, one class per code
]
