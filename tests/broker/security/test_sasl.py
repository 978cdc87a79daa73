"""SASL with real clients: users created through Kafka's admin API (confluent-kafka's
AlterUserScramCredentials over the plaintext listener), then confluent-kafka and kafka-python
authenticating with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over ``SASL_PLAINTEXT`` and
``SASL_SSL``, right and wrong passwords; no request from an unauthenticated connection
reaches a handler, for every api key; and no password is ever logged."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol import kafka
from odradek.protocol import messages as m
from odradek.protocol.sasl import ScramClient
from tests.broker.kafka.kwire import KafkaWire, api_versions_body
from tests.broker.security.conftest import create_scram_user, tls_overrides
from tests.broker.wire import Wire
from tests.broker_process import REPO, BrokerProcess, wait_until

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery staple"
WRONG = "Tr0ub4dor&3"
ALLOWED = {18, 17, 36}  # ApiVersions, SaslHandshake, SaslAuthenticate


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[BrokerProcess]:
    logs = tmp_path_factory.mktemp("sasl") / "logs"
    broker = BrokerProcess(
        [logs],
        listeners=("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"),
        overrides=[
            *tls_overrides(certs, client_auth="none"),
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "connection.failed.authentication.delay.ms=50",
        ],
    )
    broker.start()
    create_scram_user(broker, "alice", PASSWORD)
    yield broker
    broker.stop()


def _confluent(broker: BrokerProcess, listener: str, mechanism: str, password: str, certs: Path):
    config: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}",
        "security.protocol": listener,
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": password,
        "log_level": 0,
    }
    if listener == "SASL_SSL":
        config["ssl.ca.location"] = str(certs / "ca.pem")
    return config


def test_credentials_are_described_without_secrets(sasl_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(timeout=15)
    infos = sorted((i.mechanism.name, i.iterations) for i in described.scram_credential_infos)
    assert infos == [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)]
    stored = (sasl_broker.log_dirs[0] / "scram-credentials.json").read_text()
    assert "alice" in stored and PASSWORD not in stored
    assert (sasl_broker.log_dirs[0] / "scram-credentials.json").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_SSL", "PLAIN")],
)
def test_confluent_kafka_authenticates(
    sasl_broker: BrokerProcess, certs: Path, listener: str, mechanism: str
) -> None:
    from confluent_kafka import Consumer, Producer

    config = _confluent(sasl_broker, listener, mechanism, PASSWORD, certs)
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    for i in range(10):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer(config | {"group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < 10:
            message = consumer.poll(15)
            assert message is not None and message.error() is None, message
            values.append(message.value())
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(10)]
    assert wait_until(
        lambda: any(
            e.get("principal") == "User:alice" and e.get("mechanism") == mechanism
            for e in sasl_broker.events("authenticated")
        )
    )


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_kafka_python_authenticates(
    sasl_broker: BrokerProcess, certs: Path, listener: str, mechanism: str
) -> None:
    from kafka import KafkaProducer

    tls = {"ssl_cafile": str(certs / "ca.pem")} if listener == "SASL_SSL" else {}
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{sasl_broker.ports[listener]}",
        security_protocol=listener,
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=PASSWORD,
        **tls,
    )
    metadata = producer.send(f"kp-{uuid.uuid4().hex[:8]}", b"x").get(timeout=15)
    producer.close()
    assert metadata.offset == 0


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused(
    sasl_broker: BrokerProcess, certs: Path, mechanism: str
) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    before = len(sasl_broker.events("authentication failed"))
    errors: list[KafkaError] = []
    config = _confluent(sasl_broker, "SASL_PLAINTEXT", mechanism, WRONG, certs)
    admin = AdminClient(config | {"error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(1)  # serves error_cb
    refusals = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert refusals, errors  # librdkafka read the broker's SASL_AUTHENTICATION_FAILED
    assert "Authentication failed: invalid credentials" in refusals[0].str()
    assert wait_until(lambda: len(sasl_broker.events("authentication failed")) > before)
    failure = sasl_broker.events("authentication failed")[-1]
    assert failure["user"] == "alice" and failure["mechanism"] == mechanism
    assert failure["peer"].startswith("127.0.0.1:")


def test_kafka_python_wrong_password(sasl_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{sasl_broker.ports['SASL_PLAINTEXT']}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password=WRONG,
            bootstrap_timeout_ms=3000,
        )


def _default_request(api: Any, version: int) -> dict[str, Any]:
    return {f.name: f.default_value(version) for f in api.request if f.present(version)}


def test_no_request_reaches_a_handler_before_authentication(sasl_broker: BrokerProcess) -> None:
    port = sasl_broker.ports["SASL_PLAINTEXT"]
    refused = []
    for key, api in sorted(kafka.APIS.items()):
        if key in ALLOWED:
            continue
        version = api.versions[1]
        fields = _default_request(api, version)
        if api.name == "CreateTopics":  # would leave a trace if it reached the handler
            topic = {"name": "must-not-exist", "num_partitions": 1, "replication_factor": 1}
            fields["topics"] = [topic | {"assignments": [], "configs": []}]
        with KafkaWire(port) as wire:
            wire.send_body(api_versions_body())  # allowed: answered
            wire.recv_body()
            wire.send(key, version, fields)
            assert wire.closed_by_peer(), api.name
        refused.append(api.name)

    def logged(name: str) -> bool:  # the log is read on a thread: it may lag the close
        reasons = [str(e.get("reason")) for e in sasl_broker.events("closing connection")]
        return any(f"{name} before SASL authentication" in r for r in reasons)

    for name in refused:
        assert wait_until(lambda name=name: logged(name)), name
    assert not (sasl_broker.log_dirs[0] / "must-not-exist-0").exists()


def _native_scram(wire: Wire, password: str) -> int:
    """The native exchange, SCRAM-SHA-256, as alice; the last step's error code."""
    client = ScramClient("SCRAM-SHA-256", "alice", password, "native-nonce")
    handshake = wire.call(
        m.SaslHandshakeRequest(correlation_id=wire.cid(), mechanism="SCRAM-SHA-256")
    )
    assert handshake.error_code == 0 and "SCRAM-SHA-256" in handshake.mechanisms
    first = wire.call(
        m.SaslAuthenticateRequest(correlation_id=wire.cid(), auth_bytes=client.first())
    )
    assert first.error_code == 0, first
    final = wire.call(
        m.SaslAuthenticateRequest(
            correlation_id=wire.cid(), auth_bytes=client.final(first.auth_bytes)
        )
    )
    if final.error_code == 0:
        client.check(final.auth_bytes)
    return final.error_code


def test_the_native_protocol_authenticates(sasl_broker: BrokerProcess) -> None:
    port = sasl_broker.ports["SASL_PLAINTEXT"]
    with Wire(port) as wire:
        assert _native_scram(wire, PASSWORD) == 0
        assert wire.metadata().brokers[0].port == port  # served once authenticated
    with Wire(port) as wire:
        assert _native_scram(wire, WRONG) == 58  # SASL_AUTHENTICATION_FAILED
        assert wire.closed_by_peer()
    with Wire(port) as wire:  # nothing but the exchange before it
        wire.send(m.MetadataRequest(correlation_id=wire.cid()))
        assert wire.closed_by_peer()

    def logged() -> bool:  # the log is read on a thread: it may lag the close
        reasons = [str(e.get("reason")) for e in sasl_broker.events("closing connection")]
        return any("MetadataRequest before SASL authentication" in r for r in reasons)

    assert wait_until(logged)


def test_no_password_is_ever_logged_or_exported(sasl_broker: BrokerProcess) -> None:
    # runs last in this module: the right and wrong passwords above have been tried
    assert sasl_broker.events("authenticated") and sasl_broker.events("authentication failed")
    for line in sasl_broker.raw_lines:
        assert PASSWORD not in line and WRONG not in line, line
    url = f"http://127.0.0.1:{sasl_broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        scraped = response.read().decode()
    assert "odradek_" in scraped and PASSWORD not in scraped and WRONG not in scraped


def test_odradek_users_over_sasl_ssl(
    sasl_broker: BrokerProcess, certs: Path, tmp_path: Path
) -> None:
    """``odradek users list`` through the SASL_SSL listener, SCRAM-SHA-512, with Kafka's
    client properties in ``--command-config``."""
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={certs / 'ca.pem'}\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=alice\n"
        f"sasl.password={PASSWORD}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "users", "list", "--bootstrap-server",
         f"127.0.0.1:{sasl_broker.ports['SASL_SSL']}", "--command-config", str(config)],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "alice: SCRAM-SHA-256 (iterations 4096), SCRAM-SHA-512 (iterations 4096)" in done.stdout
