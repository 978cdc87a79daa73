"""``format("odradek-jvm")``'s planning and tasks driven one by one through the DataSource V2
interfaces (py4j, the test session's JVM), so the broker can change between planning and a
task's fetches: records deleted meanwhile are data loss (``failOnDataLoss``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.broker.wire import Wire
from tests.spark import jvm_support
from tests.spark.jvm_support import bootstrap, read
from tests.spark.spark_support import delete_records, produce

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000


def plan(spark: Any, options: dict[str, str]) -> tuple[Any, list[Any]]:
    """The scan's batch and its planned tasks (``OffsetRange``)."""
    return jvm_support.plan(spark, "odradek.broker.BrokerSource", options)


@pytest.mark.parametrize("fail", [True, False])
def test_records_deleted_after_planning(spark: Any, wire: Wire, topic: str, fail: bool) -> None:
    wire.create_topic(topic, partitions=1)
    for i in range(10):
        produce(wire, topic, 0, [(None, str(i).encode(), T0)])
    options = {
        "kafka.bootstrap.servers": bootstrap(wire),
        "subscribe": topic,
        "maxRecordsPerPartition": "4",
        "failOnDataLoss": str(fail).lower(),
    }
    scan_batch, tasks = plan(spark, options)
    ranges = [(t.fromOffset(), t.untilOffset()) for t in tasks]
    assert ranges == [(0, 3), (3, 6), (6, 10)]  # ceil(10 / 4) = 3 pieces, sizes within one
    assert delete_records(wire, topic, 0, 5) == 5
    if fail:
        with pytest.raises(Exception, match=r"offsets 0 to 2 are lost.*failOnDataLoss=false"):
            read(scan_batch, tasks[0])
        return
    assert read(scan_batch, tasks[0]) == []  # wholly deleted
    assert read(scan_batch, tasks[1]) == [5]  # 3 and 4 deleted
    assert read(scan_batch, tasks[2]) == [6, 7, 8, 9]
