"""Fixtures for the security tests: certificates (module-wide) and a broker with a plaintext
and a TLS listener."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess

KEYSTORE_SECRET = "keystore-secret-value"


def tls_overrides(certs: Path, client_auth: str = "requested") -> list[str]:
    return [
        f"ssl.keystore.location={certs / 'server.pem'}",
        f"ssl.truststore.location={certs / 'ca.pem'}",
        f"ssl.client.auth={client_auth}",
        "ssl.principal.mapping.rules=RULE:^CN=([^,]*),.*$/$1/L,DEFAULT",
        f"ssl.keystore.password={KEYSTORE_SECRET}",  # accepted, unused (PEM): never shown
    ]


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[BrokerProcess]:
    logs = tmp_path_factory.mktemp("tls") / "logs"
    broker = BrokerProcess([logs], listeners=("PLAINTEXT", "SSL"), overrides=tls_overrides(certs))
    broker.start()
    yield broker
    broker.stop()


def create_scram_user(broker: BrokerProcess, user: str, password: str) -> None:
    """Give ``user`` SCRAM-SHA-256 and -512 credentials through Kafka's admin API
    (confluent-kafka's AlterUserScramCredentials, over the plaintext listener)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # the plaintext listener
    upserts = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(timeout=15)


USER, USER_PASSWORD = "alice", "s3cret horse staple"


def start_secure_broker(logs: Path, certs: Path) -> BrokerProcess:
    """A started broker with a listener of each security protocol (TLS client certificates
    requested, PLAIN and both SCRAMs enabled) and the SCRAM user ``USER``."""
    broker = BrokerProcess(
        [logs],
        listeners=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        overrides=[
            *tls_overrides(certs, client_auth="requested"),
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "connection.failed.authentication.delay.ms=50",
        ],
    )
    broker.start()
    try:
        create_scram_user(broker, USER, USER_PASSWORD)
    except BaseException:
        broker.stop()
        raise
    return broker
