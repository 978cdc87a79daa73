"""A Fetch response never carries another file's bytes (issue 14, finding 2).

A slow consumer asks for all of topic A in one response and stops reading, so the broker is
parked in the middle of ``sendfile`` with the rest of A's segment still to send. Meanwhile A is
deleted, B is created and written: B's new segment file is the next file the broker opens. When
the consumer reads on, every byte it receives must be A's (or the connection may close); before
the fix the broker's ``sendfile`` went on with a bare descriptor number that B's file now had.
Run on asyncio + uvloop, plain asyncio and trio; and once with the segment removed by
DeleteRecords and retention (``file.delete.delay.ms=0``) instead of DeleteTopics.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.protocol import messages as m
from odradek.protocol.frames import NATIVE_PREFACE, FrameDecoder
from tests.broker.test_zero_copy import PlainAsyncioBroker
from tests.broker.wire import Wire, bad_events, batch
from tests.broker_process import BrokerProcess, wait_until

REQUEST_BYTES = 1 << 20
A_REQUESTS = 24  # A: ~24 MiB, far more than the socket buffers hold
B_REQUESTS = 32  # B: larger than A, so A's positions exist in B's file
RCVBUF_BYTES = 16 * 1024
HEAD_READ_BYTES = 64 * 1024  # what the consumer reads before it stalls


def _produce(wire: Wire, topic: str, tag: str, requests: int) -> None:
    # stamped now: time-based retention (checked every 100 ms in one test) must not delete
    # the segments before the test removes them itself
    one = batch(1, tag=tag, value_bytes=REQUEST_BYTES - 100, timestamp_ms=int(time.time() * 1000))
    request, raw = wire.produce_request([(topic, 0, one)])
    for _ in range(requests):
        wire.send(request, raw)
    for _ in range(requests):
        assert wire.recv()[0].topics[0].partitions[0].error_code == 0


def _slow_consumer(port: int) -> socket.socket:
    """A socket with a tiny receive buffer (set before connecting: it bounds the window)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    sock.sendall(NATIVE_PREFACE)
    return sock


def _fetch_everything(topic: str, size_bytes: int) -> bytes:
    request = m.FetchRequest(
        correlation_id=7,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=size_bytes,
        topics=[
            m.FetchTopic(
                name=topic,
                partitions=[
                    m.FetchPartition(
                        partition_index=0, fetch_offset=0, partition_max_bytes=size_bytes
                    )
                ],
            )
        ],
    )
    return b"".join(bytes(p) for p in m.encode_request(request))


def _read_response(sock: socket.socket, received: bytearray) -> bytes | None:
    """Read on until one whole frame arrived (its body) or the broker closed (None)."""
    decoder = FrameDecoder(2**31 - 1)
    decoder.feed(received)
    while (body := decoder.next_frame()) is None:
        try:
            chunk = sock.recv(1 << 20)
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        received += chunk
        decoder.feed(chunk)
    return body


def _broker(backend: str, log_dir: Path) -> BrokerProcess:
    if backend == "asyncio":
        return PlainAsyncioBroker([log_dir])
    return BrokerProcess([log_dir], backend="asyncio" if backend == "uvloop" else "trio")


def _stalled_fetch(
    broker: BrokerProcess, segment: Path, remove_a: Callable[[], None], admin: Wire
) -> tuple[bytes, bytes]:
    """Fetch all of ``segment`` (topic a's first) with a consumer that stalls after the first
    bytes; meanwhile ``remove_a()`` removes the segment, then b is created and written.
    Returns (the segment's bytes, the record bytes the consumer got)."""
    a_bytes = segment.read_bytes()
    consumer = _slow_consumer(broker.port)  # type: ignore[arg-type]
    try:
        consumer.sendall(_fetch_everything("a", len(a_bytes)))
        received = bytearray()
        while len(received) < HEAD_READ_BYTES:  # the response is under way ...
            chunk = consumer.recv(HEAD_READ_BYTES - len(received))
            assert chunk, "the broker closed before sending the response"
            received += chunk
        # ... and stalls (the consumer stops reading) while a's segment goes and b comes
        remove_a()
        admin.create_topic("b")
        _produce(admin, "b", "B", B_REQUESTS)
        body = _read_response(consumer, received)
    finally:
        consumer.close()
    if body is None:  # the broker closed mid-response: what arrived must still be a's
        raw_start = received.find(a_bytes[:61])  # the first batch's header
        assert raw_start > 0
        return a_bytes, bytes(received[raw_start:])
    response, raw = m.decode_response(body)
    assert response.topics[0].partitions[0].records_bytes == len(a_bytes)
    return a_bytes, bytes(raw)


def _assert_only_a(broker: BrokerProcess, a_bytes: bytes, tail: bytes) -> None:
    assert b"B0" not in tail, "the response carries topic b's records"
    assert tail == a_bytes[: len(tail)]
    # and once the send is over, a's removed segment's descriptor is closed (not leaked)
    assert broker.process is not None
    assert wait_until(lambda: not _open_deleted_files(broker.process.pid, "a-0"))
    assert bad_events(broker.lines) == []


@pytest.mark.parametrize("backend", ["uvloop", "asyncio", "trio"])
def test_a_fetch_never_sends_the_bytes_of_a_file_opened_after_its_topic_was_deleted(
    backend: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    with _broker(backend, log_dir) as broker, Wire(broker.port, timeout_s=60) as admin:  # type: ignore[arg-type]
        admin.create_topic("a")
        _produce(admin, "a", "A", A_REQUESTS)

        def delete_a() -> None:
            deleted = admin.call(m.DeleteTopicsRequest(correlation_id=0, topic_names=["a"]))
            assert deleted.topics[0].error_code == 0

        a_bytes, tail = _stalled_fetch(broker, log_dir / "a-0" / f"{0:020d}.log", delete_a, admin)
        _assert_only_a(broker, a_bytes, tail)


def test_a_fetch_never_sends_the_bytes_of_a_file_opened_after_retention_removed_its_segment(
    tmp_path: Path,
) -> None:
    """The same through DeleteRecords and retention, with ``file.delete.delay.ms=0``: the
    segment is closed and unlinked while its bytes are still being sent."""
    log_dir = tmp_path / "logs"
    broker = BrokerProcess([log_dir], overrides=["log.retention.check.interval.ms=100"])
    with broker, Wire(broker.port, timeout_s=60) as admin:  # type: ignore[arg-type]
        configs = {"segment.bytes": str(8 * REQUEST_BYTES), "file.delete.delay.ms": "0"}
        admin.create_topic("a", configs=configs)
        _produce(admin, "a", "A", A_REQUESTS)
        partition_dir = log_dir / "a-0"

        def delete_old_segments() -> None:
            since = len(broker.lines)
            assert admin.delete_records("a", 0, -1).error_code == 0
            assert broker.wait_for_events("log segments deleted", since_line=since)
            # closed and unlinked (the worker thread's work) before b opens its files
            assert wait_until(lambda: not list(partition_dir.glob("*.deleted")))

        a_bytes, tail = _stalled_fetch(
            broker, partition_dir / f"{0:020d}.log", delete_old_segments, admin
        )
        _assert_only_a(broker, a_bytes, tail)


def _open_deleted_files(pid: int, partition_dir: str) -> list[str]:
    """Files the process still has open that were unlinked from ``partition_dir``."""
    targets = []
    for link in Path(f"/proc/{pid}/fd").iterdir():
        try:
            targets.append(os.readlink(link))
        except OSError:  # closed meanwhile
            continue
    return [t for t in targets if partition_dir in t and t.endswith("(deleted)")]
