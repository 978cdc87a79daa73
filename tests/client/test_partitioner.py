"""murmur2 against Kafka's published vectors and kafka-python; partitioner strategies;
sticky partitioning of null keys (KIP-480) through a real producer."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from odradek.client import Producer, TopicPartition
from odradek.client.partitioner import Partitioner, murmur2

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils).
KAFKA_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize(("text", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(text: str, expected: int) -> None:
    assert murmur2(text.encode()) == expected


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(data: bytes) -> None:
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data) & 0xFFFFFFFF


def test_keyed_records_use_murmur2_modulo_all_partitions() -> None:
    partitioner = Partitioner("default")
    for key in (b"", b"a", b"user-42", b"\xff" * 9):
        expected = (murmur2(key) & 0x7FFFFFFF) % 7
        assert partitioner.partition("t", key, 7) == expected


def test_sticky_partition_moves_only_when_its_batch_closes() -> None:
    partitioner = Partitioner("default", random.Random(3))
    first = partitioner.partition("t", None, 4)
    assert {partitioner.partition("t", None, 4) for _ in range(50)} == {first}
    partitioner.on_new_batch("t", (first + 1) % 4, 4)  # another partition's batch: no move
    assert partitioner.partition("t", None, 4) == first
    partitioner.on_new_batch("t", first, 4)
    second = partitioner.partition("t", None, 4)
    assert second != first
    assert partitioner.partition("other", None, 4) in range(4)
    single = Partitioner("default")
    single.on_new_batch("s", single.partition("s", None, 1), 1)
    assert single.partition("s", None, 1) == 0


def test_round_robin_random_and_callable() -> None:
    rr = Partitioner("round_robin")
    assert [rr.partition("t", b"k", 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    rnd = Partitioner("random", random.Random(1))
    assert {rnd.partition("t", None, 3) for _ in range(100)} == {0, 1, 2}
    calls = []

    def last(key: bytes | None, all_partitions: object, available: object) -> int:
        calls.append(key)
        return len(all_partitions) - 1  # type: ignore[arg-type]

    custom = Partitioner(last)
    assert custom.partition("t", b"k", 5) == 4 and calls == [b"k"]
    with pytest.raises(ValueError):
        Partitioner(lambda *_: 9).partition("t", None, 3)
    with pytest.raises(ValueError):
        Partitioner("nope")


def test_producer_sticks_null_keys_per_batch_and_spreads_keys(bootstrap: str, topic: str) -> None:
    from odradek.client import Admin, NewTopic

    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 4)])
    with Producer(bootstrap, linger_ms=60_000) as producer:
        burst = [producer.send(topic, b"v") for _ in range(100)]
        producer.flush()  # closes the sticky batch: the next burst moves on
        second = [producer.send(topic, b"v") for _ in range(100)]
        producer.flush()
        keyed = [producer.send(topic, b"v", key=b"key-%d" % i) for i in range(40)]
        producer.flush()
    first_parts = {f.result().partition for f in burst}
    second_parts = {f.result().partition for f in second}
    assert len(first_parts) == 1 and len(second_parts) == 1
    assert first_parts != second_parts
    for i, future in enumerate(keyed):
        md = future.result()
        assert md.partition == (murmur2(b"key-%d" % i) & 0x7FFFFFFF) % 4
        assert TopicPartition(md.topic, md.partition).topic == topic
