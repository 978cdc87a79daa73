"""Fetch serving: a raw reader against the broker, and plain loopback ``os.sendfile``.

The broker answers a Fetch by writing a small header and then the segment bytes with
``os.sendfile`` (docs/architecture.md §5). This measures how close that comes to the machine's own
loopback sendfile, in the same run:

1. Fill: one partition with ``data_bytes`` of 100-byte records in 16 KiB batches, produced
   over the native protocol (pipelined, acks=1), then a clean broker restart so the log is
   settled (page cache warm: the data was just written).
2. Baseline, ``loopback os.sendfile``: a thread sends the partition's ``.log`` files over a
   loopback TCP connection with ``os.sendfile``; the main thread receives with ``recv_into``
   into one reused buffer, doing nothing else.
3. ``broker fetch``: the main thread sends a Fetch (``fetch_bytes`` per request, ``max_wait_ms``
   0), receives the header, then the records into the same kind of buffer, reads the last
   complete batch's header for the next offset, and sends the next Fetch. One request in
   flight: the figure includes a request round trip per ``fetch_bytes``.

Repeats of 2 and 3 are interleaved; the medians are reported and the ratio is fetch/baseline.
The reader is a separate process from the broker, as a consumer would be.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures, Stopwatch, format_size, interleaved, mb_per_s, median
from bench.storage import Params as StorageParams
from bench.storage import build_batches
from odradek.protocol import messages as m
from odradek.protocol.frames import NATIVE_PREFACE
from odradek.protocol.record_batch import HEADER_SIZE, parse_batch_header
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "fill_partition", "produce_batches", "read_partition", "run"]

TITLE = "fetch serving (os.sendfile) against plain loopback sendfile"
TOPIC = "fetch-bench"
_U32 = struct.Struct(">I")
_RECV_BUFFER_BYTES = 1 << 20

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    data_bytes: int = 1 << 30
    fetch_bytes: int = 8 << 20
    repeats: int = 5
    produce_pipeline: int = 64  # produce requests in flight while filling

    @classmethod
    def quick(cls) -> Params:
        return cls(data_bytes=128 << 20, repeats=3)


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    figures = Figures()
    broker = BrokerProcess(
        [scratch / "logs"], overrides=[f"socket.request.max.bytes={params.fetch_bytes * 4}"]
    ).start()
    try:
        say(f"filling {TOPIC}-0 with {format_size(params.data_bytes)}")
        end_offset = fill_partition(broker.port, TOPIC, params)  # type: ignore[arg-type]
        broker.restart()
        segments = sorted((scratch / "logs" / f"{TOPIC}-0").glob("*.log"))
        total = sum(p.stat().st_size for p in segments)
        say(f"{end_offset} records, {format_size(total)} in {len(segments)} segment(s)")
        timings = interleaved(
            {
                "baseline": lambda: _sendfile_loopback(segments),
                "fetch": lambda: read_partition(broker.port, TOPIC, end_offset, params.fetch_bytes),  # type: ignore[arg-type]
            },
            params.repeats,
        )
    finally:
        broker.stop()
    base = [mb_per_s(total, s) for s in timings["baseline"]]
    fetch = [mb_per_s(total, s) for s in timings["fetch"]]
    figures.add("loopback os.sendfile", median(base), "MB/s", samples=base, is_baseline=True)
    figures.add(
        "broker fetch, raw reader",
        median(fetch),
        "MB/s",
        baseline="loopback os.sendfile",
        samples=fetch,
        note=f"{format_size(params.fetch_bytes)} per Fetch, one in flight",
    )
    return figures.items


def fill_partition(port: int, topic: str, params: Params) -> int:
    """Create ``topic`` (one partition) and fill it with ``data_bytes`` of 100-byte records in
    16 KiB batches, ``produce_pipeline`` requests in flight; returns the record count."""
    batches, per_batch = build_batches(StorageParams())
    count = max(1, params.data_bytes // len(batches[0]))
    with Wire(port) as wire:
        wire.create_topic(topic, partitions=1)
        produce_batches(wire, topic, batches, count, params.produce_pipeline)
    return count * per_batch


def produce_batches(
    wire: Wire, topic: str, batches: list[bytes], count: int, pipeline: int
) -> None:
    """Send ``count`` acks=1 Produce requests of one batch each (cycling through ``batches``)
    to partition 0, ``pipeline`` in flight; every response must be a success."""
    in_flight = 0
    for i in range(count):
        wire.send(*wire.produce_request([(topic, 0, batches[i % len(batches)])], acks=1))
        in_flight += 1
        if in_flight >= pipeline:
            _expect_produced(wire.recv()[0])
            in_flight -= 1
    for _ in range(in_flight):
        _expect_produced(wire.recv()[0])


def _expect_produced(response: m.ProduceResponse) -> None:
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code:
                raise RuntimeError(f"produce failed: error {partition.error_code}")


def _sendfile_loopback(files: list[Path]) -> float:
    """Seconds to move ``files`` through a loopback socket with ``os.sendfile``."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def send() -> None:
            connection, _ = server.accept()
            with connection:
                for path in files:
                    with open(path, "rb") as f:
                        size, offset = os.fstat(f.fileno()).st_size, 0
                        while offset < size:
                            offset += os.sendfile(connection.fileno(), f.fileno(), offset, size)

        sender = threading.Thread(target=send)
        sender.start()
        buffer = bytearray(_RECV_BUFFER_BYTES)
        with socket.create_connection(("127.0.0.1", port)) as reader, Stopwatch() as watch:
            while reader.recv_into(buffer):
                pass
        sender.join()
    return watch.seconds


def read_partition(port: int, topic: str, end_offset: int, fetch_bytes: int) -> float:
    """Seconds to fetch offsets ``0 .. end_offset`` of partition 0 with back-to-back Fetch
    requests, reading only each response's batch headers."""
    buffer = bytearray(fetch_bytes + _RECV_BUFFER_BYTES)
    view = memoryview(buffer)
    with socket.create_connection(("127.0.0.1", port)) as sock, Stopwatch() as watch:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(NATIVE_PREFACE)
        offset, correlation_id = 0, 0
        while offset < end_offset:
            correlation_id += 1
            request = m.FetchRequest(
                correlation_id=correlation_id,
                max_wait_ms=0,
                max_bytes=fetch_bytes,
                topics=[
                    m.FetchTopic(
                        name=topic,
                        partitions=[
                            m.FetchPartition(
                                partition_index=0,
                                fetch_offset=offset,
                                partition_max_bytes=fetch_bytes,
                            )
                        ],
                    )
                ],
            )
            sock.sendmsg(m.encode_request(request))
            offset = _receive_fetch(sock, view, offset)
    return watch.seconds


def _receive_fetch(sock: socket.socket, view: memoryview, offset: int) -> int:
    """Read one Fetch response; returns the offset after its last complete batch."""
    _read_exactly(sock, view, 4)
    frame_bytes = _U32.unpack_from(view, 0)[0]
    _read_exactly(sock, view, frame_bytes)
    response, records = m.decode_response(view[:frame_bytes])
    if response.error_code or response.topics[0].partitions[0].error_code:
        raise RuntimeError(f"fetch failed at offset {offset}: {response}")
    position, end = 0, len(records)
    while position + HEADER_SIZE <= end:
        header = parse_batch_header(records, position)
        if position + header.size_bytes > end:
            break  # a partial batch at the end: fetched again next time
        offset = header.next_offset
        position += header.size_bytes
    return offset


def _read_exactly(sock: socket.socket, view: memoryview, size: int) -> None:
    got = 0
    while got < size:
        n = sock.recv_into(view[got:size])
        if not n:
            raise EOFError("broker closed the connection")
        got += n
