"""Helpers of the JVM readers' tests (``format("odradek-jvm")`` and ``format("odradek-files")``,
sources in odradek/spark/jvm/src/odradek): load a topic through a reader and through the Python
source, the rows of a DataFrame in a comparable form, and a scan's tasks planned and read one by
one as Spark's driver and executors would."""

from __future__ import annotations

import functools
from typing import Any

from tests.broker.wire import Wire

OFFSET_COLUMN = 4  # key, value, topic, partition, offset, ...


def plan(spark: Any, source_class: str, options: dict[str, str]) -> tuple[Any, list[Any]]:
    """The scan's batch and its planned tasks, as Spark's driver gets them from the source
    ``source_class`` (``odradek.broker.BrokerSource``, ``odradek.files.FilesSource``)."""
    jvm = spark._jvm
    props = jvm.java.util.HashMap()
    for name, value in options.items():
        props.put(name, value)
    cased = jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap(props)
    source = functools.reduce(getattr, source_class.split("."), jvm)()
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


def bootstrap(wire: Wire) -> str:
    return f"127.0.0.1:{wire.sock.getpeername()[1]}"


def load(spark: Any, fmt: str, servers: str, **options: str) -> Any:
    """``spark.read.format(fmt)`` (``odradek-jvm`` or ``odradek``) on ``servers``."""
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", servers)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def all_rows(df: Any) -> list[tuple[Any, ...]]:
    """Every column of every row, headers as lists of pairs, sorted by topic-partition-offset."""
    return sorted(
        (
            (r.topic, r.partition, r.offset),
            r.key,
            r.value,
            r.timestamp,
            r.timestampType,
            *(
                ([None if r.headers is None else [(h.key, h.value) for h in r.headers]])
                if "headers" in df.columns
                else []
            ),
        )
        for r in df.collect()
    )


def both(spark: Any, wire: Wire, **options: str) -> tuple[list[Any], list[Any]]:
    """The rows of the same read through the JVM reader and through the Python source."""
    servers = bootstrap(wire)
    return (
        all_rows(load(spark, "odradek-jvm", servers, **options)),
        all_rows(load(spark, "odradek", servers, **options)),
    )
