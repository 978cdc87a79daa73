"""Kafka's protocol on a raw socket, for ``bench.kafka``: no client library, only the codec.

:class:`KafkaSocket` sends requests built with ``odradek.protocol.kafka.encode_request`` (a
frame = ``int32 size`` + body; correlation ids counting up from 1) and reads responses in
request order with ``decode_response``, checking each correlation id (Kafka answers a
connection's requests in order). Responses are received into a caller's reused buffer, so
``records`` fields are views into it, valid until the next response.

* :func:`kafka_produce`: Produce requests of one pre-built batch each, acks=1, a window in
  flight, every partition error checked (the Kafka twin of ``bench.fetch.produce_batches``).
* :func:`kafka_read_partition`: back-to-back Fetch requests, one in flight, reading only
  batch headers for the next offset (the Kafka twin of ``bench.fetch.read_partition``).
"""

from __future__ import annotations

import socket
import struct
from collections import deque
from typing import Any

from bench.common import Stopwatch
from bench.fetch import _read_exactly
from odradek.protocol import kafka
from odradek.protocol.frames import frame_prefix
from odradek.protocol.record_batch import HEADER_SIZE, parse_batch_header
from tests.broker.kafka.kwire import fetch_fields

__all__ = ["FETCH_KEY", "PRODUCE_KEY", "KafkaSocket", "kafka_produce", "kafka_read_partition"]

PRODUCE_KEY, FETCH_KEY = 0, 1
CLIENT_ID = "odradek-bench"
_U32 = struct.Struct(">I")


# -- the connection --------------------------------------------------------------------------------


class KafkaSocket:
    """One blocking loopback socket speaking Kafka's protocol through the codec; requests may
    be pipelined, responses are taken in request order and their correlation ids checked."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pending: deque[int] = deque()
        self._next_cid = 0

    def __enter__(self) -> KafkaSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, fields: dict[str, Any]) -> None:
        self._next_cid += 1
        body = kafka.encode_request(api_key, version, self._next_cid, CLIENT_ID, fields)
        self.sock.sendall(frame_prefix(len(body)) + body)
        self.pending.append(self._next_cid)

    def recv(self, api_key: int, version: int, view: memoryview) -> dict[str, Any]:
        """The next response's fields, its body received into ``view`` (records are views
        into it, valid until the next call)."""
        _read_exactly(self.sock, view, 4)
        size = _U32.unpack_from(view, 0)[0]
        if size > len(view):
            raise RuntimeError(f"response of {size} bytes exceeds the {len(view)}-byte buffer")
        _read_exactly(self.sock, view, size)
        cid, fields = kafka.decode_response(api_key, version, view[:size])
        expected = self.pending.popleft()
        if cid != expected:
            raise RuntimeError(f"response {cid} arrived where {expected} was due")
        return fields


# -- produce ---------------------------------------------------------------------------------------


def kafka_produce(
    port: int, topic: str, batches: list[bytes], count: int, window: int, version: int
) -> None:
    """Send ``count`` acks=1 Produce requests of one batch each (cycling through ``batches``)
    to partition 0 of ``topic``, ``window`` in flight; every partition must answer success."""
    view = memoryview(bytearray(1 << 16))
    with KafkaSocket(port) as conn:
        for i in range(count):
            fields = {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 30_000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [{"index": 0, "records": batches[i % len(batches)]}],
                    }
                ],
            }
            conn.send(PRODUCE_KEY, version, fields)
            if len(conn.pending) >= window:
                _expect_produced(conn.recv(PRODUCE_KEY, version, view))
        while conn.pending:
            _expect_produced(conn.recv(PRODUCE_KEY, version, view))


def _expect_produced(fields: dict[str, Any]) -> None:
    for topic in fields["responses"]:
        for part in topic["partition_responses"]:
            if part["error_code"]:
                raise RuntimeError(f"produce failed: {topic['name']}: {part}")


# -- fetch -----------------------------------------------------------------------------------------


def kafka_read_partition(
    port: int, topic: str, end_offset: int, fetch_bytes: int, version: int
) -> float:
    """Seconds to read offsets ``0 .. end_offset`` of partition 0 with back-to-back Kafka
    Fetch requests (``version``), parsing only each response's batch headers."""
    view = memoryview(bytearray(fetch_bytes + (1 << 20)))
    with KafkaSocket(port) as conn, Stopwatch() as watch:
        offset = 0
        while offset < end_offset:
            conn.send(FETCH_KEY, version, fetch_fields(topic, offset, max_bytes=fetch_bytes))
            fields = conn.recv(FETCH_KEY, version, view)
            part = fields["responses"][0]["partitions"][0]
            if fields["error_code"] or part["error_code"]:
                raise RuntimeError(f"fetch failed at offset {offset}: {fields}")
            offset = _next_offset(part["records"], offset)
    return watch.seconds


def _next_offset(records: Any, offset: int) -> int:
    """The offset after the last complete batch of ``records`` (``offset`` if none)."""
    if records is None:
        return offset
    position, end = 0, len(records)
    while position + HEADER_SIZE <= end:
        header = parse_batch_header(records, position)
        if position + header.size_bytes > end:
            break  # a partial batch at the end: fetched again next time
        offset = header.next_offset
        position += header.size_bytes
    return offset
