"""The odradek client over TLS and SASL, against a real broker with a listener of each security
protocol: both faces produce and consume over ``SSL``, ``SASL_PLAINTEXT`` and ``SASL_SSL``
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, a client certificate), large frames cross the blocking
face's TLS channel while other threads write, and the failures are final and say why: an
untrusted broker certificate, a wrong password, a plaintext client on the TLS port. Kafka's
client properties map onto the options, and no password shows in a ``repr`` or an error."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from odradek.client import (
    Admin,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    KafkaConnectionError,
    NewTopic,
    Producer,
    SaslAuthenticationFailedError,
    TopicPartition,
)
from odradek.client.config import ClientConfig
from odradek.client.errors import SslAuthenticationError
from odradek.client.security import options_from_properties
from tests.broker.security.conftest import USER_PASSWORD, start_secure_broker, tls_overrides
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

PASSWORD = USER_PASSWORD
WRONG = "not-the-password"


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[BrokerProcess]:
    broker = start_secure_broker(tmp_path_factory.mktemp("secure") / "logs", certs)
    yield broker
    broker.stop()


def _options(
    broker: BrokerProcess, certs: Path, protocol: str, mechanism: str = "SCRAM-SHA-256"
) -> dict[str, object]:
    options: dict[str, object] = {
        "bootstrap_servers": f"127.0.0.1:{broker.ports[protocol]}",
        "security_protocol": protocol,
        "request_timeout_ms": 10_000,
    }
    if "SSL" in protocol:
        options["ssl_cafile"] = str(certs / "ca.pem")
    if protocol.startswith("SASL"):
        options.update(
            sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=PASSWORD
        )
    return options


SECURED = [
    pytest.param(("SSL", "PLAIN"), id="SSL"),
    pytest.param(("SASL_PLAINTEXT", "SCRAM-SHA-256"), id="SASL_PLAINTEXT-SCRAM-SHA-256"),
    pytest.param(("SASL_SSL", "SCRAM-SHA-512"), id="SASL_SSL-SCRAM-SHA-512"),
    pytest.param(("SASL_SSL", "PLAIN"), id="SASL_SSL-PLAIN"),
]


@pytest.mark.parametrize("secured", SECURED)
def test_blocking_faces_produce_and_consume(
    secure_broker: BrokerProcess, certs: Path, secured: tuple[str, str]
) -> None:
    options = _options(secure_broker, certs, *secured)
    topic = f"blocking-{uuid.uuid4().hex[:8]}"
    with Admin(**options) as admin:  # type: ignore[arg-type]
        admin.create_topics([NewTopic(topic, 2)])
    with Producer(**options, linger_ms=5) as producer:  # type: ignore[arg-type]
        futures = [producer.send(topic, b"v%d" % i, partition=i % 2) for i in range(500)]
        producer.flush()
    assert sorted(f.result().offset for f in futures) == sorted(list(range(250)) * 2)
    with Consumer(
        topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=5000,
        **options,  # type: ignore[arg-type]
    ) as consumer:  # fmt: skip
        values = set()
        for record in consumer:
            values.add(record.value)
            if len(values) == 500:
                break
        consumer.commit()
    assert values == {b"v%d" % i for i in range(500)}


@pytest.mark.anyio
@pytest.mark.parametrize("secured", SECURED[1:3])
async def test_async_faces_produce_and_consume(
    secure_broker: BrokerProcess, certs: Path, secured: tuple[str, str]
) -> None:
    options = _options(secure_broker, certs, *secured)
    topic = f"async-{uuid.uuid4().hex[:8]}"
    async with AsyncProducer(**options) as producer:  # type: ignore[arg-type]
        for i in range(300):
            await producer.send(topic, b"a%d" % i, partition=0)
        await producer.flush()
    async with AsyncConsumer(
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        **options,  # type: ignore[arg-type]
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        values = []
        with anyio.fail_after(20):
            while len(values) < 300:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    values.extend(r.value for r in records)
    assert values == [b"a%d" % i for i in range(300)]


def test_large_frames_cross_the_tls_channel_while_threads_write(
    secure_broker: BrokerProcess, certs: Path
) -> None:
    """Produce requests of ~1 MiB from four threads at once and Fetch answers of several
    MiB, over SASL_SSL: the reader thread decrypts while the writers encrypt."""
    options = _options(secure_broker, certs, "SASL_SSL", "SCRAM-SHA-512")
    topic = f"large-{uuid.uuid4().hex[:8]}"
    value = bytes(range(256)) * 1000  # 256,000 bytes: a few per request
    with Producer(**options, linger_ms=20, max_request_size=4 << 20) as producer:  # type: ignore[arg-type]

        def send(worker: int) -> None:
            for i in range(25):
                producer.send(topic, value, key=b"%d-%d" % (worker, i), partition=0)

        threads = [threading.Thread(target=send, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producer.flush()
    with Consumer(
        auto_offset_reset="earliest", consumer_timeout_ms=5000, fetch_max_bytes=16 << 20,
        max_partition_fetch_bytes=8 << 20, **options,  # type: ignore[arg-type]
    ) as consumer:  # fmt: skip
        consumer.assign([TopicPartition(topic, 0)])
        keys = set()
        for record in consumer:
            assert record.value == value
            keys.add(record.key)
            if len(keys) == 100:
                break
    assert len(keys) == 100


def test_mutual_tls_needs_the_client_certificate(
    tmp_path_factory: pytest.TempPathFactory, certs: Path
) -> None:
    broker = BrokerProcess(
        [tmp_path_factory.mktemp("mtls") / "logs"],
        listeners=("PLAINTEXT", "SSL"),
        overrides=tls_overrides(certs, client_auth="required"),
    )
    broker.start()
    try:
        options = _options(broker, certs, "SSL")
        options["request_timeout_ms"] = 1500
        with Admin(**options) as admin, pytest.raises(KafkaConnectionError):  # type: ignore[arg-type]
            admin.list_topics()  # the broker ends the handshake
        options.update(ssl_certfile=str(certs / "alice.pem"), ssl_keyfile=str(certs / "alice.key"))
        with Admin(**options) as admin:  # type: ignore[arg-type]
            admin.create_topics([NewTopic("mtls", 1)])
            assert "mtls" in admin.list_topics()
    finally:
        broker.stop()


def test_a_wrong_password_fails_at_once_and_is_never_shown(
    secure_broker: BrokerProcess, certs: Path
) -> None:
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        options = _options(secure_broker, certs, "SASL_SSL", mechanism)
        options["sasl_plain_password"] = WRONG
        options["request_timeout_ms"] = 60_000  # a retried failure would take this long
        started_s = time.monotonic()
        with (
            Admin(**options) as admin,  # type: ignore[arg-type]
            pytest.raises(SaslAuthenticationFailedError) as failure,
        ):
            admin.list_topics()
        assert time.monotonic() - started_s < 30  # final: not retried until the timeout
        assert WRONG not in str(failure.value) and PASSWORD not in str(failure.value)
        assert WRONG not in repr(admin.config) and PASSWORD not in repr(admin.config)
    failures = secure_broker.wait_for_events("authentication failed", count=2)
    assert {e.get("user") for e in failures} == {"alice"}
    assert not [line for line in secure_broker.lines if WRONG in str(line)]


def test_an_untrusted_broker_certificate_fails_with_the_reason(
    secure_broker: BrokerProcess, certs: Path
) -> None:
    options = _options(secure_broker, certs, "SSL")
    options["ssl_cafile"] = str(certs / "other-ca.pem")
    with (
        Admin(**options) as admin,  # type: ignore[arg-type]
        pytest.raises(SslAuthenticationError, match="certificate verify failed"),
    ):
        admin.list_topics()


def test_a_plaintext_client_on_the_tls_port_cannot_connect(secure_broker: BrokerProcess) -> None:
    bootstrap = f"127.0.0.1:{secure_broker.ports['SSL']}"
    with Admin(bootstrap, request_timeout_ms=1500) as admin, pytest.raises(KafkaConnectionError):
        admin.list_topics()


def test_kafka_properties_map_onto_the_options(certs: Path) -> None:
    options = options_from_properties(
        {
            "security.protocol": "sasl_ssl",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs / "ca.pem"),
            "ssl.endpoint.identification.algorithm": "",
            "sasl.mechanism": "scram-sha-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="p\\"w";',
        }
    )
    assert options == {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(certs / "ca.pem"),
        "ssl_check_hostname": False,
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 'p\\"w',
    }
    config = ClientConfig(bootstrap_servers="h:1", **options)
    assert config.ssl_context is not None and not config.ssl_context.check_hostname
    librdkafka = options_from_properties(
        {"ssl.ca.location": "ca.pem", "sasl.username": "u", "sasl.password": "p"}
    )
    assert librdkafka == {
        "ssl_cafile": "ca.pem",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
    }
    with pytest.raises(ValueError, match=r"'ssl\.truststore\.locaton'"):
        options_from_properties({"ssl.truststore.locaton": "ca.pem"})
    with pytest.raises(ValueError, match="only PEM"):
        options_from_properties({"ssl.keystore.type": "JKS"})


def test_bad_security_options_name_the_option(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="security_protocol"):
        ClientConfig(bootstrap_servers="h:1", security_protocol="TLS")
    with pytest.raises(ValueError, match="sasl_mechanism"):
        ClientConfig(
            bootstrap_servers="h:1", security_protocol="SASL_SSL", sasl_mechanism="GSSAPI",
            sasl_plain_username="u", sasl_plain_password="p",
        )  # fmt: skip
    with pytest.raises(ValueError, match="sasl_plain_username"):
        ClientConfig(bootstrap_servers="h:1", security_protocol="SASL_PLAINTEXT")
    with pytest.raises(ValueError, match="ssl_cafile"):
        ClientConfig(
            bootstrap_servers="h:1", security_protocol="SSL", ssl_cafile=str(tmp_path / "no.pem")
        )
    secret = "keypass-123"
    with pytest.raises(ValueError, match="ssl_certfile") as failure:
        ClientConfig(
            bootstrap_servers="h:1", security_protocol="SSL",
            ssl_certfile=str(tmp_path / "no.pem"), ssl_password=secret,
        )  # fmt: skip
    assert secret not in str(failure.value)
