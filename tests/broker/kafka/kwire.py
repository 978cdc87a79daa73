"""A raw Kafka-protocol connection for tests: one blocking socket and the project's own codec
(``odradek.protocol.kafka``), no client library. Frames are ``int32 size`` + body; requests are
built with ``encode_request`` and responses read with ``decode_response``.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from odradek.protocol import kafka

__all__ = ["KafkaWire", "api_versions_body", "fetch_fields", "metadata_body"]

_SIZE = struct.Struct(">i")


class KafkaWire:
    def __init__(self, port: int, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_cid = 100

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_body(self, body: bytes) -> None:
        self.sock.sendall(_SIZE.pack(len(body)) + body)

    def send(self, api_key: int, version: int, fields: dict[str, Any]) -> int:
        """Send one request; returns its correlation id."""
        cid = self._next_cid
        self._next_cid += 1
        self.send_body(kafka.encode_request(api_key, version, cid, "kwire", fields))
        return cid

    def recv_body(self) -> bytes:
        """The next response body; ``EOFError`` if the broker closed the connection."""
        (size,) = _SIZE.unpack(self._exactly(4))
        return self._exactly(size)

    def recv(self, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
        """``(correlation_id, fields)`` of the next response, read as ``api_key``/``version``."""
        return kafka.decode_response(api_key, version, self.recv_body())

    def call(self, api_key: int, version: int, fields: dict[str, Any]) -> dict[str, Any]:
        cid = self.send(api_key, version, fields)
        got, answer = self.recv(api_key, version)
        assert got == cid
        return answer

    def closed_by_peer(self, timeout_s: float = 10.0) -> bool:
        """Whether the broker closes the connection (EOF or reset) within ``timeout_s``,
        discarding anything it sends first."""
        self.sock.settimeout(timeout_s)
        try:
            while self.sock.recv(65536):
                pass
        except TimeoutError:
            return False
        except OSError:
            return True
        return True

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError("connection closed by the broker")
            out += chunk
        return bytes(out)


def api_versions_body(cid: int = 1, version: int = 3) -> bytes:
    fields = {"client_software_name": "kwire", "client_software_version": "1"}
    return kafka.encode_request(18, version, cid, "kwire", fields)


def metadata_body(topics: list[str] | None, cid: int = 1, version: int = 8) -> bytes:
    fields = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return kafka.encode_request(3, version, cid, "kwire", fields)


def fetch_fields(
    topic: str,
    offset: int = 0,
    *,
    max_wait_ms: int = 0,
    max_bytes: int = 1 << 20,
    leader_epoch: int = -1,
    session_id: int = 0,
    session_epoch: int = -1,
) -> dict[str, Any]:
    """A Fetch request (any version 4-12) of partition 0 of ``topic`` from ``offset``, as a
    consumer without a fetch session sends it; ``max_bytes`` bounds the response and the
    partition alike."""
    partition = {
        "partition": 0,
        "current_leader_epoch": leader_epoch,
        "fetch_offset": offset,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": max_bytes,
    }
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": [{"topic": topic, "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
