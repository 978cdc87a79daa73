"""Fixtures for the security tests: certificates (module-wide) and a broker with a plaintext
and a TLS listener."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.security.certs import make_certs
from tests.broker_process import BrokerProcess

KEYSTORE_SECRET = "keystore-secret-value"


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


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
