"""Issue 14, finding 11: where ``odradek serve`` takes its log dirs and environment from, and the
values it must refuse. Each case runs a real ``odradek serve`` process in a temp directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess


def serve(
    tmp_path: Path, *lines: str, env: dict[str, str] | None = None, timeout_s: float = 30
) -> subprocess.CompletedProcess[str]:
    """``odradek serve`` on a properties file of ``lines``, run in ``tmp_path`` (so a relative
    directory it wrongly creates lands there)."""
    config = tmp_path / "server.properties"
    config.write_text("\n".join(["listeners=PLAINTEXT://127.0.0.1:0", *lines]) + "\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    environ.update(env or {})
    command = [sys.executable, "-m", "odradek.cli.main", "serve", "--log-format", "json"]
    return subprocess.run(
        [*command, "--config", str(config)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


class ConfiguredBroker(BrokerProcess):
    """A broker run only from a properties file and the environment (no log.dirs override)."""

    def __init__(self, tmp_path: Path, lines: list[str], env: dict[str, str]) -> None:
        super().__init__([], env=env, cwd=tmp_path)
        self.config = tmp_path / "server.properties"
        self.config.write_text("\n".join(["listeners=PLAINTEXT://127.0.0.1:0", *lines]) + "\n")

    def command(self) -> list[str]:
        serve = [sys.executable, "-m", "odradek.cli.main", "serve", "--log-format", "json"]
        return [*serve, "--config", str(self.config)]


@pytest.mark.parametrize("value", ["", " ", ",", " , "])
def test_empty_log_dirs_is_an_error_not_a_directory_named_none(tmp_path: Path, value: str) -> None:
    result = serve(tmp_path, f"log.dirs={value}")
    assert result.returncode == 2, result.stderr
    assert "log.dirs" in result.stderr and "names no directory" in result.stderr, result.stderr
    assert str(tmp_path / "server.properties") in result.stderr
    assert not (tmp_path / "None").exists()


def test_empty_log_dirs_from_an_unset_variable(tmp_path: Path) -> None:
    result = serve(tmp_path, f"log.dirs={tmp_path / 'logs'}", env={"ODRADEK_LOG_DIRS": ""})
    assert result.returncode == 2, result.stderr
    assert "environment variable ODRADEK_LOG_DIRS" in result.stderr, result.stderr
    assert not (tmp_path / "None").exists() and not (tmp_path / "logs").exists()


def test_log_dir_is_honoured_and_log_dirs_wins(tmp_path: Path) -> None:
    single = tmp_path / "single"
    broker = ConfiguredBroker(tmp_path, [f"log.dir={single}"], {})
    broker.start()
    try:
        (started,) = broker.events("broker started")
        assert started["log_dirs"] == [str(single)]
        assert (single / "meta.properties").exists()
    finally:
        assert broker.stop() == 0
    plural = tmp_path / "plural"
    broker = ConfiguredBroker(tmp_path, [f"log.dir={single}", f"log.dirs={plural}"], {})
    broker.start()
    try:
        (started,) = broker.events("broker started")
        assert started["log_dirs"] == [str(plural)]
    finally:
        assert broker.stop() == 0


def test_unrelated_odradek_variables_do_not_stop_start_up(tmp_path: Path) -> None:
    env = {"ODRADEK_HOME": "/opt/odradek", "ODRADEK_OPTS": "-v"}
    broker = ConfiguredBroker(tmp_path, [f"log.dirs={tmp_path / 'logs'}"], env)
    broker.start()
    try:
        ignored = broker.events("configuration ignored")
        reasons = " ".join(e["reason"] for e in ignored)
        assert "ODRADEK_HOME" in reasons and "ODRADEK_OPTS" in reasons, ignored
        assert "/opt/odradek" not in reasons  # a variable's value may be a secret: not logged
    finally:
        assert broker.stop() == 0


def test_a_known_key_in_the_environment_is_still_validated(tmp_path: Path) -> None:
    result = serve(tmp_path, f"log.dirs={tmp_path / 'logs'}", env={"ODRADEK_NODE_ID": "-3"})
    assert result.returncode == 2
    assert "ODRADEK_NODE_ID" in result.stderr and "node.id" in result.stderr


def test_min_session_timeout_above_max(tmp_path: Path) -> None:
    result = serve(
        tmp_path,
        f"log.dirs={tmp_path / 'logs'}",
        "group.min.session.timeout.ms=60000",
        "group.max.session.timeout.ms=30000",
    )
    assert result.returncode == 2, result.stderr
    for text in ("group.min.session.timeout.ms=60000", "group.max.session.timeout.ms=30000"):
        assert text in result.stderr, result.stderr
    assert str(tmp_path / "server.properties") in result.stderr
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "-1", "0"])
def test_cleaner_io_rate_must_be_a_finite_positive_number(tmp_path: Path, value: str) -> None:
    result = serve(
        tmp_path, f"log.dirs={tmp_path / 'logs'}", f"log.cleaner.io.max.bytes.per.second={value}"
    )
    assert result.returncode == 2, result.stderr
    assert "log.cleaner.io.max.bytes.per.second" in result.stderr
    assert repr(value) in result.stderr and "finite" in result.stderr, result.stderr


def test_no_usable_log_dir_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = serve(tmp_path, f"log.dirs={blocker / 'logs'}")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "ExceptionGroup" not in result.stderr
    events = [json.loads(line) for line in result.stderr.splitlines()]
    (failed,) = [e for e in events if e["event"] == "broker failed to start"]
    assert "no usable log dir" in failed["error"] and str(blocker) in failed["error"]
