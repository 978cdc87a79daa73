"""Kafka-protocol requests from the command line, on one blocking socket: what ``odradek
users`` and ``odradek acls`` send to a running broker (Kafka's own admin requests, as
``kafka-configs`` and ``kafka-acls`` send them), with the project's sans-I/O codecs.

``--command-config FILE`` takes Kafka's client properties, as Kafka's tools do::

    security.protocol=SASL_SSL                  PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ssl.truststore.location=ca.pem              PEM (also: ssl.ca.location, librdkafka's name)
    ssl.keystore.location=client.pem            PEM key + chain, for mutual TLS
    ssl.endpoint.identification.algorithm=      empty: no host name check (default: https)
    sasl.mechanism=SCRAM-SHA-512                PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="admin" password="...";       (or sasl.username / sasl.password)

The exchange is Kafka's: TLS first, then SaslHandshake v1 and SaslAuthenticate v2 with the
tokens of :mod:`odradek.protocol.sasl`. Passwords never appear in an error message.
"""

from __future__ import annotations

import re
import secrets
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

from odradek.broker.config import parse_properties
from odradek.protocol import kafka
from odradek.protocol.sasl import SCRAM_MECHANISMS, ScramClient

__all__ = ["KafkaCall", "read_command_config"]

_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def read_command_config(path: Path | None) -> dict[str, str]:
    """The properties of ``--command-config`` (none: plaintext, no authentication)."""
    if path is None:
        return {}
    return parse_properties(Path(path).read_text(), str(path))


class KafkaCall:
    """One connection to ``HOST:PORT``, secured as ``properties`` say; use as a context."""

    def __init__(self, bootstrap: str, properties: dict[str, str] | None = None) -> None:
        self.properties = properties or {}
        host, _, port = bootstrap.rpartition(":")
        self.host = host or "127.0.0.1"
        self.sock: socket.socket | ssl.SSLSocket = socket.create_connection(
            (self.host, int(port)), timeout=30
        )
        self._correlation_id = 0
        protocol = self.properties.get("security.protocol", "PLAINTEXT").upper()
        try:
            if protocol in ("SSL", "SASL_SSL"):
                self.sock = self._tls().wrap_socket(self.sock, server_hostname=self.host)
            if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                self._authenticate()
        except BaseException:
            self.sock.close()
            raise

    def __enter__(self) -> KafkaCall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def _tls(self) -> ssl.SSLContext:
        props = self.properties
        cafile = props.get("ssl.truststore.location") or props.get("ssl.ca.location")
        context = ssl.create_default_context(cafile=cafile or None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if props.get("ssl.endpoint.identification.algorithm", "https") == "":
            context.check_hostname = False
        keystore = props.get("ssl.keystore.location")
        if keystore:
            context.load_cert_chain(keystore, password=props.get("ssl.key.password"))
        return context

    def _credentials(self) -> tuple[str, str]:
        props = self.properties
        user, password = props.get("sasl.username"), props.get("sasl.password")
        fields = dict(_JAAS_FIELD.findall(props.get("sasl.jaas.config", "")))
        user, password = user or fields.get("username"), password or fields.get("password")
        if not user or not password:
            raise ValueError("--command-config: SASL needs sasl.jaas.config (or sasl.username "
                             "and sasl.password)")  # fmt: skip
        return user, password

    def _authenticate(self) -> None:
        mechanism = self.properties.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism != "PLAIN" and mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"--command-config: sasl.mechanism {mechanism} is not supported")
        user, password = self._credentials()
        answer = self.call(_SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if answer["error_code"]:
            raise OSError(f"the broker refused SASL mechanism {mechanism}: {answer['mechanisms']}")
        if mechanism == "PLAIN":
            self._step(b"\0" + user.encode() + b"\0" + password.encode())
            return
        scram = ScramClient(mechanism, user, password, secrets.token_urlsafe(18))
        server_first = self._step(scram.first())
        scram.check(self._step(scram.final(server_first)))

    def _step(self, token: bytes) -> bytes:
        answer = self.call(_SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        if answer["error_code"]:
            raise OSError(f"authentication failed: {answer['error_message']}")
        return bytes(answer["auth_bytes"])

    def call(self, api_key: int, version: int, fields: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the response's fields. ``OSError`` if the broker
        closes the connection."""
        self._correlation_id += 1
        body = kafka.encode_request(api_key, version, self._correlation_id, "odradek-cli", fields)
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return kafka.decode_response(api_key, version, self._read_exactly(size))[1]

    def _read_exactly(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise OSError(
                    "the broker closed the connection (a TLS or SASL listener? give "
                    "--command-config)"
                )
            data += chunk
        return bytes(data)
