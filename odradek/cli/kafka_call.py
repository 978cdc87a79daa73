"""One Kafka-protocol request from the command line, on a plain blocking socket: what
``odradek users`` and ``odradek acls`` send to a running broker (Kafka's own admin requests,
as ``kafka-configs`` and ``kafka-acls`` send them), with the project's sans-I/O codec."""

from __future__ import annotations

import socket
import struct
from typing import Any

from odradek.protocol import kafka

__all__ = ["kafka_call"]


def kafka_call(
    bootstrap: str, api_key: int, version: int, fields: dict[str, Any]
) -> dict[str, Any]:
    """Send one request to ``HOST:PORT`` and return the response's fields. ``OSError`` if
    the broker closes the connection (a TLS or SASL listener: use a plaintext one)."""
    host, _, port = bootstrap.rpartition(":")
    body = kafka.encode_request(api_key, version, 1, "odradek-cli", fields)
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        answer = _read_exactly(sock, struct.unpack(">i", _read_exactly(sock, 4))[0])
    return kafka.decode_response(api_key, version, answer)[1]


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("the broker closed the connection (a SASL or TLS listener?)")
        data += chunk
    return bytes(data)
