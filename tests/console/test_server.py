"""``odradek console`` as a command: its listen address, and its errors (exit status 1 with one
line on stderr) for a bad address and a port already taken."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from odradek.console.app import host_name
from odradek.console.server import parse_listen
from tests.broker_process import REPO
from tests.ports import reserve_port


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "console", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen(":9000") == ("127.0.0.1", 9000)
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        parse_listen("localhost")


def test_host_name() -> None:
    assert host_name("localhost:8080") == "localhost"
    assert host_name("[::1]:8080") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"


def test_a_bad_listen_address_is_an_error() -> None:
    done = _console("--listen", "nonsense")
    assert done.returncode == 1
    assert done.stderr.strip() == "odradek console: error: expected HOST:PORT, got 'nonsense'"


def test_a_taken_port_is_an_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _console("--listen", f"127.0.0.1:{port}")
    assert done.returncode == 1
    assert done.stderr.startswith("odradek console: error: [Errno 98] Address already in use")


def test_an_unreachable_broker_is_a_502_not_a_crash() -> None:
    import json
    import signal
    import urllib.error
    import urllib.request

    from tests.console.conftest import Console

    port = reserve_port()  # a port nobody listens on
    console = Console(f"127.0.0.1:{port}")
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(console.url + "/api/topics", timeout=60)
        assert refused.value.code == 502
        assert json.loads(refused.value.read())["error"].startswith("broker unreachable")
        with urllib.request.urlopen(console.url + "/", timeout=30) as page:  # pages still load
            assert page.status == 200
    finally:
        status, err = console.stop()
    assert status == -signal.SIGTERM, err
    assert "Traceback" not in err, err
