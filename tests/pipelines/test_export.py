"""The export batch job: a topic's offset or time range → Parquet partitioned by date."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.pipelines.export import export, read_topic
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess
from tests.spark.spark_support import produce

pytestmark = pytest.mark.slow

DAY_MS = 86_400_000
NOV_14 = 1_699_920_000_000  # 2023-11-14T00:00:00Z


def test_export_by_time_and_by_offsets(
    spark: Any, spark_broker: BrokerProcess, wire: Wire, topic: str, tmp_path: Path
) -> None:
    wire.create_topic(topic, partitions=2)
    # per partition: 4 records on Nov 14, 5 on Nov 15, 6 on Nov 16 (offsets 0-3, 4-8, 9-14)
    for p in range(2):
        records = []
        for day, count in enumerate((4, 5, 6)):
            records += [
                (None, f"{p}/{day}/{i}".encode(), NOV_14 + day * DAY_MS + 3_600_000 * i)
                for i in range(count)
            ]
        produce(wire, topic, p, records)

    by_time = read_topic(
        spark,
        bootstrap=spark_broker.bootstrap,
        topic=topic,
        start_ms=NOV_14 + DAY_MS,
        end_ms=NOV_14 + 2 * DAY_MS + 2 * 3_600_000,
    )
    out = tmp_path / "by-time"
    export(by_time, str(out))
    assert sorted(p.name for p in out.glob("date=*")) == ["date=2023-11-15", "date=2023-11-16"]
    back = spark.read.parquet(str(out))
    counts = {str(r.date): r["count"] for r in back.groupBy("date").count().collect()}
    assert counts == {"2023-11-15": 10, "2023-11-16": 4}  # Nov 16 before 02:00: 2 per partition
    assert set(back.columns) >= {"key", "value", "topic", "partition", "offset", "timestamp"}

    # an offset range; a second export over the same output replaces only the dates it writes
    by_offsets = read_topic(
        spark,
        bootstrap=spark_broker.bootstrap,
        topic=topic,
        starting_offsets=f'{{"{topic}":{{"0":0,"1":2}}}}',
        ending_offsets=f'{{"{topic}":{{"0":4,"1":4}}}}',
    )
    export(by_offsets, str(out))
    back = spark.read.parquet(str(out))
    counts = {str(r.date): r["count"] for r in back.groupBy("date").count().collect()}
    assert counts == {"2023-11-14": 6, "2023-11-15": 10, "2023-11-16": 4}


def test_job_settings_are_sized_to_the_topic_and_overridable() -> None:
    from odradek.pipelines.session import job_settings

    settings = job_settings(3, 2, {})
    assert settings["spark.sql.shuffle.partitions"] == "3"
    assert settings["spark.sql.adaptive.enabled"] == "true"
    assert job_settings(0, 2, {})["spark.sql.shuffle.partitions"] == "1"
    assert job_settings(500, 2, {})["spark.sql.shuffle.partitions"] == "8"  # 4 per core
    override = {"spark.sql.shuffle.partitions": "17"}
    assert job_settings(3, 2, override)["spark.sql.shuffle.partitions"] == "17"
