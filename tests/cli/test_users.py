"""``odradek users`` as a real command: the first user made in the log directories before
the broker starts (and refused while it runs), then users created, listed and deleted through
the running broker; each checked by a real Kafka client authenticating with SCRAM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.broker_process import REPO, BrokerProcess

pytestmark = pytest.mark.slow


class Result(NamedTuple):
    status: int
    out: str
    err: str


def odradek(*args: str, stdin: str = "") -> Result:
    done = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "users", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def _authenticates(broker: BrokerProcess, user: str, password: str) -> bool:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username=user,
            sasl_plain_password=password,
            bootstrap_timeout_ms=3000,
        )
    except KafkaError:
        return False
    admin.close()
    return True


def test_users_offline_then_online(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={logs}\n")
    made = odradek("create", "admin", "--config", str(config), stdin="first secret\n")
    assert made.status == 0, made.err
    listed = odradek("list", "--config", str(config))
    assert "admin: SCRAM-SHA-256 (iterations 4096), SCRAM-SHA-512 (iterations 4096)" in listed.out

    broker = BrokerProcess(
        [logs],
        listeners=("PLAINTEXT", "SASL_PLAINTEXT"),
        overrides=["connection.failed.authentication.delay.ms=0"],
    ).start()
    try:
        assert _authenticates(broker, "admin", "first secret")
        assert not _authenticates(broker, "admin", "second guess")
        busy = odradek("create", "eve", "--config", str(config), stdin="x\n")
        assert busy.status == 2 and "locked by a running broker" in busy.err

        online = ["--bootstrap-server", broker.bootstrap]
        made = odradek("create", "bob", *online, "--mechanism", "SCRAM-SHA-512", stdin="pw-b\n")
        assert made.status == 0 and "bob: created" in made.out, made.err
        assert _authenticates(broker, "bob", "pw-b")
        listed = odradek("list", *online)
        assert "bob: SCRAM-SHA-512 (iterations 4096)" in listed.out
        assert listed.out.index("admin:") < listed.out.index("bob:")
        bad = odradek("create", "carol", *online, "--iterations", "100", stdin="pw\n")
        assert bad.status == 1 and "UNACCEPTABLE_CREDENTIAL" in bad.err
        deleted = odradek("delete", "bob", *online, "--mechanism", "SCRAM-SHA-512")
        assert deleted.status == 0, deleted.err
        assert not _authenticates(broker, "bob", "pw-b")
        gone = odradek("delete", "bob", *online, "--mechanism", "SCRAM-SHA-512")
        assert gone.status == 1 and "RESOURCE_NOT_FOUND" in gone.err
    finally:
        broker.stop()
    for line in broker.raw_lines:
        assert "first secret" not in line and "pw-b" not in line
