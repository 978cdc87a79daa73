"""``format("odradek-jvm")``, the JVM reader that reads topics through the broker's Kafka
listener, against a real broker and a real Spark session: the same rows as the Python
``format("odradek")`` source for every column, codec, offset and timestamp option, and split;
errors that name the option or the broker's address."""

from __future__ import annotations

import re
from typing import Any

import pytest

from odradek.protocol.record_batch import Compression
from tests.broker.wire import Wire
from tests.ports import reserve_port
from tests.spark.jvm_support import all_rows, bootstrap, both, load
from tests.spark.spark_support import delete_records, produce

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000


@pytest.fixture
def mixed(wire: Wire, topic: str) -> str:
    """Three partitions: many small batches, headers, null keys and values, an empty value."""
    wire.create_topic(topic, partitions=3)
    for b in range(6):
        produce(wire, topic, 0, [(f"k{b}.{i}".encode(), b"v" * (i + b), T0 + b) for i in range(50)])
    produce(
        wire,
        topic,
        1,
        [
            (b"hk", b"hv", T0 + 100, [("h1", b"x"), ("h2", None), ("", b"")]),
            (None, b"no-key", T0 + 101),
            (b"tomb", None, T0 + 102),
            (b"", b"", T0 + 103),
        ],
    )
    return topic  # partition 2 stays empty


def test_every_column_as_the_python_source(spark: Any, wire: Wire, mixed: str) -> None:
    jvm, python = both(spark, wire, subscribe=mixed, includeHeaders="true")
    assert len(jvm) == 6 * 50 + 4
    assert jvm == python
    jvm, python = both(spark, wire, subscribe=mixed)
    assert jvm == python
    df = load(spark, "odradek-jvm", bootstrap(wire), subscribe=mixed, includeHeaders="true")
    assert (
        df.schema
        == load(spark, "odradek", bootstrap(wire), subscribe=mixed, includeHeaders="true").schema
    )


@pytest.mark.parametrize(
    "codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_compressed_batches(spark: Any, wire: Wire, topic: str, codec: Compression) -> None:
    wire.create_topic(topic, partitions=2)
    for b in range(20):
        records = [(f"k{i}".encode(), f"{b}-{i}.".encode() * 20, T0 + b) for i in range(40)]
        produce(wire, topic, b % 2, records, compression=codec if b % 3 else Compression.NONE)
    jvm, python = both(spark, wire, subscribe=topic, **{"fetch.max.bytes": "4096"})
    assert len(jvm) == 800
    assert jvm == python


def test_aggregates_and_pruned_columns(spark: Any, wire: Wire, mixed: str) -> None:
    servers = bootstrap(wire)
    for columns in (["value"], ["offset", "key"], ["partition"], ["timestamp", "topic"]):
        jvm = load(spark, "odradek-jvm", servers, subscribe=mixed).select(*columns)
        python = load(spark, "odradek", servers, subscribe=mixed).select(*columns)
        assert sorted(map(repr, jvm.collect())) == sorted(map(repr, python.collect()))
    df = load(spark, "odradek-jvm", servers, subscribe=mixed)
    assert df.count() == 304
    (total,) = df.selectExpr("sum(length(value))").first()
    assert total == sum(i + b for b in range(6) for i in range(50)) + 2 + 6 + 0
    plan = df.selectExpr("count(*)")._jdf.queryExecution().executedPlan().toString()
    (scan,) = [line for line in plan.splitlines() if "BatchScan odradek-jvm" in line]
    assert "[]" in scan.split("BatchScan odradek-jvm")[1].split("odradek-jvm")[0]


def test_subscriptions_offsets_and_timestamps(spark: Any, wire: Wire, topic: str) -> None:
    a, b = f"{topic}-pa", f"{topic}-pb"
    for name in (a, b):
        wire.create_topic(name, partitions=2)
        for p in range(2):
            for i in range(10):  # one batch per record: timestamps T0 + 10 i
                produce(wire, name, p, [(None, f"{name}/{p}/{i}".encode(), T0 + 10 * i)])
    cases: list[dict[str, str]] = [
        {"subscribe": f"{a},{b}"},
        {"subscribePattern": f"{re.escape(topic)}-p.*"},
        {"assign": f'{{"{a}":[1],"{b}":[0]}}'},
        {
            "subscribe": a,
            "startingOffsets": f'{{"{a}":{{"0":7,"1":-2}}}}',
            "endingOffsets": f'{{"{a}":{{"0":-1,"1":3}}}}',
        },
        {"subscribe": a, "startingOffsets": "earliest", "endingOffsets": "latest"},
        {"subscribe": a, "startingTimestamp": str(T0 + 35), "endingTimestamp": str(T0 + 61)},
        {"subscribe": a, "startingOffsetsByTimestamp": f'{{"{a}":{{"0":{T0 + 85},"1":{T0}}}}}'},
        {
            "subscribe": a,
            "startingTimestamp": str(T0 + 1000),
            "startingOffsetsByTimestampStrategy": "latest",
        },
    ]
    for options in cases:
        jvm, python = both(spark, wire, **options)
        assert jvm == python, options
    jvm, _ = both(spark, wire, **cases[5])
    assert [k[1:] for k, *_ in jvm] == [(p, o) for p in range(2) for o in (4, 5, 6)]


def test_min_partitions_and_max_records_split_like_the_python_source(
    spark: Any, wire: Wire, topic: str
) -> None:
    wire.create_topic(topic, partitions=2)
    produce(wire, topic, 0, [(None, str(i).encode(), T0) for i in range(300)])
    produce(wire, topic, 1, [(None, str(i).encode(), T0) for i in range(100)])
    servers = bootstrap(wire)
    for options in ({}, {"minPartitions": "8"}, {"maxRecordsPerPartition": "120"}):
        jvm = load(spark, "odradek-jvm", servers, subscribe=topic, **options)
        python = load(spark, "odradek", servers, subscribe=topic, **options)
        assert jvm.rdd.getNumPartitions() == python.rdd.getNumPartitions(), options
        sizes = jvm.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
        assert sizes == python.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
        assert all_rows(jvm) == all_rows(python)
    split = load(spark, "odradek-jvm", servers, subscribe=topic, minPartitions="8")
    assert split.rdd.getNumPartitions() == 8  # 6 pieces of partition 0, 2 of partition 1


def test_a_batch_larger_than_fetch_max_bytes(spark: Any, wire: Wire, topic: str) -> None:
    wire.create_topic(topic, partitions=1)
    produce(wire, topic, 0, [(None, bytes([i]) * 3000, T0) for i in range(10)])  # ~30 KB
    produce(wire, topic, 0, [(None, b"small", T0)])
    jvm, python = both(spark, wire, subscribe=topic, **{"fetch.max.bytes": "1024"})
    assert len(jvm) == 11
    assert jvm == python


def test_deleted_offsets_and_fail_on_data_loss(spark: Any, wire: Wire, topic: str) -> None:
    wire.create_topic(topic, partitions=1)
    produce(wire, topic, 0, [(None, str(i).encode(), T0) for i in range(10)])
    assert delete_records(wire, topic, 0, 6) == 6
    servers = bootstrap(wire)
    from_zero = f'{{"{topic}":{{"0":0}}}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        load(spark, "odradek-jvm", servers, subscribe=topic, startingOffsets=from_zero).collect()
    tolerant = load(
        spark,
        "odradek-jvm",
        servers,
        subscribe=topic,
        startingOffsets=from_zero,
        failOnDataLoss="false",
    )
    assert [r.offset for r in tolerant.orderBy("offset").collect()] == [6, 7, 8, 9]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "{t}", "assign": '{{"{t}":[0]}}'}, "subscribe/assign"),
        ({}, "subscribe"),
        ({"subscribe": "no-such-topic-anywhere"}, "subscribe"),
        ({"assign": '{{"{t}":[9]}}'}, "assign"),
        ({"subscribe": "{t}", "startingOffsets": "{{bad json"}, "startingOffsets"),
        ({"subscribe": "{t}", "startingOffsets": "latest"}, "startingOffsets"),
        (
            {"subscribe": "{t}", "endingOffsets": '{{"{t}":{{"0":99999,"1":-1,"2":-1}}}}'},
            "endingOffsets",
        ),
        ({"subscribe": "{t}", "startingTimestamp": str(T0 + 10**9)}, "startingTimestamp"),
        ({"subscribe": "{t}", "minPartitions": "0"}, "minPartitions"),
        ({"subscribe": "{t}", "maxRecordsPerPartition": "x"}, "maxRecordsPerPartition"),
        ({"subscribe": "{t}", "includeHeaders": "yes"}, "includeHeaders"),
        ({"subscribe": "{t}", "fetch.max.bytes": "10"}, "fetch.max.bytes"),
        ({"subscribe": "{t}", "isolation.level": "dirty"}, "isolation.level"),
        ({"subscribe": "{t}", "kafka.security.protocol": "TLS"}, "kafka.security.protocol"),
        ({"subscribe": "{t}", "kafka.security.protocol": "SASL_SSL"}, "kafka.sasl.mechanism"),
        (
            {
                "subscribe": "{t}",
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "PLAIN",
            },
            "kafka.sasl.jaas.config",
        ),
        ({"subscribe": "{t}", "kafka.bootstrap.servers": "no-port"}, "kafka.bootstrap.servers"),
        ({"subscribe": "{t}", "log.dirs": "/tmp"}, "log.dirs"),
    ],
)
def test_bad_options_fail_naming_the_option(
    spark: Any, wire: Wire, mixed: str, options: dict[str, str], named: str
) -> None:
    resolved = {k: v.format(t=mixed) for k, v in options.items()}
    servers = resolved.pop("kafka.bootstrap.servers", bootstrap(wire))
    with pytest.raises(Exception, match=re.escape(f"option '{named}'")):
        load(spark, "odradek-jvm", servers, **resolved).collect()


def test_an_unreachable_broker_is_named(spark: Any) -> None:
    port = reserve_port()  # a port nothing listens on
    df = load(spark, "odradek-jvm", f"127.0.0.1:{port}", subscribe="anything")
    with pytest.raises(Exception, match=f"cannot connect to the broker at 127.0.0.1:{port}"):
        df.collect()


def test_aborted_transactions_are_left_out_as_a_consumer_does(spark: Any) -> None:
    """The broker refuses transactions, so no Fetch response lists an aborted one; the filter
    a response's list drives is checked here on its own, batch by batch in log order."""
    jvm = spark._jvm
    pairs = spark.sparkContext._gateway.new_array(jvm.long, 4)
    for i, v in enumerate([7, 20, 9, 10]):  # producer 7 aborted from 20, producer 9 from 10
        pairs[i] = v
    aborted = jvm.odradek.broker.AbortedTransactions(pairs)
    walk = [  # (producer, base offset, control) -> skipped?
        ((7, 0, False), False),  # before its aborted transaction
        ((9, 10, False), True),
        ((7, 12, False), False),
        ((9, 15, True), True),  # the abort marker: a control batch, never a row
        ((9, 16, False), False),  # a later transaction of producer 9
        ((7, 20, False), True),
        ((7, 25, True), True),
        ((7, 30, False), False),
    ]
    assert [aborted.skip(*batch) for batch, _ in walk] == [skip for _, skip in walk]


def test_streaming_is_refused(spark: Any, wire: Wire, mixed: str) -> None:
    stream = (
        spark.readStream.format("odradek-jvm")
        .option("kafka.bootstrap.servers", bootstrap(wire))
        .option("subscribe", mixed)
    )
    with pytest.raises(Exception, match="odradek-jvm does not support streamed reading"):
        stream.load()
