"""TLS listeners with real clients: confluent-kafka and kafka-python produce and consume over
``SSL``, Metadata advertises the TLS listener to TLS clients, and handshakes that must fail
do (an untrusted server CA, an expired client certificate, a plaintext client on the TLS
port), each closing one connection with a logged reason while the broker goes on."""

from __future__ import annotations

import socket
import struct
import uuid
from pathlib import Path

import pytest

from tests.broker.security.conftest import KEYSTORE_SECRET
from tests.broker_process import BrokerProcess, wait_until

pytestmark = pytest.mark.slow


def _tls_bootstrap(broker: BrokerProcess) -> str:
    return f"127.0.0.1:{broker.ports['SSL']}"


def _handshake_failures(broker: BrokerProcess) -> list[str]:
    return [
        e["reason"]
        for e in broker.events("closing connection")
        if str(e.get("reason", "")).startswith("TLS handshake failed")
    ]


def test_confluent_kafka_over_tls(tls_broker: BrokerProcess, certs: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    security = {
        "bootstrap.servers": _tls_bootstrap(tls_broker),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs / "ca.pem"),
    }
    brokers = AdminClient(security).list_topics(timeout=15).brokers
    # a TLS client is told the TLS listener's address, not the plaintext one's
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", tls_broker.ports["SSL"])]
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    producer = Producer(security)
    for i in range(20):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer(security | {"group.id": "tls-group", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < 20:
            message = consumer.poll(15)
            assert message is not None, values
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(20)]


def test_kafka_python_with_a_client_certificate(tls_broker: BrokerProcess, certs: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    security = {
        "bootstrap_servers": _tls_bootstrap(tls_broker),
        "security_protocol": "SSL",
        "ssl_cafile": str(certs / "ca.pem"),
        "ssl_certfile": str(certs / "alice.pem"),
        "ssl_keyfile": str(certs / "alice.key"),
    }
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**security)
    sent = [producer.send(topic, b"m%d" % i).get(timeout=15) for i in range(5)]
    producer.close()
    assert [meta.offset for meta in sent] == list(range(5))
    consumer = KafkaConsumer(**security, consumer_timeout_ms=10_000, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = [record.value for _, record in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert values == [b"m%d" % i for i in range(5)]


def test_a_server_certificate_from_an_untrusted_ca_is_refused(
    tls_broker: BrokerProcess, certs: Path
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {
            "bootstrap.servers": _tls_bootstrap(tls_broker),
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs / "other-ca.pem"),
            "log_level": 0,
        }
    )
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_an_expired_client_certificate_is_refused(tls_broker: BrokerProcess, certs: Path) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    before = len(_handshake_failures(tls_broker))
    with pytest.raises(KafkaError):  # it cannot bootstrap
        KafkaProducer(
            bootstrap_servers=_tls_bootstrap(tls_broker),
            security_protocol="SSL",
            ssl_cafile=str(certs / "ca.pem"),
            ssl_certfile=str(certs / "expired.pem"),
            ssl_keyfile=str(certs / "expired.key"),
            bootstrap_timeout_ms=3000,
        )
    assert wait_until(lambda: len(_handshake_failures(tls_broker)) > before)
    assert "expired" in _handshake_failures(tls_broker)[-1]


def test_a_plaintext_client_on_the_tls_port_is_closed(tls_broker: BrokerProcess) -> None:
    before = len(_handshake_failures(tls_broker))
    # a Kafka ApiVersions v0 request, in clear: size, api key 18, version 0, id 1, no client id
    request = struct.pack(">hhih", 18, 0, 1, -1)
    with socket.create_connection(("127.0.0.1", tls_broker.ports["SSL"]), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        received = b""
        try:
            while chunk := sock.recv(4096):  # at most a TLS alert, then the broker closes
                received += chunk
        except ConnectionResetError:  # closed with our request unread: a reset
            pass
        assert not received or received[0] == 0x15, received  # 0x15: a TLS alert record
    assert wait_until(lambda: len(_handshake_failures(tls_broker)) > before)
    # the plaintext listener still serves
    with socket.create_connection(("127.0.0.1", tls_broker.ports["PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", sock.recv(4))[0]
        assert size > 0


def test_secrets_are_described_as_sensitive(tls_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": tls_broker.bootstrap})
    (future,) = admin.describe_configs([ConfigResource("broker", "1")]).values()
    entries = future.result(timeout=15)
    secret = entries["ssl.keystore.password"]
    assert secret.is_sensitive and secret.value is None
    assert entries["ssl.client.auth"].value == "requested"  # the others are shown
    assert not any(KEYSTORE_SECRET in line for line in tls_broker.raw_lines)
