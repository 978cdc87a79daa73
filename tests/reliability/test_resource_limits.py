"""Running out of file descriptors: the broker refuses what it cannot take and keeps serving.

With ``RLIMIT_NOFILE`` at 64, a flood of connections makes ``accept`` fail with EMFILE. Kafka's
acceptor logs the error and goes on; so must odradek: no crash, no busy loop, and once the
flood is gone new clients are served again.
"""

from __future__ import annotations

import resource
import socket
import time
from pathlib import Path

import pytest

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess

FD_LIMIT = 64
FETCH_FROM_START = m.FetchRequest(
    correlation_id=0,
    max_wait_ms=0,
    topics=[
        m.FetchTopic(name="big", partitions=[m.FetchPartition(partition_index=0, fetch_offset=0)])
    ],
)


@pytest.mark.slow
def test_file_descriptor_exhaustion_is_survived(tmp_path: Path) -> None:
    broker = BrokerProcess(
        [tmp_path / "logs"],
        overrides=["max.connections=1000"],
        rlimits={resource.RLIMIT_NOFILE: (FD_LIMIT, FD_LIMIT)},
    ).start()
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic("fd")
            assert wire.produce("fd", 0, batch(2)).error_code == 0
        flood = []
        for _ in range(FD_LIMIT * 2):
            flood.append(socket.create_connection(("127.0.0.1", broker.port)))
        # The broker is alive and has said why it refused connections.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _refusals(broker):
            time.sleep(0.02)
        assert _refusals(broker), broker.raw_lines[-10:]
        assert broker.process is not None and broker.process.poll() is None
        for sock in flood:
            sock.close()
        deadline = time.monotonic() + 10
        while True:  # served again once the descriptors are back
            try:
                with Wire(broker.port, timeout_s=2) as wire:  # type: ignore[arg-type]
                    assert [r.value for r in fetch_all(wire, "fd", 0)] == [b"v0", b"v1"]
                    break
            except (OSError, EOFError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        assert broker.stop() == 0


def _refusals(broker: BrokerProcess) -> list[dict]:
    return [e for e in broker.lines if "accept" in e.get("event", "")]


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_a_client_that_never_reads_costs_bounded_memory(tmp_path: Path) -> None:
    """Pipelined requests whose responses are never read stop being read once the socket
    buffers are full: memory stays flat and everyone else is served."""
    broker = BrokerProcess([tmp_path / "logs"]).start()
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic("big")
            chunk = batch(100, value_bytes=1000)  # ~100 KB
            for _ in range(100):
                assert wire.produce("big", 0, chunk).error_code == 0
        assert broker.process is not None
        before = _rss_bytes(broker.process.pid)
        greedy = Wire(broker.port)  # type: ignore[arg-type]
        greedy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        greedy.sock.setblocking(False)
        sent = 0
        request, raw = greedy.produce_request([("big", 0, chunk)], acks=1)
        for _ in range(5000):  # 5000 x 100 KB produce + fetches, never reading a byte
            try:
                greedy.send(request, raw)
                greedy.send(FETCH_FROM_START)
                sent += 1
            except BlockingIOError:
                break  # the broker stopped reading us: back-pressure works
        with Wire(broker.port) as other:  # type: ignore[arg-type]
            assert other.produce("big", 0, batch(1)).error_code == 0
            assert other.metadata(["big"]).topics[0].error_code == 0
        grown = _rss_bytes(broker.process.pid) - before
        assert grown < 64 << 20, f"broker grew by {grown} bytes for a client that never reads"
        assert sent < 5000, "the broker read 500 MB from a client that never read a response"
        greedy.close()
    finally:
        assert broker.stop() == 0


@pytest.mark.slow
def test_running_out_of_descriptors_while_creating_a_topic(tmp_path: Path) -> None:
    """EMFILE is the process's limit, not a failed disk: the creation fails whole (no half
    topic left behind), the log dir stays online, and a smaller topic fits afterwards."""
    root = tmp_path / "logs"
    broker = BrokerProcess([root], rlimits={resource.RLIMIT_NOFILE: (200, 200)}).start()
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic("first")
            response = wire.call(
                m.CreateTopicsRequest(
                    correlation_id=0,
                    # a partition costs one descriptor (its .log): 400 cannot fit in 200
                    topics=[m.CreatableTopic(name="many", num_partitions=400)],
                )
            )
            result = response.topics[0]
            assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert "Too many open files" in (result.error_message or "")
            assert not list(root.glob("many-*")), "a half-created topic was left behind"
            unknown = wire.metadata(["many"], auto_create=False).topics[0]
            assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert wire.produce("first", 0, batch(1)).error_code == 0  # the dir is online
            wire.create_topic("fewer", partitions=5)
        assert not [e for e in broker.lines if "offline" in e.get("event", "")]
    finally:
        assert broker.stop() == 0
