"""``odradek serve`` refuses a bad configuration at start-up: a non-zero exit and a message
naming the key, the value and where it came from; ``ODRADEK_*`` environment overrides work."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_process import REPO, BrokerProcess


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "serve", "--log-format", "json", *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=30,
    )


def properties(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "server.properties"
    body = ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'logs'}", *lines]
    path.write_text("\n".join(body) + "\n")
    return path


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("no.such.key=1", ["no.such.key", "'1'"]),
        ("num.partitions=many", ["num.partitions", "'many'"]),
        ("num.partitions=0", ["num.partitions", "'0'"]),
        ("auto.create.topics.enable=maybe", ["auto.create.topics.enable", "'maybe'"]),
        ("listeners=http://127.0.0.1:1", ["listeners", "HTTP://127.0.0.1:1", "HTTP"]),
        ("metrics.listener=PLAINTEXT://127.0.0.1:1", ["metrics.listener", "PLAINTEXT://"]),
        ("metrics.listener=http://127.0.0.1", ["metrics.listener", "http://127.0.0.1"]),
        ("log.cleanup.policy=shred", ["log.cleanup.policy", "shred"]),
        ("log.message.timestamp.type=Sometime", ["log.message.timestamp.type", "Sometime"]),
        ("log.cleaner.min.cleanable.ratio=2", ["log.cleaner.min.cleanable.ratio", "2"]),
        ("just a line", ["expected key=value", "just a line"]),
    ],
)
def test_bad_properties_file(tmp_path: Path, line: str, names: list[str]) -> None:
    path = properties(tmp_path, line)
    result = serve("--config", str(path))
    assert result.returncode != 0
    message = result.stderr
    assert str(path) in message, message
    for name in names:
        assert name in message, message
    assert not (tmp_path / "logs").exists()  # refused before touching anything


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("nonsense", ["--override", "key=value", "nonsense"]),
        ("=5", ["--override", "=5"]),
        ("num.partitions=x", ["--override", "num.partitions", "'x'"]),
        ("no.such.key=1", ["--override", "no.such.key", "'1'"]),
    ],
)
def test_bad_override(tmp_path: Path, override: str, names: list[str]) -> None:
    result = serve("--config", str(properties(tmp_path)), "--override", override)
    assert result.returncode != 0
    for name in names:
        assert name in result.stderr, result.stderr


def test_bad_environment_variable(tmp_path: Path) -> None:
    path = properties(tmp_path)
    result = serve("--config", str(path), env={"ODRADEK_NUM_PARTITIONS": "lots"})
    assert result.returncode != 0
    for name in ("ODRADEK_NUM_PARTITIONS", "num.partitions", "'lots'"):
        assert name in result.stderr, result.stderr


def test_missing_config_file(tmp_path: Path) -> None:
    result = serve("--config", str(tmp_path / "absent.properties"))
    assert result.returncode != 0
    assert str(tmp_path / "absent.properties") in result.stderr


@pytest.mark.parametrize(
    ("key", "scheme"), [("listeners", "PLAINTEXT"), ("metrics.listener", "http")]
)
def test_a_port_another_process_holds_is_one_clear_error(
    tmp_path: Path, key: str, scheme: str
) -> None:
    """The start fails (exit 1) with one logged error naming the address and the system's
    reason, and no traceback."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        override = f"{key}={scheme}://127.0.0.1:{port}"
        result = serve("--config", str(properties(tmp_path)), "--override", override)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    events = [json.loads(line) for line in result.stderr.splitlines()]
    (failed,) = [e for e in events if e["event"] == "broker failed to start"]
    assert f"127.0.0.1:{port}: Address already in use" in failed["error"], failed
    assert key in failed["error"] or f"{scheme}://" in failed["error"], failed


class EnvConfiguredBroker(BrokerProcess):
    """A broker whose log dirs come from ``ODRADEK_LOG_DIRS`` over a properties file."""

    def __init__(self, config: Path, env: dict[str, str]) -> None:
        super().__init__([], env=env)
        self.config = config

    def command(self) -> list[str]:
        serve = [sys.executable, "-m", "odradek.cli.main", "serve"]
        return [*serve, "--config", str(self.config), "--log-format", "json"]


def test_odradek_log_dirs_overrides_the_file(tmp_path: Path) -> None:
    from_env = [tmp_path / "env-a", tmp_path / "env-b"]
    config = properties(tmp_path, "num.partitions=2")
    broker = EnvConfiguredBroker(config, {"ODRADEK_LOG_DIRS": ",".join(map(str, from_env))})
    broker.start()
    try:
        (started,) = broker.events("broker started")
        assert started["log_dirs"] == [str(d) for d in from_env]
        assert all((d / "meta.properties").exists() for d in from_env)
        assert not (tmp_path / "logs").exists()  # the file's log.dirs lost
    finally:
        assert broker.stop() == 0
