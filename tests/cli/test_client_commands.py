"""``odradek topics|produce|consume`` run as real commands against a real broker."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]


class Result(NamedTuple):
    status: int
    out: str
    err: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess:
    broker = BrokerProcess(
        [tmp_path_factory.mktemp("cli") / "logs"],
        overrides=["message.max.bytes=2000", "auto.create.topics.enable=false"],
    ).start()
    yield broker  # type: ignore[misc]
    assert broker.stop() == 0


@pytest.fixture
def odradek(server: BrokerProcess) -> Callable[..., Result]:
    def run(*args: str, stdin: str = "", timeout_s: float = 60) -> Result:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "odradek.cli.main",
                *args,
                "--bootstrap-server",
                server.bootstrap,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout_s,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run


def test_topic_lifecycle(odradek: Callable[..., Result]) -> None:
    created = odradek(
        "topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=60000"
    )
    assert created == Result(0, "Created topic orders.\n", "")
    again = odradek("topics", "create", "orders", "--partitions", "3")
    assert again.status == 1 and "TopicAlreadyExistsError" in again.err
    assert odradek("topics", "create", "orders", "--if-not-exists").status == 0
    assert "orders" in odradek("topics", "list").out.split()

    described = odradek("topics", "describe", "orders").out.splitlines()
    assert described[0] == (
        "Topic: orders\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000"
    )
    assert [line.split("\t")[2] for line in described[1:]] == [
        "Partition: 0",
        "Partition: 1",
        "Partition: 2",
    ]
    assert "LogEndOffset: 0\tSize: 0" in described[1]

    altered = odradek(
        "topics", "alter", "orders", "--config", "segment.bytes=1048576",
        "--delete-config", "retention.ms", "--partitions", "4",
    )  # fmt: skip
    assert altered.status == 0, altered.err
    described = odradek("topics", "describe", "orders").out.splitlines()
    assert described[0].endswith("\tConfigs: segment.bytes=1048576")
    assert len(described) == 5
    every = odradek("topics", "describe", "orders", "--all-configs").out.splitlines()[0]
    assert "segment.bytes=1048576(DYNAMIC_TOPIC_CONFIG)" in every
    assert "retention.ms=604800000(" in every  # the broker default again

    assert odradek("topics", "delete", "orders") == Result(0, "", "")
    assert "orders" not in odradek("topics", "list").out.split()
    gone = odradek("topics", "delete", "orders")
    assert gone.status == 1 and "UnknownTopicOrPartitionError" in gone.err
    assert odradek("topics", "delete", "orders", "--if-exists").status == 0


def test_bad_topic_names_and_configs_are_named(odradek: Callable[..., Result]) -> None:
    for name in ("../x", "a" * 250, "bad/name"):
        result = odradek("topics", "create", name)
        assert result.status == 1 and "InvalidTopicError" in result.err, name
    bad_config = odradek("topics", "create", "cfg", "--config", "retention.ms=soon")
    assert bad_config.status == 1 and "retention.ms" in bad_config.err
    usage = odradek("topics", "create", "cfg", "--config", "novalue")
    assert usage.status == 2 and "key=value" in usage.err


def test_produce_then_consume_round_trip(odradek: Callable[..., Result]) -> None:
    assert odradek("topics", "create", "lines", "--partitions", "1").status == 0
    lines = "k1:first\nk2:second:with:colons\n:empty key\nk4:\n"
    produced = odradek("produce", "lines", "--key-separator", ":", "--header", "h=1", stdin=lines)
    assert produced == Result(0, "", "")
    consumed = odradek(
        "consume", "lines", "--from-beginning", "--print-key", "--print-offset",
        "--timeout-ms", "1500",
    )  # fmt: skip
    assert consumed.status == 0, consumed.err
    assert consumed.out.splitlines() == [
        "Offset:0\tk1\tfirst",
        "Offset:1\tk2\tsecond:with:colons",
        "Offset:2\t\tempty key",
        "Offset:3\tk4\t",
    ]
    assert consumed.err.strip().endswith("Processed a total of 4 messages")

    # Without a separator a line is a value with a null key.
    assert odradek("produce", "lines", "--compression", "zstd", stdin="plain\n").status == 0
    tail = odradek(
        "consume", "lines", "--partition", "0", "--offset", "4", "--print-key",
        "--max-messages", "1",
    )  # fmt: skip
    assert tail.out == "null\tplain\n"
    two = odradek(
        "consume", "lines", "--partition", "0", "--offset", "earliest", "--max-messages", "2"
    )
    assert two.out == "first\nsecond:with:colons\n"


def test_produce_fails_loudly(odradek: Callable[..., Result]) -> None:
    assert odradek("topics", "create", "strict").status == 0
    no_separator = odradek("produce", "strict", "--key-separator", ":", stdin="a:1\nnope\n")
    assert no_separator.status == 1 and "line 2" in no_separator.err
    too_big = odradek("produce", "strict", stdin="x" * 5000 + "\n")
    assert too_big.status == 1 and "MessageSizeTooLargeError" in too_big.err
    unknown = odradek("produce", "no-such-topic", "--max-block-ms", "1000", stdin="a\n")
    assert unknown.status == 1 and "UnknownTopicOrPartitionError" in unknown.err


def test_consume_of_a_missing_topic_is_an_error(odradek: Callable[..., Result]) -> None:
    result = odradek("consume", "missing", "--timeout-ms", "200")
    assert result.status == 1 and "missing" in result.err
    usage = odradek("consume", "missing", "--offset", "3")
    assert usage.status == 2 and "--partition" in usage.err
