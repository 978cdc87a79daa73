"""``--command-config`` on the client commands: ``topics``, ``produce``, ``consume``, ``groups``
and ``perf`` reach a ``SASL_SSL`` listener with Kafka's client properties (a JAAS line,
SCRAM-SHA-512, a PEM truststore), and a property the client does not know is refused with
its name before anything connects."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.broker.security.conftest import USER, USER_PASSWORD, start_secure_broker
from tests.broker_process import REPO, BrokerProcess

pytestmark = pytest.mark.slow


class Result(NamedTuple):
    status: int
    out: str
    err: str


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[BrokerProcess]:
    process = start_secure_broker(tmp_path_factory.mktemp("cli-secure") / "logs", certs)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client_properties(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Path:
    path = tmp_path_factory.mktemp("props") / "client.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs / 'ca.pem'}\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{USER}" password="{USER_PASSWORD}";\n'
    )
    return path


def odradek(broker: BrokerProcess, config: Path, *args: str, stdin: str = "") -> Result:
    bootstrap = f"127.0.0.1:{broker.ports['SASL_SSL']}"
    command, rest = args[0], args[1:]
    if command in ("topics", "groups", "perf"):  # an action comes before the options
        command, rest = f"{command} {rest[0]}", rest[1:]
    done = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", *command.split(), *rest,
         "--bootstrap-server", bootstrap, "--command-config", str(config)],
        input=stdin, capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    return Result(done.returncode, done.stdout, done.stderr)


def test_client_commands_over_sasl_ssl(broker: BrokerProcess, client_properties: Path) -> None:
    run = lambda *args, stdin="": odradek(broker, client_properties, *args, stdin=stdin)  # noqa: E731
    created = run("topics", "create", "secured", "--partitions", "2")
    assert created.status == 0, created.err
    assert "secured" in run("topics", "list").out
    produced = run("produce", "secured", "--key-separator", ":", stdin="k1:one\nk2:two\n")
    assert produced.status == 0, produced.err
    consumed = run("consume", "secured", "--from-beginning", "--group", "g1", "--max-messages", "2")
    assert consumed.status == 0, consumed.err
    assert sorted(consumed.out.split()) == ["one", "two"]
    described = run("groups", "describe", "g1")
    assert described.status == 0 and "secured" in described.out, described.err
    perf = run("perf", "produce", "--topic", "secured", "--num-records", "2000")
    assert perf.status == 0, perf.err


def test_an_unknown_property_is_named(
    broker: BrokerProcess, client_properties: Path, tmp_path: Path
) -> None:
    config = tmp_path / "typo.properties"
    config.write_text(client_properties.read_text() + "ssl.trustsore.location=/x.pem\n")
    result = odradek(broker, config, "topics", "list")
    assert result.status == 1
    assert "ssl.trustsore.location" in result.err
    assert USER_PASSWORD not in result.err
