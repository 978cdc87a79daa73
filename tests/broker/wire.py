"""A tiny raw-protocol client for the broker tests: one blocking socket, no client library.

Requests are encoded with ``odradek.protocol.messages.encode_request`` (correlation ids assigned
here, counting up), responses read with a ``FrameDecoder`` and ``decode_response``. Helpers build
the common requests; everything else goes through :meth:`Wire.call` with a request struct.
Record batches come from ``odradek.protocol.batch_builder.encode_batch``; fetched bytes are
split back into batches with :func:`split_batches` (complete batches only, as a consumer does).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.frames import MAX_FRAME_BYTES_LIMIT, NATIVE_PREFACE, FrameDecoder
from odradek.protocol.record_batch import LOG_OVERHEAD, parse_batch_header
from odradek.protocol.records import Record, decode_records

__all__ = [
    "Wire",
    "bad_events",
    "batch",
    "dir_snapshot",
    "fetch_all",
    "split_batches",
]

Raw = bytes | bytearray | memoryview


class Wire:
    """A blocking connection to a broker speaking the native protocol."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout_s: float = 15.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(NATIVE_PREFACE)  # the native protocol on this connection
        self.timeout_s = timeout_s
        self.decoder = FrameDecoder(MAX_FRAME_BYTES_LIMIT)
        self._next_cid = 1

    # -- plumbing -----------------------------------------------------------------------------

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cid(self) -> int:
        cid = self._next_cid
        self._next_cid += 1
        return cid

    def send(self, request: m.Request, raw: Raw | Sequence[Raw] = b"") -> int:
        """Send one request (its correlation id is replaced by a fresh one); returns the id."""
        request = msgspec.structs.replace(request, correlation_id=self.cid())
        self.sock.sendall(b"".join(bytes(p) for p in m.encode_request(request, raw)))
        return request.correlation_id

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout_s: float | None = None) -> tuple[m.Response, memoryview]:
        """The next response (and its raw tail); raises ``EOFError`` if the broker closed."""
        self.sock.settimeout(self.timeout_s if timeout_s is None else timeout_s)
        while True:
            body = self.decoder.next_frame()
            if body is not None:
                return m.decode_response(body)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("the broker closed the connection")
            self.decoder.feed(chunk)

    def call(self, request: m.Request, raw: Raw | Sequence[Raw] = b"") -> Any:
        """Send ``request`` and return its response (the raw tail is dropped)."""
        response, _ = self.call_raw(request, raw)
        return response

    def call_raw(
        self, request: m.Request, raw: Raw | Sequence[Raw] = b""
    ) -> tuple[Any, memoryview]:
        cid = self.send(request, raw)
        response, tail = self.recv()
        assert response.correlation_id == cid, (response.correlation_id, cid)
        return response, tail

    def closed_by_peer(self, timeout_s: float = 10.0) -> bool:
        """Read (discarding) until EOF; True if the broker closed within ``timeout_s``."""
        self.sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(1 << 16):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return False

    # -- requests -----------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> m.CreatableTopicResult:
        response = self.call(
            m.CreateTopicsRequest(
                correlation_id=0,
                topics=[
                    m.CreatableTopic(name=name, num_partitions=partitions, configs=configs or {})
                ],
            )
        )
        result = response.topics[0]
        assert result.error_code == 0, result
        return result

    def metadata(self, topics: list[str] | None = None, auto_create: bool = True) -> Any:
        return self.call(
            m.MetadataRequest(
                correlation_id=0, topics=topics, allow_auto_topic_creation=auto_create
            )
        )

    def produce_request(
        self,
        sections: Iterable[tuple[str, int, Raw]],
        acks: int = m.ACKS_LEADER,
        timeout_ms: int = 30_000,
    ) -> tuple[m.ProduceRequest, list[Raw]]:
        """A ProduceRequest for ``(topic, partition, batches bytes)`` and its raw parts."""
        topics: dict[str, list[m.ProducePartitionData]] = {}
        raw: list[Raw] = []
        for topic, partition, data in sections:
            topics.setdefault(topic, []).append(
                m.ProducePartitionData(partition_index=partition, records_bytes=len(data))
            )
            raw.append(data)
        request = m.ProduceRequest(
            correlation_id=0,
            acks=acks,
            timeout_ms=timeout_ms,
            topics=[m.ProduceTopicData(name=t, partitions=ps) for t, ps in topics.items()],
        )
        return request, raw

    def produce(
        self, topic: str, partition: int, data: Raw, acks: int = m.ACKS_LEADER
    ) -> m.ProducePartitionResponse:
        """Produce one partition's bytes; returns its partition result (acks 1 or all)."""
        request, raw = self.produce_request([(topic, partition, data)], acks=acks)
        response = self.call(request, raw)
        return response.topics[0].partitions[0]

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 52_428_800,
        partition_max_bytes: int = 1_048_576,
        timeout_s: float | None = None,
    ) -> tuple[m.FetchPartitionResponse, memoryview]:
        """One partition's fetch result and its record bytes."""
        cid = self.send(
            m.FetchRequest(
                correlation_id=0,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                topics=[
                    m.FetchTopic(
                        name=topic,
                        partitions=[
                            m.FetchPartition(
                                partition_index=partition,
                                fetch_offset=offset,
                                partition_max_bytes=partition_max_bytes,
                            )
                        ],
                    )
                ],
            )
        )
        response, tail = self.recv(timeout_s)
        assert response.correlation_id == cid
        return response.topics[0].partitions[0], tail

    def alter_configs(
        self,
        name: str,
        *ops: m.AlterableConfig,
        validate_only: bool = False,
        resource_type: int = m.ConfigResourceType.TOPIC,
    ) -> m.AlterConfigsResourceResult:
        """One AlterConfigs request for one resource; its result."""
        resource = m.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=list(ops)
        )
        request = m.AlterConfigsRequest(
            correlation_id=0, validate_only=validate_only, resources=[resource]
        )
        return self.call(request).responses[0]

    def delete_records(
        self, topic: str, partition: int, offset: int
    ) -> m.DeleteRecordsPartitionResult:
        """DeleteRecords below ``offset`` (-1: the high watermark); the partition's result."""
        deleted = m.DeleteRecordsPartition(partition_index=partition, offset=offset)
        request = m.DeleteRecordsRequest(
            correlation_id=0, topics=[m.DeleteRecordsTopic(name=topic, partitions=[deleted])]
        )
        return self.call(request).topics[0].partitions[0]

    def list_offset(self, topic: str, partition: int, timestamp: int) -> Any:
        response = self.call(
            m.ListOffsetsRequest(
                correlation_id=0,
                topics=[
                    m.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            m.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
                        ],
                    )
                ],
            )
        )
        return response.topics[0].partitions[0]


def batch(
    count: int = 1,
    *,
    tag: str = "v",
    timestamp_ms: int = 1_000,
    value_bytes: int = 0,
    **options: Any,
) -> bytes:
    """A client batch of ``count`` records ``(k<i>, <tag><i>)``."""
    return encode_batch(
        [
            (f"k{i}".encode(), f"{tag}{i}".encode().ljust(value_bytes, b"."), timestamp_ms + i)
            for i in range(count)
        ],
        **options,
    )


def split_batches(data: Raw) -> list[bytes]:
    """The complete batches in fetched bytes (a trailing partial batch is dropped)."""
    view = memoryview(data)
    batches = []
    pos = 0
    while len(view) - pos >= LOG_OVERHEAD:
        size = int.from_bytes(view[pos + 8 : pos + 12], "big") + LOG_OVERHEAD
        if pos + size > len(view):
            break
        batches.append(bytes(view[pos : pos + size]))
        pos += size
    return batches


def fetch_all(wire: Wire, topic: str, partition: int = 0, start: int = 0) -> list[Record]:
    """Every record from ``start`` to the high watermark, fetching as a consumer does."""
    records: list[Record] = []
    offset = start
    while True:
        result, tail = wire.fetch(topic, partition, offset)
        assert result.error_code == 0, result
        for raw in split_batches(tail):
            records.extend(r for r in decode_records(raw) if r.offset >= offset)
            # A compacted batch may have lost its last records (or all of them): move past
            # the batch's offset range, not past its last surviving record.
            offset = max(offset, parse_batch_header(raw).next_offset)
        if offset >= result.high_watermark:
            return records


def dir_snapshot(roots: Iterable[Path]) -> dict[str, tuple[int, int]]:
    """``{path: (size, mtime_ns)}`` of every file in the partition directories of ``roots``."""
    snapshot = {}
    for root in roots:
        for directory in sorted(p for p in Path(root).iterdir() if p.is_dir()):
            for path in sorted(directory.iterdir()):
                stat = os.stat(path)
                snapshot[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return snapshot


def bad_events(lines: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Log events at error level or above, and any event carrying a traceback."""
    return [
        e for e in lines if e.get("level") in ("error", "critical", "exception") or "exception" in e
    ]
