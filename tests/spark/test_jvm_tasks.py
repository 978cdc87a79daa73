"""``format("odradek-jvm")``'s planning and tasks driven one by one through the DataSource V2
interfaces (py4j, the test session's JVM), so the broker can change between planning and a
task's fetches: records deleted meanwhile are data loss (``failOnDataLoss``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.broker.wire import Wire
from tests.spark.jvm_support import bootstrap
from tests.spark.spark_support import delete_records, produce

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000
OFFSET_COLUMN = 4  # key, value, topic, partition, offset, ...


def plan(spark: Any, options: dict[str, str]) -> tuple[Any, list[Any]]:
    """The scan's batch and its planned tasks (``OffsetRange``), as Spark's driver gets them."""
    jvm = spark._jvm
    props = jvm.java.util.HashMap()
    for name, value in options.items():
        props.put(name, value)
    cased = jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap(props)
    source = jvm.odradek.broker.BrokerSource()
    transforms = spark.sparkContext._gateway.new_array(
        jvm.org.apache.spark.sql.connector.expressions.Transform, 0
    )
    table = source.getTable(source.inferSchema(cased), transforms, props)
    scan_batch = table.newScanBuilder(cased).build().toBatch()
    return scan_batch, list(scan_batch.planInputPartitions())


def read(scan_batch: Any, task: Any) -> list[int]:
    """The offsets one task returns."""
    reader = scan_batch.createReaderFactory().createColumnarReader(task)
    offsets: list[int] = []
    try:
        while reader.next():
            columns = reader.get()
            vector = columns.column(OFFSET_COLUMN)
            offsets += [vector.getLong(i) for i in range(columns.numRows())]
    finally:
        reader.close()
    return offsets


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
