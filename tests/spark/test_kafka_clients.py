"""The Spark data source and an unmodified Kafka client on the same topic of the same broker:
what kafka-python writes over Kafka's protocol, Spark reads through the native protocol (keys,
values, headers, timestamps, offsets), and what Spark writes, kafka-python reads."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.broker.wire import Wire
from tests.spark.test_batch_read import as_utc, load, ts

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000


def _bootstrap(wire: Wire) -> str:
    return f"127.0.0.1:{wire.sock.getpeername()[1]}"


def test_spark_reads_what_a_kafka_client_wrote(spark: Any, wire: Wire, topic: str) -> None:
    wire.create_topic(topic, partitions=2)
    producer = KafkaProducer(
        bootstrap_servers=_bootstrap(wire), acks="all", compression_type="gzip", linger_ms=5
    )
    sent = []
    for i in range(20):
        headers = [("n", str(i).encode())]
        meta = producer.send(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            headers=headers,
            partition=i % 2,
            timestamp_ms=T0 + i,
        ).get(timeout=30)
        sent.append((meta.partition, meta.offset, f"k{i}".encode(), f"v{i}".encode(), T0 + i))
    producer.close()

    rows = load(spark, wire, subscribe=topic, includeHeaders="true").collect()
    got = sorted(
        (r.partition, r.offset, bytes(r.key), bytes(r.value), r.timestamp, r.headers) for r in rows
    )
    assert [(p, o, k, v) for p, o, k, v, *_ in got] == sorted(
        (p, o, k, v) for p, o, k, v, _ in sent
    )
    by_key = {k: (timestamp, headers) for _, _, k, _, timestamp, headers in got}
    for i in range(20):
        timestamp, headers = by_key[f"k{i}".encode()]
        assert as_utc(timestamp) == ts(T0 + i)
        assert [(h.key, bytes(h.value)) for h in headers] == [("n", str(i).encode())]


def test_a_kafka_client_reads_what_spark_wrote(spark: Any, wire: Wire, topic: str) -> None:
    wire.create_topic(topic, partitions=1)
    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    (
        df.write.format("odradek")
        .option("bootstrap.servers", _bootstrap(wire))
        .option("topic", topic)
        .mode("append")
        .save()
    )
    consumer = KafkaConsumer(
        bootstrap_servers=_bootstrap(wire),
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        enable_auto_commit=False,
    )
    consumer.assign([TopicPartition(topic, 0)])
    got = sorted((r.key, r.value) for r in consumer)
    consumer.close()
    assert got == sorted(rows)
