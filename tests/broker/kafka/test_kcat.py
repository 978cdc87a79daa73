"""kcat, the command-line tool the issue tried first ("Disconnected while requesting
ApiVersion"), against a real broker: metadata, produce in every codec, consume, and a balanced
consumer group whose commits the odradek client reads. Debian's kcat links librdkafka 2.0.2,
an older client than confluent-kafka's (it uses Produce v7 and Fetch v11). ``make install``
installs kcat when it is missing."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from odradek import Admin, TopicPartition
from tests.broker_process import BrokerProcess

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make install adds it)")


def _kcat(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [KCAT or "kcat", "-b", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_metadata_lists_this_broker_as_controller(
    shared_broker: BrokerProcess, new_topic: str
) -> None:
    out = _kcat(shared_broker, "-L", "-t", new_topic)
    assert f"broker 1 at {shared_broker.bootstrap} (controller)" in out
    assert f'topic "{new_topic}" with 1 partitions' in out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_in_every_codec(
    shared_broker: BrokerProcess, new_topic: str, codec: str
) -> None:
    lines = "".join(f"k{i}:{codec}-{i}\n" for i in range(50))
    _kcat(shared_broker, "-t", new_topic, "-P", "-K:", "-z", codec, stdin=lines)
    out = _kcat(shared_broker, "-t", new_topic, "-C", "-e", "-K:", "-f", "%k=%s@%o\n")
    assert out.splitlines() == [f"k{i}={codec}-{i}@{i}" for i in range(50)]


def test_a_balanced_consumer_group_commits_where_odradek_reads_them(
    shared_broker: BrokerProcess, new_topic: str
) -> None:
    _kcat(shared_broker, "-t", new_topic, "-P", stdin="".join(f"v{i}\n" for i in range(20)))
    group = f"{new_topic}-kcat"
    out = _kcat(
        shared_broker,
        "-G",
        group,
        new_topic,
        "-e",
        "-f",
        "%s\n",
        "-X",
        "auto.offset.reset=earliest",
    )
    assert out.splitlines() == [f"v{i}" for i in range(20)]
    with Admin(shared_broker.bootstrap) as admin:
        committed = admin.list_group_offsets(group)
    assert committed[TopicPartition(new_topic, 0)].offset == 20
