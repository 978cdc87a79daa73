"""``odradek consume --group`` and ``odradek groups ...`` run as real commands against a real
broker: commits and a clean leave on exit (also on Ctrl-C), describe with lag and members,
reset-offsets (dry run, --execute, refused for an active group), delete."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from odradek.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
FAST = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=200"]


class Result(NamedTuple):
    status: int
    out: str
    err: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess([tmp_path_factory.mktemp("cli-groups") / "logs"], overrides=FAST)
    broker.start()
    yield broker
    assert broker.stop() == 0


@pytest.fixture
def odradek(server: BrokerProcess) -> Callable[..., Result]:
    def run(*args: str, timeout_s: float = 60) -> Result:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "odradek.cli.main",
                *args,
                "--bootstrap-server",
                server.bootstrap,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout_s,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def groups_cmd(server: BrokerProcess, capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``odradek ARGS`` run in this process (``odradek.cli.main.main``): the same code as the
    command, without an interpreter start per call."""
    from odradek.cli.main import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        status = main([*args, "--bootstrap-server", server.bootstrap])
        out, err = capsys.readouterr()
        return Result(status, out, err)

    return run


def fill(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    with Producer(bootstrap) as producer:
        for i in range(count):
            producer.send(topic, b"v%d" % i, partition=i % partitions)


def rows(out: str) -> list[list[str]]:
    """The rows of a printed table after its header line (split on whitespace)."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line[0] == "GROUP")
    return lines[start + 1 :]


def test_consume_with_a_group_commits_and_leaves(
    odradek: Callable[..., Result], server: BrokerProcess
) -> None:
    fill(server.bootstrap, "cg", 10)
    first = odradek("consume", "cg", "--group", "cg-g", "--from-beginning", "--max-messages", "6")
    assert first.status == 0, first.err
    assert first.out.split() == [f"v{i}" for i in range(6)]
    described = odradek("groups", "describe", "cg-g")
    assert "Consumer group 'cg-g' has no active members." in described.out  # it left
    assert rows(described.out) == [["cg-g", "cg", "0", "6", "10", "4", "-", "-", "-"]]
    # --from-beginning only applies where nothing is committed: this resumes at 6
    rest = odradek("consume", "cg", "--group", "cg-g", "--from-beginning", "--timeout-ms", "1500")
    assert rest.status == 0, rest.err
    assert rest.out.split() == [f"v{i}" for i in range(6, 10)]
    assert "Processed a total of 4 messages" in rest.err
    assert rows(odradek("groups", "describe", "cg-g").out)[0][3:6] == ["10", "10", "0"]
    assert "cg-g" in odradek("groups", "list").out.split()


def test_consume_with_a_group_commits_on_ctrl_c(server: BrokerProcess) -> None:
    fill(server.bootstrap, "cc", 5)
    args = ["consume", "cc", "--group", "cc-g", "--from-beginning"]
    process = subprocess.Popen(
        [sys.executable, "-m", "odradek.cli.main", *args, "--bootstrap-server", server.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread's stack
        # Ctrl-C as a terminal sends it: a test run started as a shell's background job
        # inherits SIGINT ignored, and Python then never raises KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(5)]
        assert [line.strip() for line in lines] == [f"v{i}" for i in range(5)]
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(30) == 130
        except subprocess.TimeoutExpired:  # say where it hangs
            process.send_signal(signal.SIGABRT)
            _, stderr = process.communicate(timeout=30)
            pytest.fail(f"consume --group did not exit 30 s after Ctrl-C; its threads:\n{stderr}")
    finally:
        if process.poll() is None:  # never leave a consumer reconnecting to a reused port
            process.kill()
            process.wait()
    with Admin(server.bootstrap) as admin:
        assert admin.list_group_offsets("cc-g")[TopicPartition("cc", 0)].offset == 5
        assert admin.describe_groups(["cc-g"])[0].state == "Empty"


def test_describe_reset_offsets_delete_offsets_and_delete(
    groups_cmd: Callable[..., Result], server: BrokerProcess
) -> None:
    odradek = groups_cmd
    fill(server.bootstrap, "rs", 20, partitions=2)
    consumer = Consumer(
        "rs",
        bootstrap_servers=server.bootstrap,
        group_id="rs-g",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = 0
    while got < 20:
        got += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
    consumer.commit({TopicPartition("rs", 0): 7, TopicPartition("rs", 1): 10})
    member = rows(odradek("groups", "describe", "rs-g").out)
    assert [r[:6] for r in member] == [
        ["rs-g", "rs", "0", "7", "10", "3"],
        ["rs-g", "rs", "1", "10", "10", "0"],
    ]
    assert member[0][6].startswith("odradek-python-") and member[0][8] == "odradek-python"
    members = rows(odradek("groups", "describe", "rs-g", "--members").out)
    assert [r[4:] for r in members] == [["2", "rs:0,rs:1"]]
    assert rows(odradek("groups", "describe", "rs-g", "--state").out) == [
        ["rs-g", "range", "Stable", "1"]
    ]
    refused = odradek("groups", "reset-offsets", "rs-g", "--topic", "rs", "--to-earliest")
    assert refused.status == 1 and "current state is Stable" in refused.err
    deleted = odradek("groups", "delete", "rs-g")
    assert deleted.status == 1 and "NonEmptyGroupError" in deleted.err
    subscribed = odradek("groups", "delete-offsets", "rs-g", "--topic", "rs")
    assert subscribed.status == 1 and "kept their offsets" in subscribed.err
    assert subscribed.out.split("\n")[1:] == [
        "TOPIC  PARTITION  STATUS",
        "rs     0          Error: GroupSubscribedToTopicError",
        "rs     1          Error: GroupSubscribedToTopicError",
        "",
    ]
    consumer.close()

    def reset(*how: str) -> list[list[str]]:
        result = odradek("groups", "reset-offsets", "rs-g", "--topic", "rs", *how)
        assert result.status == 0, result.err
        return [r[2:] for r in rows(result.out) if r[0] == "rs-g"]

    def current() -> list[str]:
        return [r[3] for r in rows(odradek("groups", "describe", "rs-g").out)]

    assert reset("--to-earliest") == [["0", "0"], ["1", "0"]]
    assert current() == ["7", "10"]  # a dry run changes nothing
    assert reset("--to-earliest", "--execute") == [["0", "0"], ["1", "0"]]
    assert current() == ["0", "0"]
    assert reset("--to-offset", "99", "--execute") == [["0", "10"], ["1", "10"]]  # clamped
    assert reset("--shift-by", "-3", "--execute") == [["0", "7"], ["1", "7"]]
    assert reset("--to-datetime", "2000-01-01T00:00:00.000", "--execute") == [
        ["0", "0"],
        ["1", "0"],
    ]
    assert reset("--to-latest", "--dry-run") == [["0", "10"], ["1", "10"]]
    one = odradek("groups", "reset-offsets", "rs-g", "--topic", "rs:1", "--to-latest", "--execute")
    assert [r[2:] for r in rows(one.out)] == [["1", "10"]]
    assert current() == ["0", "10"]
    assert odradek("groups", "delete-offsets", "rs-g", "--topic", "rs:1") == Result(
        0,
        "Request succeed for deleting offsets with topic rs group rs-g\n\n"
        "TOPIC  PARTITION  STATUS\nrs     1          Successful\n",
        "",
    )
    assert current() == ["0"]  # rs-1: nothing committed, no member

    assert odradek("groups", "delete", "rs-g") == Result(
        0, "Deletion of requested consumer groups ('rs-g') was successful.\n", ""
    )
    assert "rs-g" not in odradek("groups", "list").out.split()
    missing = odradek("groups", "describe", "rs-g")
    assert missing.status == 1 and "does not exist" in missing.err
