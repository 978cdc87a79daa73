"""One face over three unmodified Kafka clients, so a test can be parametrized over them:
confluent-kafka (librdkafka), kafka-python and aiokafka (driven on a private event loop).

Each :class:`KafkaClient` does admin, produce and assigned-consume calls the way an
application would, with the client's own API, and returns plain values: :class:`Rec` for
records, ``{partition: offset}`` for offsets. A failed call raises :class:`ClientError`
carrying the Kafka error code the client reported *and* the client's own exception type
name, so a test can assert both. Nothing here talks to the broker except through the client.
"""

from __future__ import annotations

from tests.broker.kafka.clients.aio import AioClient
from tests.broker.kafka.clients.base import ClientError, KafkaClient, Rec
from tests.broker.kafka.clients.confluent import ConfluentClient
from tests.broker.kafka.clients.kafka_python import KafkaPythonClient

__all__ = ["CLIENTS", "ClientError", "KafkaClient", "Rec", "make_client"]

CLIENTS: dict[str, type[KafkaClient]] = {
    c.name: c for c in (ConfluentClient, KafkaPythonClient, AioClient)
}


def make_client(name: str, bootstrap: str) -> KafkaClient:
    return CLIENTS[name](bootstrap)
