"""Shared by the Spark tests (tests/spark and tests/pipelines): ONE local Spark
session and ONE broker process per pytest session, plus helpers to put known records on a
topic with the raw-protocol test client.

Both conftests expose the fixtures below; the objects are created once (module-level
singletons) and stopped when the last user's session fixture is torn down.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

_shared: dict[str, Any] = {}
_users = {"spark": 0, "broker": 0}


def _spark() -> Any:
    if "spark" not in _shared:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        import odradek.spark

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("odradek-tests")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.streaming.stopTimeout", "30s")
            .config("spark.jars", odradek.spark.jar_path())  # format("odradek-files")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        odradek.spark.register(spark)
        _shared["spark"] = spark
    return _shared["spark"]


def _broker() -> BrokerProcess:
    if "broker" not in _shared:
        root = Path(tempfile.mkdtemp(prefix="odradek-spark-"))
        _shared["broker_root"] = root
        # The tests' records carry fixed timestamps of 2023 (T0): with the default retention
        # (7 days), the broker's first retention check, 5 minutes after it starts, would
        # delete them under whichever test is running then.
        _shared["broker"] = BrokerProcess(
            [root / "logs"], overrides=["log.retention.ms=-1"]
        ).start()
    return _shared["broker"]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    _users["spark"] += 1
    yield _spark()
    _users["spark"] -= 1
    if _users["spark"] == 0 and "spark" in _shared:
        _shared.pop("spark").stop()


@pytest.fixture(scope="session")
def spark_broker() -> Iterator[BrokerProcess]:
    _users["broker"] += 1
    yield _broker()
    _users["broker"] -= 1
    if _users["broker"] == 0 and "broker" in _shared:
        _shared.pop("broker").stop()


@pytest.fixture
def wire(spark_broker: BrokerProcess) -> Iterator[Wire]:
    with Wire(spark_broker.port) as connection:  # type: ignore[arg-type]
        yield connection


_topic_counter = [0]


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (not created)."""
    import re

    _topic_counter[0] += 1
    name = re.sub(r"[^a-zA-Z0-9._-]", "_", request.node.name)[:150]
    return f"{name}.{_topic_counter[0]}"


Record = (
    tuple[bytes | None, bytes | None, int]
    | tuple[bytes | None, bytes | None, int, Sequence[tuple[str, bytes | None]]]
)


def produce(
    wire: Wire, topic: str, partition: int, records: Sequence[Record], **options: Any
) -> int:
    """Append ``(key, value, timestamp_ms[, headers])`` as one batch; returns its base offset."""
    result = wire.produce(topic, partition, encode_batch(records, **options))
    assert result.error_code == 0, result
    return result.base_offset


def delete_records(wire: Wire, topic: str, partition: int, before_offset: int) -> int:
    """DeleteRecords: move the log start offset to ``before_offset``; returns the new one."""
    result = wire.delete_records(topic, partition, before_offset)
    assert result.error_code == 0, result
    return result.low_watermark


def add_partitions(wire: Wire, topic: str, total: int) -> None:
    """CreatePartitions: grow ``topic`` to ``total`` partitions."""
    response = wire.call(
        m.CreatePartitionsRequest(
            correlation_id=0, topics=[m.CreatePartitionsTopic(name=topic, count=total)]
        )
    )
    assert response.results[0].error_code == 0, response.results[0]
