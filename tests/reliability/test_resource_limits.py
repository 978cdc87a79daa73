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

from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess

FD_LIMIT = 64


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
