"""Batch and streaming writes with a real Spark session, read back through the source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from tests.broker.wire import Wire
from tests.spark.spark_support import produce

pytestmark = pytest.mark.slow

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def bootstrap(wire: Wire) -> str:
    return f"127.0.0.1:{wire.sock.getpeername()[1]}"


def read_back(spark: Any, wire: Wire, topic: str) -> list[Any]:
    df = (
        spark.read.format("odradek")
        .option("bootstrap.servers", bootstrap(wire))
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    return df.orderBy("partition", "offset").collect()


def test_batch_write_string_key_headers_partition_column(
    spark: Any, wire: Wire, topic: str
) -> None:
    wire.create_topic(topic, partitions=3)
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", StringType()),
            StructField("partition", IntegerType()),
            StructField("headers", HEADERS),
            StructField("ignored", IntegerType()),
        ]
    )
    rows = [
        (f"k{i}", f"value-{i}", i % 3, [("n", str(i).encode())] if i % 2 else None, i)
        for i in range(30)
    ]
    df = spark.createDataFrame(rows, schema).coalesce(1)  # one task: a defined order
    (
        df.write.format("odradek")
        .option("bootstrap.servers", bootstrap(wire))
        .option("topic", topic)
        .mode("append")
        .save()
    )
    got = read_back(spark, wire, topic)
    assert len(got) == 30
    by_key = {r.key: r for r in got}
    for i in range(30):
        r = by_key[f"k{i}".encode()]
        assert r.value == f"value-{i}".encode()
        assert r.partition == i % 3
        assert (None if r.headers is None else [(h.key, h.value) for h in r.headers]) == (
            [("n", str(i).encode())] if i % 2 else None
        )
    # records of one partition keep the order of the rows that were written to it
    for p in range(3):
        keys = [r.key for r in got if r.partition == p]
        assert keys == sorted(keys, key=lambda k: int(k[1:]))


def test_batch_write_topic_column_binary_key_and_null_key(
    spark: Any, wire: Wire, topic: str
) -> None:
    first, second = f"{topic}-a", f"{topic}-b"
    wire.create_topic(first, partitions=1)
    wire.create_topic(second, partitions=1)
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
        ]
    )
    rows = [(first, b"\x00\xff", b"one"), (second, None, b"two"), (first, b"", b"three")]
    spark.createDataFrame(rows, schema).write.format("odradek").option(
        "bootstrap.servers", bootstrap(wire)
    ).mode("append").save()
    # two Spark tasks write concurrently: the order across them is not defined
    assert sorted((r.key, r.value) for r in read_back(spark, wire, first)) == [
        (b"", b"three"),
        (b"\x00\xff", b"one"),
    ]
    assert [(r.key, r.value) for r in read_back(spark, wire, second)] == [(None, b"two")]


def test_topic_option_wins_over_the_topic_column(spark: Any, wire: Wire, topic: str) -> None:
    wire.create_topic(topic, partitions=1)
    df = spark.createDataFrame([("elsewhere", "v")], "topic string, value string")
    df.write.format("odradek").option("bootstrap.servers", bootstrap(wire)).option(
        "topic", topic
    ).mode("append").save()
    assert [r.value for r in read_back(spark, wire, topic)] == [b"v"]


@pytest.mark.parametrize(
    ("ddl", "named"),
    [
        ("key string", "value"),
        ("value int", "value"),
        ("value string, partition string", "partition"),
        ("value string, key int", "key"),
    ],
)
def test_bad_write_schemas_name_the_column(
    spark: Any, wire: Wire, topic: str, ddl: str, named: str
) -> None:
    df = spark.createDataFrame([], ddl)
    with pytest.raises(Exception, match=f"option '{named}'"):
        df.write.format("odradek").option("bootstrap.servers", bootstrap(wire)).option(
            "topic", topic
        ).mode("append").save()


def test_write_to_missing_partition_fails_with_the_brokers_error(
    spark: Any, wire: Wire, topic: str
) -> None:
    wire.create_topic(topic, partitions=1)
    df = spark.createDataFrame([("v", 5)], "value string, partition int")
    with pytest.raises(Exception, match="UnknownTopicOrPartition"):
        df.write.format("odradek").option("bootstrap.servers", bootstrap(wire)).option(
            "topic", topic
        ).mode("append").save()


def test_streaming_read_transform_write(spark: Any, wire: Wire, topic: str, tmp_path: Path) -> None:
    source, sink = f"{topic}-in", f"{topic}-out"
    wire.create_topic(source, partitions=2)
    wire.create_topic(sink, partitions=2)
    for p in range(2):
        produce(
            wire, source, p, [(f"k{p}{i}".encode(), f"v{p}{i}".encode(), 1000) for i in range(20)]
        )
    query = (
        spark.readStream.format("odradek")
        .option("bootstrap.servers", bootstrap(wire))
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", F.upper(F.col("value").cast("string")).alias("value"), "partition")
        .writeStream.format("odradek")
        .option("bootstrap.servers", bootstrap(wire))
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        produce(wire, source, 1, [(b"late", b"late", 2000)])
        query.processAllAvailable()
    finally:
        query.stop()
    got = read_back(spark, wire, sink)
    assert sorted((r.partition, r.key, r.value) for r in got) == sorted(
        [(p, f"k{p}{i}".encode(), f"V{p}{i}".encode()) for p in range(2) for i in range(20)]
        + [(1, b"late", b"LATE")]
    )
