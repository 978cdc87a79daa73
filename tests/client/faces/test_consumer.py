"""The consumer's behaviour, the same on every face: assign, positions and seeks, poll,
iteration, offset lookups (with Kafka's negative timestamps), metadata, close."""

from __future__ import annotations

import pytest

from odradek.client import (
    KafkaError,
    NewTopic,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    TopicPartition,
)
from tests.client.faces.driver import Face


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


def test_poll_reads_assigned_partitions_in_offset_order(face: Face, topic: str) -> None:
    produce(face, topic, 2, 10)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    with face.consumer(auto_offset_reset="earliest", max_poll_records=7) as consumer:
        consumer.assign(tps)
        assert consumer.assignment() == set(tps)
        got: dict[TopicPartition, list[bytes]] = {tp: [] for tp in tps}
        for _ in range(100):
            batch = consumer.poll(timeout_ms=1000)
            assert sum(len(records) for records in batch.values()) <= 7
            for tp, records in batch.items():
                got[tp].extend(r.value for r in records)
                assert [r.offset for r in records] == sorted(r.offset for r in records)
            if sum(map(len, got.values())) == 20:
                break
        assert got == {tp: [b"p%d-%d" % (tp.partition, n) for n in range(10)] for tp in tps}
        assert consumer.position(tps[0]) == 10
        assert consumer.poll(timeout_ms=50) == {}  # nothing more: an empty answer in time


def test_positions_seek_and_resets(face: Face, topic: str) -> None:
    produce(face, topic, 1, 5)
    tp = TopicPartition(topic, 0)
    with face.consumer(auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 5
        consumer.seek(tp, 2)
        assert consumer.position(tp) == 2
        assert [r.offset for r in consumer.take(2)] == [2, 3]
        assert consumer.position(tp) == 4
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        consumer.seek_to_end()
        assert consumer.position(tp) == 5
        consumer.seek(tp, 1)
        assert consumer.take(1)[0].value == b"p0-1"
    with face.consumer(auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        with pytest.raises(OffsetOutOfRangeError):
            consumer.position(tp)
        consumer.seek(tp, 4)
        assert consumer.position(tp) == 4


def test_iteration_ends_after_consumer_timeout(face: Face, topic: str) -> None:
    produce(face, topic, 1, 30)
    with face.consumer(auto_offset_reset="earliest", consumer_timeout_ms=300) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records = consumer.take()  # until 300 ms pass without a record
    assert [r.offset for r in records] == list(range(30))
    assert [r.value for r in records[:2]] == [b"p0-0", b"p0-1"]
    assert {r.topic for r in records} == {topic}


def test_offset_lookups(face: Face, topic: str) -> None:
    produce(face, topic, 2, 4)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    with face.consumer() as consumer:
        assert consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert consumer.end_offsets(tps) == {tps[0]: 4, tps[1]: 4}
        found = consumer.offsets_for_times({tps[0]: 2500, tps[1]: 99_999})
        assert found == {tps[0]: OffsetAndTimestamp(2, 3000), tps[1]: None}


def test_offsets_for_times_takes_kafkas_negative_timestamps(face: Face, topic: str) -> None:
    produce(face, topic, 1, 3)
    tp = TopicPartition(topic, 0)
    with face.consumer() as consumer:
        latest = consumer.offsets_for_times({tp: -1})[tp]  # LATEST_TIMESTAMP
        earliest = consumer.offsets_for_times({tp: -2})[tp]  # EARLIEST_TIMESTAMP
        with pytest.raises(ValueError):
            consumer.offsets_for_times({tp: -3})  # no other negative timestamp means anything
    assert latest == OffsetAndTimestamp(3, -1)
    assert earliest == OffsetAndTimestamp(0, -1)


def test_topic_metadata(face: Face, topic: str) -> None:
    produce(face, topic, 3, 1)
    with face.consumer() as consumer:
        assert topic in consumer.topics()
        assert "__consumer_offsets" not in consumer.topics()
        assert consumer.partitions_for_topic(topic) == {0, 1, 2}
        assert consumer.partitions_for_topic("no-such-topic-here") is None


def test_unassigned_partition_and_group_calls_are_refused(face: Face, topic: str) -> None:
    with face.consumer() as consumer:
        with pytest.raises((KeyError, ValueError, KafkaError)):  # AssertionError is not enough
            consumer.position(TopicPartition(topic, 0))
        with pytest.raises(ValueError):
            consumer.subscribe([topic])  # subscribing needs a group_id
        with pytest.raises(ValueError):
            consumer.commit()
    with pytest.raises(ValueError):
        face.make_consumer(topic)  # topics need a group_id too
    with pytest.raises(ValueError):
        face.make_consumer(auto_offset_reset="sometimes")


def test_poll_after_close_raises(face: Face, topic: str) -> None:
    produce(face, topic, 1, 1)
    with face.consumer(auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert consumer.take(1)[0].value == b"p0-0"
    with pytest.raises(KafkaError):
        consumer.poll(timeout_ms=10)


def test_pause_keeps_a_partitions_records_until_resume(face: Face, topic: str) -> None:
    """``pause`` (kafka-python's, aiokafka's): a paused partition returns nothing, even what was
    already fetched for it, and keeps its position; ``resume`` returns it from there."""
    produce(face, topic, 2, 3)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with face.consumer(auto_offset_reset="earliest", consumer_timeout_ms=300) as consumer:
        consumer.assign([tp0, tp1])
        first = consumer.take(1)  # by now both are usually fetched: the rest is buffered
        paused = TopicPartition(topic, first[0].partition)
        [other] = {tp0, tp1} - {paused}
        consumer.pause(paused)
        assert consumer.paused() == {paused}
        rest = consumer.take()  # until consumer_timeout_ms: only the other partition
        assert [(r.partition, r.offset) for r in rest] == [(other.partition, n) for n in range(3)]
        assert consumer.position(paused) == 1
        with pytest.raises(ValueError):
            consumer.pause(TopicPartition(topic, 5))
        consumer.assign([tp0, tp1])  # kept partitions stay paused
        assert consumer.paused() == {paused}
        consumer.resume(paused)
        assert consumer.paused() == set()
        again = consumer.take()
        assert [(r.partition, r.offset) for r in again] == [(paused.partition, n) for n in (1, 2)]


def test_highwater_and_lag_follow_the_last_fetch(face: Face, topic: str) -> None:
    produce(face, topic, 1, 5)
    tp = TopicPartition(topic, 0)
    with face.consumer(auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        assert [r.offset for r in consumer.take(2)] == [0, 1]
        assert consumer.highwater(tp) == 5
        assert consumer.lag() == {tp: 3}


def test_an_argument_the_broker_could_not_decode_is_refused_at_once(face: Face, topic: str) -> None:
    """A ``float`` timestamp (``time.time() * 1000``) sent as it was made the broker close the
    connection, and the call resent it until ``request_timeout_ms``: now a ``TypeError``
    naming the field, before anything is sent."""
    produce(face, topic, 1, 1)
    tp = TopicPartition(topic, 0)
    with face.consumer(request_timeout_ms=60_000) as consumer:
        with pytest.raises(TypeError, match=r"partitions\[0\]\.timestamp"):
            consumer.offsets_for_times({tp: 1_700_000_000_000.5})
        consumer.assign([tp])
        with pytest.raises(TypeError, match="offset must be an int"):
            consumer.seek(tp, 0.0)  # kept, it would have gone out in every Fetch
        assert consumer.position(tp) == 1  # latest: the seek changed nothing
        assert consumer.end_offsets([tp]) == {tp: 1}  # the connection is still good
