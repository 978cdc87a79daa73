"""odradek's Python client: blocking and async producers, consumers, admin and a low-level
client, over the native protocol (:mod:`odradek.protocol`). See docs/architecture.md §8 and the
module docs.

Blocking: :class:`Client`, :class:`Producer`, :class:`Consumer`, :class:`Admin`.
Async (anyio: asyncio, uvloop, trio): :class:`AsyncClient`, :class:`AsyncProducer`,
:class:`AsyncConsumer`, :class:`AsyncAdmin`. Errors: :mod:`odradek.client.errors`.
"""

from __future__ import annotations

from odradek.client import errors, types
from odradek.client.admin import Admin, AsyncAdmin
from odradek.client.async_client import AsyncClient
from odradek.client.async_consumer import AsyncConsumer
from odradek.client.async_producer import AsyncProducer
from odradek.client.blocking_client import Client
from odradek.client.config import ClientConfig, ConsumerConfig, ProducerConfig
from odradek.client.consumer import Consumer
from odradek.client.errors import *  # noqa: F403 - one class per error code
from odradek.client.futures import DeliveryHandle
from odradek.client.group_ops import (
    GroupDescription,
    GroupListing,
    MemberDescription,
    OffsetAndMetadata,
)
from odradek.client.partitioner import murmur2
from odradek.client.producer import Producer
from odradek.client.types import *  # noqa: F403 - the value types

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncClient",
    "AsyncConsumer",
    "AsyncProducer",
    "Client",
    "ClientConfig",
    "Consumer",
    "ConsumerConfig",
    "DeliveryHandle",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "OffsetAndMetadata",
    "Producer",
    "ProducerConfig",
    "errors",
    "murmur2",
    *types.__all__,  # TopicPartition, ConsumerRecord, RecordMetadata, ...
    *errors.__all__,  # KafkaError, KafkaConnectionError, ..., for_code, one class per code
]
