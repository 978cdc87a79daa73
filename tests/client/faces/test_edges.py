"""Edges an experienced Kafka user relies on, the same on every face: iteration mixed with
``poll``, seeks and assignments while a drained chunk is half handed out, committed offsets of
manually assigned partitions, resets past the log's ends, pattern subscriptions, rebalance
listeners, and the producer's record limits, unknown topics and delivery metadata.

Where kafka-python (blocking) and aiokafka (async) say the same, the test pins it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.client import (
    KafkaError,
    NewTopic,
    TopicPartition,
)
from tests.broker_process import BrokerProcess
from tests.client.faces.conftest import FAST_GROUPS
from tests.client.faces.driver import Face

MEMBER = {
    "heartbeat_interval_ms": 100,
    "session_timeout_ms": 5000,
    "max_poll_interval_ms": 10_000,
    "auto_offset_reset": "earliest",
    "consumer_timeout_ms": 5000,
}


def produce(face: Face, topic: str, partitions: int, per_partition: int) -> None:
    """``per_partition`` records ``p<partition>-<n>`` with timestamps 1000 * (n + 1)."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    with face.producer(linger_ms=20) as producer:
        sent = [
            producer.send(topic, b"p%d-%d" % (p, n), partition=p, timestamp_ms=1000 * (n + 1))
            for p in range(partitions)
            for n in range(per_partition)
        ]
        producer.flush(10)
        assert all(d.result().offset >= 0 for d in sent)


def until(condition: Callable[[], Any], what: str, timeout_s: float = 10.0) -> Any:
    """Call ``condition`` until it returns something true (then that), for ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        assert time.monotonic() < deadline, what
    return result


def polled(consumer: Any, count: int) -> list[tuple[int, int]]:
    """``(partition, offset)`` of the next ``count`` records by ``poll``, in order."""
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 10
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {got}"
        for records in consumer.poll(timeout_ms=200, max_records=count - len(got)).values():
            got += [(r.partition, r.offset) for r in records]
    return got


def test_assign_with_a_group_starts_at_the_committed_offset(face: Face, topic: str) -> None:
    """kafka-python's and aiokafka's ``assign`` with a ``group_id``: a partition starts at the
    group's committed offset, and only without one by ``auto_offset_reset``."""
    produce(face, topic, 2, 5)
    group = f"g-{topic}"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with face.consumer(group_id=group, enable_auto_commit=False, **MEMBER) as consumer:
        consumer.assign([tp0])
        assert [r.offset for r in consumer.take(2)] == [0, 1]
        consumer.commit()
        assert consumer.committed(tp0) == 2
        assert consumer.committed(tp1) is None
    with face.consumer(group_id=group, enable_auto_commit=False, **MEMBER) as consumer:
        consumer.assign([tp0, tp1])
        assert consumer.position(tp0) == 2
        assert consumer.position(tp1) == 0
        got = sorted((r.partition, r.offset) for r in consumer.take(8))
        assert got == [(0, n) for n in range(2, 5)] + [(1, n) for n in range(5)]


def test_record_metadata_carries_the_records_timestamp_and_sizes(face: Face, topic: str) -> None:
    """Kafka's, kafka-python's and aiokafka's ``RecordMetadata.timestamp`` under CreateTime is
    the record's own timestamp (the broker answers -1 for it)."""
    with face.producer(linger_ms=20) as producer:
        given = producer.send(topic, b"value", b"k", timestamp_ms=1_234)
        stamped = producer.send(topic, None, timestamp_ms=5_678, headers=[("h", b"v")])
        before_ms = time.time() * 1000
        now = producer.send(topic, b"v")
        producer.flush(10)
    md = given.result()
    assert (md.timestamp, md.serialized_key_size, md.serialized_value_size) == (1_234, 1, 5)
    md = stamped.result()
    assert (md.timestamp, md.serialized_key_size, md.serialized_value_size) == (5_678, -1, -1)
    assert abs(now.result().timestamp - before_ms) < 60_000
    for options in ({"compression_type": "gzip"}, {"acks": 0}):
        with face.producer(**options) as producer:
            sent = [producer.send(topic, b"v", timestamp_ms=ts) for ts in (7, 3, 9)]
            assert [d.result().timestamp for d in sent] == [7, 3, 9]


def test_a_refused_record_leaves_the_producer_working(face: Face, topic: str) -> None:
    """A record ``send`` refuses (headers not ``(str, bytes | None)`` pairs, a timestamp not an
    int) queues nothing: the records after it are delivered, also to the partition whose
    lock-free tail batch it was refused from."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1)])
    with face.producer(linger_ms=20) as producer:
        refused: list[dict[str, Any]] = [
            {"headers": [("h", "text")]},
            {"headers": [(b"h", b"v")]},
            {"headers": [("h",)]},
            {"timestamp_ms": "soon"},
        ]
        for options in refused:
            with pytest.raises((TypeError, ValueError)):
                producer.send(topic, b"v", **options)
        assert producer.send(topic, b"v", headers=(("h", b"v"),)).result(5).offset == 0
        tail = producer.send(topic, b"tail")  # a null-key record: the topic's tail batch
        for options in refused:
            with pytest.raises((TypeError, ValueError)):
                producer.send(topic, b"v", partition=0, **options)
        after = producer.send(topic, b"after", partition=0, headers=[("h", None)])
        assert [tail.result(5).offset, after.result(5).offset] == [1, 2]


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that creates no topic on a Metadata request."""
    overrides = [*FAST_GROUPS, "auto.create.topics.enable=false"]
    process = BrokerProcess([tmp_path_factory.mktemp("strict") / "logs"], overrides=overrides)
    process.start()
    yield process
    if process.process is not None and process.process.poll() is None:
        process.stop()


def test_an_unknown_topic_fails_after_max_block_ms(
    face: Face, topic: str, strict_broker: BrokerProcess
) -> None:
    strict = face.with_bootstrap(strict_broker.bootstrap)
    with strict.producer(max_block_ms=300) as producer:
        started_s = time.monotonic()
        with pytest.raises(KafkaError, match="not present in metadata after 300 ms"):
            producer.send(topic, b"x").result()
        assert 0.29 <= time.monotonic() - started_s < 5  # it waited all of max_block_ms
        with strict.admin() as admin:
            admin.create_topics([NewTopic(topic, 1)])
        assert producer.send(topic, b"x").result().offset == 0


def test_a_rebalance_during_an_iteration_repeats_no_record(face: Face, topic: str) -> None:
    """Records drained for iteration but not handed out when a rebalance revokes their
    partition are dropped (aiokafka drops what it buffered for revoked partitions): with
    auto-commit, the partition resumes from the commit made at the revocation, so a partition
    kept through an eager rebalance hands each record out once."""
    count = 4000
    produce(face, f"{topic}-a", 1, count)
    group = f"g-{topic}"
    options = {**MEMBER, "metadata_max_age_ms": 100, "max_poll_records": 10_000}
    options["consumer_timeout_ms"] = 500
    with face.consumer(group_id=group, **options) as consumer:
        consumer.subscribe(pattern=f"{topic}-.*")
        got = consumer.take(1)  # the rest of the chunk drained with it waits in the iterator
        produce(face, f"{topic}-b", 1, 1)  # a new matching topic: the group rebalances

        def rebalanced() -> bool:
            if not face.is_async:  # kafka-python's model: it rebalances inside the iteration
                got.extend(consumer.take(1))
            return len(consumer.assignment()) == 2  # aiokafka's: in the background

        until(rebalanced, "the new topic was not assigned")
        got += consumer.take()  # until consumer_timeout_ms passes without a record
        seen = [(r.topic, r.offset) for r in got]
        assert len(seen) == len(set(seen)), "a record was handed out twice"
        assert sorted(seen) == sorted(
            [(f"{topic}-a", n) for n in range(count)] + [(f"{topic}-b", 0)]
        )
