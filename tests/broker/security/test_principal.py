"""Principals: Kafka's mapping rules, and the principal a real TLS handshake with a client
certificate yields (the broker's transport on one end of a socket pair, Python's ssl client
on the other)."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import anyio
import pytest

from odradek.broker.config import load_config
from odradek.broker.security.principal import map_principal, parse_mapping_rules
from odradek.broker.security.tls import TlsTransport, server_context


@pytest.mark.parametrize(
    ("rules", "dn", "principal"),
    [
        ("DEFAULT", "CN=alice,OU=eng,O=example", "User:CN=alice,OU=eng,O=example"),
        ("RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/", "CN=alice,OU=eng,O=ex", "User:alice@eng"),
        ("RULE:^CN=(.*?),.*$/$1/U", "CN=alice,O=x", "User:ALICE"),
        ("RULE:^CN=(.*?),.*$/$1/L, DEFAULT", "CN=Bob,O=x", "User:bob"),
        ("RULE:^OU=(.*)$/$1/,DEFAULT", "CN=carol,O=x", "User:CN=carol,O=x"),  # falls through
        ("RULE:^CN=([^,]*)\\,x$/$1/", "CN=a,x", "User:a"),  # an escaped comma in a pattern
    ],
)
def test_mapping_rules(rules: str, dn: str, principal: str) -> None:
    assert map_principal(dn, parse_mapping_rules(rules)) == principal


def test_no_matching_rule_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"no ssl\.principal\.mapping\.rules rule matches"):
        map_principal("CN=x", parse_mapping_rules("RULE:^OU=(.*)$/$1/"))


@pytest.mark.parametrize("rules", ["", "RULE:^(.*$/$1/", "RULE:abc", "DEFAULTS"])
def test_bad_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError):
        parse_mapping_rules(rules)


def _handshake(certs: Path, client_cert: str | None, rules: str) -> str:
    config = load_config(
        overrides=[
            "listeners=SSL://127.0.0.1:0",
            f"ssl.keystore.location={certs / 'server.pem'}",
            f"ssl.truststore.location={certs / 'ca.pem'}",
            "ssl.client.auth=requested",
        ],
        environ={},
    )
    server_sock, client_sock = socket.socketpair()
    server_sock.setblocking(False)
    transport = TlsTransport(server_context(config), server_sock, rules)
    client = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if client_cert:
        client.load_cert_chain(str(certs / f"{client_cert}.pem"), str(certs / f"{client_cert}.key"))
    failures: list[BaseException] = []

    def connect() -> None:
        try:
            with client.wrap_socket(client_sock, server_hostname="127.0.0.1") as tls:
                tls.recv(1)  # until the server closes
        except (OSError, ssl.SSLError) as exc:
            failures.append(exc)

    async def serve() -> None:
        try:
            await transport.start()
        finally:
            transport.close()

    thread = threading.Thread(target=connect)
    thread.start()
    try:
        anyio.run(serve)
    finally:
        thread.join(10)
    assert not failures, failures
    return transport.principal


def test_a_client_certificate_names_the_principal(certs: Path) -> None:
    assert _handshake(certs, "alice", "RULE:^CN=([^,]*),.*$/$1/L,DEFAULT") == "User:alice"
    dn_principal = _handshake(certs, "alice", "DEFAULT")
    assert dn_principal.startswith("User:CN=alice,OU=eng,"), dn_principal  # RFC 4514 order


def test_no_client_certificate_is_anonymous(certs: Path) -> None:
    assert _handshake(certs, None, "DEFAULT") == "User:ANONYMOUS"


def test_config_errors_never_show_a_secret(certs: Path, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    from odradek.broker.config import ConfigError

    key = serialization.load_pem_private_key((certs / "alice.key").read_bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"the-real-one"),
    )
    keystore = tmp_path / "server.pem"
    keystore.write_bytes(encrypted + (certs / "alice.pem").read_bytes())
    config = load_config(
        overrides=[
            "listeners=SSL://127.0.0.1:0",
            f"ssl.keystore.location={keystore}",
            "ssl.key.password=a-wrong-guess",
        ],
        environ={},
    )
    with pytest.raises(ConfigError) as wrong:
        server_context(config)
    assert str(keystore) in str(wrong.value)
    assert "a-wrong-guess" not in str(wrong.value) and "the-real-one" not in str(wrong.value)
    right = load_config(
        overrides=[
            "listeners=SSL://127.0.0.1:0",
            f"ssl.keystore.location={keystore}",
            "ssl.key.password=the-real-one",
        ],
        environ={},
    )
    server_context(right)  # loads
    jaas = 'sasl.jaas.config=PlainLoginModule required username="u" password="hunter2";'
    with pytest.raises(ConfigError) as unknown:
        load_config(overrides=[jaas], environ={})
    assert "hunter2" not in str(unknown.value) and "sasl.jaas.config" in str(unknown.value)
