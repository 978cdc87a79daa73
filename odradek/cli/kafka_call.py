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

import socket
import ssl
import struct
from pathlib import Path
from typing import Any

from odradek.broker.config import parse_properties
from odradek.client.config import ClientConfig
from odradek.client.errors import KafkaError
from odradek.client.security import SaslAnswer, options_from_properties, sasl_exchange, uses_sasl
from odradek.protocol import kafka

__all__ = ["KafkaCall", "call_once", "read_command_config"]

_SASL_HANDSHAKE = 17  # api key; the exchange yields it (client.security.sasl_exchange)


def read_command_config(path: Path | None) -> dict[str, str]:
    """The properties of ``--command-config`` (none: plaintext, no authentication)."""
    if path is None:
        return {}
    return parse_properties(Path(path).read_text(), str(path))


def call_once(
    bootstrap: str, command_config: Path | None, api_key: int, version: int, fields: dict[str, Any]
) -> dict[str, Any]:
    """One request to ``bootstrap`` on a connection secured as ``--command-config`` says."""
    with KafkaCall(bootstrap, read_command_config(command_config)) as call:
        return call.call(api_key, version, fields)


class KafkaCall:
    """One connection to ``HOST:PORT``, secured as ``properties`` say (mapped onto the
    client's options by :func:`odradek.client.security.options_from_properties`, so a bad
    property is a ``ValueError`` naming it); use as a context."""

    def __init__(self, bootstrap: str, properties: dict[str, str] | None = None) -> None:
        self.config = ClientConfig(
            bootstrap_servers=bootstrap, **options_from_properties(properties or {})
        )
        self.host, port = self.config.bootstrap_servers[0]
        self.sock: socket.socket | ssl.SSLSocket = socket.create_connection(
            (self.host, port), timeout=30
        )
        self._correlation_id = 0
        try:
            if self.config.ssl_context is not None:
                self.sock = self.config.ssl_context.wrap_socket(
                    self.sock, server_hostname=self.host
                )
            if uses_sasl(self.config):
                self._authenticate()
        except BaseException:
            self.sock.close()
            raise

    def __enter__(self) -> KafkaCall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def _authenticate(self) -> None:
        """The client's :func:`~odradek.client.security.sasl_exchange` over Kafka's
        SaslHandshake v1 and SaslAuthenticate v2; a refusal is an ``OSError``."""
        exchange = sasl_exchange(self.config)
        try:
            api_key, argument = next(exchange)
            while True:
                if api_key == _SASL_HANDSHAKE:
                    fields = self.call(api_key, 1, {"mechanism": argument})
                    enabled = fields["mechanisms"]
                    message = f"the broker refused SASL mechanism {argument}: {enabled}"
                    answer = SaslAnswer(fields["error_code"], message)
                else:
                    fields = self.call(api_key, 2, {"auth_bytes": argument})
                    answer = SaslAnswer(
                        fields["error_code"], fields["error_message"], bytes(fields["auth_bytes"])
                    )
                api_key, argument = exchange.send(answer)
        except StopIteration:
            return
        except KafkaError as exc:
            raise OSError(f"authentication failed: {exc.message}") from None

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
