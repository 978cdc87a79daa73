"""Zero copy: a fetch of a large partition is served with ``os.sendfile`` on every backend
(asyncio + uvloop, plain asyncio, trio), and the bytes received are the segment file's bytes.

The log (~200 MiB, 1 MiB produce requests) is built once by one broker; each backend's broker
then opens the same log dir after a clean shutdown and serves it in one fetch response.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.protocol import messages as m
from tests.broker.wire import Wire, bad_events, batch
from tests.broker_process import BrokerProcess

TOPIC = "big"
REQUEST_BYTES = 1 << 20
REQUESTS = 200  # ~200 MiB

# ``odradek serve`` on plain asyncio: with ``uvloop`` unimportable, run_server falls back to it.
_PLAIN_ASYNCIO = "import sys; sys.modules['uvloop'] = None; from odradek.cli.main import main; " + (
    "sys.exit(main(sys.argv[1:]))"
)


class PlainAsyncioBroker(BrokerProcess):
    def command(self) -> list[str]:
        args = super().command()
        assert args[:3] == [sys.executable, "-m", "odradek.cli.main"]
        return [sys.executable, "-c", _PLAIN_ASYNCIO, *args[3:]]


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """A log dir holding one ~200 MiB partition; yields (log dir, high watermark)."""
    log_dir = tmp_path_factory.mktemp("zero-copy") / "logs"
    broker = BrokerProcess([log_dir]).start()
    try:
        with Wire(broker.port, timeout_s=60) as wire:  # type: ignore[arg-type]
            wire.create_topic(TOPIC)
            one = batch(1, value_bytes=REQUEST_BYTES - 100)
            request, raw = wire.produce_request([(TOPIC, 0, one)], acks=m.ACKS_LEADER)
            started = time.monotonic()
            in_flight = 0
            for _ in range(REQUESTS):  # pipelined, up to 16 in flight
                wire.send(request, raw)
                in_flight += 1
                if in_flight == 16:
                    assert wire.recv()[0].topics[0].partitions[0].error_code == 0
                    in_flight -= 1
            for _ in range(in_flight):
                assert wire.recv()[0].topics[0].partitions[0].error_code == 0
            print(f"produced {REQUESTS} MiB in {time.monotonic() - started:.2f} s")
        assert broker.stop() == 0
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()
    yield log_dir, REQUESTS


def _loop_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


class Sendfiles:
    attached = False  # whether strace could watch the broker (else nothing is known)
    calls: list[int]  # bytes sent by each successful sendfile(2)


@contextlib.contextmanager
def sendfile_bytes(pid: int, out: Path) -> Iterator[Sendfiles]:
    """The ``sendfile(2)`` calls of process ``pid`` meanwhile, seen with strace."""
    sent = Sendfiles()
    sent.calls = []
    strace = shutil.which("strace")
    if strace is None:
        yield sent
        return
    command = [strace, "-f", "-e", "trace=sendfile", "-e", "signal=none", "-o", str(out)]
    tracer = subprocess.Popen(
        [*command, "-p", str(pid)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert tracer.stderr is not None
    for line in tracer.stderr:  # "strace: Process <tid> attached", one per thread
        if f"Process {pid} attached" in line:
            sent.attached = True
            break
    try:
        yield sent
    finally:
        tracer.send_signal(signal.SIGINT)  # detach
        tracer.communicate(timeout=30)
    if sent.attached:
        sent.calls.extend(
            int(n) for n in re.findall(r"sendfile\(.*\) += (\d+)$", out.read_text(), re.M)
        )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["uvloop", "asyncio", "trio"])
def test_large_fetch_is_the_segment_file(
    big_log: tuple[Path, int], backend: str, tmp_path: Path
) -> None:
    log_dir, high_watermark = big_log
    if backend == "asyncio":
        broker: BrokerProcess = PlainAsyncioBroker([log_dir])
    else:
        broker = BrokerProcess([log_dir], backend="asyncio" if backend == "uvloop" else "trio")
    broker.start()
    try:
        assert broker.process is not None
        maps = _loop_libraries(broker.process.pid)
        assert ("uvloop" in maps) == (backend == "uvloop")
        segment = log_dir / f"{TOPIC}-0" / "00000000000000000000.log"
        expected = hashlib.sha256(segment.read_bytes()).hexdigest()
        size = segment.stat().st_size
        assert size > REQUESTS * (REQUEST_BYTES - 200)
        with (
            Wire(broker.port, timeout_s=60) as wire,  # type: ignore[arg-type]
            sendfile_bytes(broker.process.pid, tmp_path / "strace.out") as sent,
        ):
            started = time.monotonic()
            result, tail = wire.fetch(
                TOPIC, 0, 0, max_bytes=size, partition_max_bytes=size, timeout_s=60
            )
            elapsed = time.monotonic() - started
            assert result.error_code == 0 and result.high_watermark == high_watermark
            assert result.records_bytes == len(tail) == size
            assert hashlib.sha256(tail).hexdigest() == expected
            print(f"{backend}: fetched {size / 2**20:.0f} MiB in {elapsed:.2f} s")
            # The connection is still in sync: the next request gets its own response.
            assert wire.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0
        if sent.attached:  # every record byte went out through sendfile(2)
            assert sum(sent.calls) == size, (len(sent.calls), sum(sent.calls), size)
        assert broker.stop() == 0
        assert bad_events(broker.lines) == []
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()
