"""Batch reads with a real Spark session from a real broker: rows, options, splitting, errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tests.broker.wire import Wire
from tests.spark.spark_support import produce

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Spark's Kafka source schema (KafkaRecordToRowConverter), written out independently.
KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
)
HEADERS_FIELD = StructField(
    "headers",
    ArrayType(
        StructType([StructField("key", StringType(), True), StructField("value", BinaryType())]),
        True,
    ),
    True,
)


def load(spark: Any, broker_wire: Wire, **options: str) -> Any:
    reader = spark.read.format("odradek").option(
        "bootstrap.servers", f"127.0.0.1:{broker_wire.sock.getpeername()[1]}"
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def ts(ms: int) -> datetime:
    """How Spark returns a timestamp (a naive local datetime; the session zone is UTC here and
    the driver's Python zone is whatever the machine says, so compare in UTC)."""
    return EPOCH + timedelta(milliseconds=ms)


def as_utc(value: datetime) -> datetime:
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def offsets(df: Any) -> list[tuple[str, int, int]]:
    return sorted(
        (r.topic, r.partition, r.offset)
        for r in df.select("topic", "partition", "offset").collect()
    )


@pytest.fixture
def two_partitions(wire: Wire, topic: str) -> str:
    """Partition 0: offsets 0-4 (k0..k4, v0..v4 at T0+i); partition 1: offsets 0-2, one with
    headers, one with a null key, one with a null value."""
    wire.create_topic(topic, partitions=2)
    produce(wire, topic, 0, [(f"k{i}".encode(), f"v{i}".encode(), T0 + i) for i in range(5)])
    produce(
        wire,
        topic,
        1,
        [
            (b"hk", b"hv", T0 + 100, [("h1", b"x"), ("h2", None)]),
            (None, b"no-key", T0 + 101),
            (b"tomb", None, T0 + 102),
        ],
    )
    return topic


def test_schema_is_sparks_kafka_schema(spark: Any, wire: Wire, two_partitions: str) -> None:
    assert load(spark, wire, subscribe=two_partitions).schema == KAFKA_SCHEMA
    with_headers = load(spark, wire, subscribe=two_partitions, includeHeaders="true")
    assert with_headers.schema == StructType([*KAFKA_SCHEMA.fields, HEADERS_FIELD])


def test_exact_rows_every_column(spark: Any, wire: Wire, two_partitions: str) -> None:
    rows = load(spark, wire, subscribe=two_partitions, includeHeaders="true").collect()
    got = sorted(
        (
            (r.partition, r.offset),
            r.key,
            r.value,
            r.topic,
            as_utc(r.timestamp),
            r.timestampType,
            None if r.headers is None else [(h.key, h.value) for h in r.headers],
        )
        for r in rows
    )
    t = two_partitions
    expected = [
        ((0, i), f"k{i}".encode(), f"v{i}".encode(), t, ts(T0 + i), 0, None) for i in range(5)
    ] + [
        ((1, 0), b"hk", b"hv", t, ts(T0 + 100), 0, [("h1", b"x"), ("h2", None)]),
        ((1, 1), None, b"no-key", t, ts(T0 + 101), 0, None),
        ((1, 2), b"tomb", None, t, ts(T0 + 102), 0, None),
    ]
    assert got == expected


def test_subscription_kinds(spark: Any, wire: Wire, topic: str) -> None:
    a, b, other = f"{topic}-pa", f"{topic}-pb", f"x{topic}-pa"
    for name, partitions in ((a, 2), (b, 1), (other, 1)):
        wire.create_topic(name, partitions=partitions)
        for p in range(partitions):
            produce(wire, name, p, [(None, f"{name}/{p}".encode(), T0)])
    subscribed = offsets(load(spark, wire, subscribe=f"{a},{b}"))
    assert subscribed == [(a, 0, 0), (a, 1, 0), (b, 0, 0)]
    pattern = f"{topic.replace('.', '[.]')}-p.*"
    assert offsets(load(spark, wire, subscribePattern=pattern)) == subscribed
    assigned = load(spark, wire, assign=f'{{"{a}":[1],"{b}":[0]}}')
    assert offsets(assigned) == [(a, 1, 0), (b, 0, 0)]


def test_offset_specs(spark: Any, wire: Wire, topic: str) -> None:
    wire.create_topic(topic, partitions=2)
    for p in range(2):
        produce(wire, topic, p, [(None, b"v", T0 + 10 * i) for i in range(10)])

    def read(**options: str) -> list[tuple[int, int]]:
        df = load(spark, wire, subscribe=topic, **options)
        return [(p, o) for _, p, o in offsets(df)]

    everything = [(p, o) for p in range(2) for o in range(10)]
    assert read() == everything
    assert read(startingOffsets="earliest", endingOffsets="latest") == everything
    assert read(
        startingOffsets=f'{{"{topic}":{{"0":7,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":-1,"1":3}}}}',
    ) == [(0, 7), (0, 8), (0, 9), (1, 0), (1, 1), (1, 2)]
    # timestamps: first offset with timestamp >= T0 + 35 is 4; before T0 + 61 ends at 7
    assert read(startingTimestamp=str(T0 + 35), endingTimestamp=str(T0 + 61)) == [
        (p, o) for p in range(2) for o in (4, 5, 6)
    ]
    by_ts = f'{{"{topic}":{{"0":{T0 + 85},"1":{T0}}}}}'
    assert read(startingOffsetsByTimestamp=by_ts) == [(0, 9)] + [(1, o) for o in range(10)]


def test_min_partitions_splits_ranges(spark: Any, wire: Wire, topic: str) -> None:
    wire.create_topic(topic, partitions=2)
    produce(wire, topic, 0, [(None, str(i).encode(), T0) for i in range(300)])
    produce(wire, topic, 1, [(None, str(i).encode(), T0) for i in range(100)])
    plain = load(spark, wire, subscribe=topic)
    assert plain.rdd.getNumPartitions() == 2
    split = load(spark, wire, subscribe=topic, minPartitions="8")
    assert split.rdd.getNumPartitions() == 8  # 6 pieces of partition 0, 2 of partition 1
    sizes = split.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert sorted(sizes) == [50] * 8
    assert offsets(split) == offsets(plain)
    assert len(offsets(split)) == 400
    capped = load(spark, wire, subscribe=topic, maxRecordsPerPartition="120")
    assert capped.rdd.getNumPartitions() == 4  # 3 pieces of 100 of partition 0, 1 of 100
    assert offsets(capped) == offsets(plain)


def test_many_batches_and_compression(spark: Any, wire: Wire, topic: str) -> None:
    from odradek.protocol.record_batch import Compression

    wire.create_topic(topic, partitions=1)
    expected = []
    for b in range(40):
        records = [(None, f"{b}-{i}".encode() * 50, T0 + b) for i in range(50)]
        produce(wire, topic, 0, records, compression=Compression.GZIP if b % 2 else 0)
        expected += [r[1] for r in records]
    df = load(spark, wire, subscribe=topic, **{"fetch.max.bytes": "65536"})
    values = [r.value for r in df.orderBy("offset").collect()]
    assert values == expected


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "a", "assign": '{{"a":[0]}}'}, "subscribe/assign"),
        ({"subscribe": "{t}", "startingOffsets": "{{bad json"}, "startingOffsets"),
        ({"subscribe": "no-such-topic-anywhere"}, "subscribe"),
        ({"subscribe": "{t}", "minPartitions": "-1"}, "minPartitions"),
        ({"assign": '{{"{t}":[9]}}'}, "assign"),
    ],
)
def test_bad_options_fail_naming_the_option(
    spark: Any, wire: Wire, two_partitions: str, options: dict[str, str], named: str
) -> None:
    resolved = {k: v.format(t=two_partitions) for k, v in options.items()}
    with pytest.raises(Exception, match=f"option '{named}'"):
        load(spark, wire, **resolved).collect()


def test_batch_read_of_deleted_offsets(spark: Any, wire: Wire, topic: str) -> None:
    from tests.spark.spark_support import delete_records

    wire.create_topic(topic, partitions=1)
    produce(wire, topic, 0, [(None, str(i).encode(), T0) for i in range(10)])
    assert delete_records(wire, topic, 0, 6) == 6
    from_zero = f'{{"{topic}":{{"0":0}}}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        load(spark, wire, subscribe=topic, startingOffsets=from_zero).collect()
    tolerant = load(spark, wire, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    assert [o for _, _, o in offsets(tolerant)] == [6, 7, 8, 9]
    assert [o for _, _, o in offsets(load(spark, wire, subscribe=topic))] == [6, 7, 8, 9]
