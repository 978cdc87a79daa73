"""The producer's behaviour, the same on every face: send, values and keys, headers,
partitioners, acks, compression, delivery results and errors, flush, close, metadata refresh."""

from __future__ import annotations

import time

import pytest

from odradek.client import (
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NewTopic,
    RecordMetadata,
    TopicPartition,
    UnknownTopicOrPartitionError,
    murmur2,
)
from tests.client.faces.driver import Face


def read_all(face: Face, topic: str, partitions: int, count: int) -> list:
    """The first ``count`` records of ``topic`` (all partitions), by partition then offset."""
    with face.consumer(auto_offset_reset="earliest", consumer_timeout_ms=5000) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        records = consumer.take(count)
    assert len(records) == count
    return sorted(records, key=lambda r: (r.partition, r.offset))


def test_values_keys_headers_and_timestamps_round_trip(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with face.producer(linger_ms=50) as producer:
        sent = [
            producer.send(topic, b"bytes", b"k0", partition=0, timestamp_ms=1_000),
            producer.send(topic, bytearray(b"bytearray"), bytearray(b"k1"), partition=0),
            producer.send(topic, memoryview(b"xmemoryview")[1:], memoryview(b"k2"), partition=1),
            producer.send(topic, None, b"tombstone", partition=1, headers=[("h", b"v")]),
            producer.send(topic, b"", None, partition=1, headers=[("a", None), ("b", b"")]),
        ]
        producer.flush(10)
        assert all(d.done() for d in sent)
        metadata = [d.result() for d in sent]
    assert [(md.partition, md.offset) for md in metadata] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    assert all(isinstance(md, RecordMetadata) and md.topic == topic for md in metadata)
    records = read_all(face, topic, 2, 5)
    assert [(r.key, r.value) for r in records] == [
        (b"k0", b"bytes"),
        (b"k1", b"bytearray"),
        (b"k2", b"memoryview"),
        (b"tombstone", None),
        (None, b""),
    ]
    assert all(type(r.value) is bytes for r in records if r.value is not None)
    assert records[0].timestamp == 1_000
    assert abs(records[1].timestamp - time.time() * 1000) < 60_000
    assert [list(r.headers) for r in records[3:]] == [[("h", b"v")], [("a", None), ("b", b"")]]


def test_values_of_other_types_are_refused(face: Face, topic: str) -> None:
    with face.producer() as producer:
        for bad in ("text", 7, [1, 2]):
            with pytest.raises(TypeError):
                producer.send(topic, bad)
            with pytest.raises(TypeError):
                producer.send(topic, b"v", bad)


def test_keyed_records_go_to_the_murmur2_partition(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 3)])
    keys = [b"key-%d" % i for i in range(30)]
    with face.producer() as producer:
        sent = [producer.send(topic, b"v", key) for key in keys]
        partitions = [d.result().partition for d in sent]
    assert partitions == [(murmur2(k) & 0x7FFFFFFF) % 3 for k in keys]


def test_null_keys_stick_to_one_partition_per_batch(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 3)])
    with face.producer(linger_ms=10_000) as producer:
        sent = [producer.send(topic, b"v%d" % i) for i in range(20)]
        producer.flush(10)
        assert len({d.result().partition for d in sent}) == 1


def test_named_and_user_partitioners(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 3)])
    with face.producer(partitioner="round_robin") as producer:
        cycled = [producer.send(topic, b"v").result().partition for _ in range(6)]
    assert sorted(cycled) == [0, 0, 1, 1, 2, 2]
    seen: list[tuple[bytes | None, list[int]]] = []

    def last(key: bytes | None, all_partitions: object, available: object) -> int:
        seen.append((key, list(all_partitions)))  # type: ignore[call-overload]
        return len(all_partitions) - 1  # type: ignore[arg-type]

    with face.producer(partitioner=last) as producer:
        assert producer.send(topic, b"v", b"k").result().partition == 2
    assert seen == [(b"k", [0, 1, 2])]


@pytest.mark.parametrize("acks", [1, -1, "all"])
def test_acks_answer_offsets_for_every_codec(face: Face, topic: str, acks: int | str) -> None:
    codecs = [None, "gzip", "snappy", "lz4", "zstd"]
    for i, codec in enumerate(codecs):
        with face.producer(acks=acks, compression_type=codec) as producer:
            sent = [producer.send(topic, b"%s-%d" % (str(codec).encode(), n)) for n in range(3)]
            assert [d.result().offset for d in sent] == [3 * i, 3 * i + 1, 3 * i + 2]
    values = [r.value for r in read_all(face, topic, 1, 3 * len(codecs))]
    assert values == [b"%s-%d" % (str(c).encode(), n) for c in codecs for n in range(3)]


def test_acks_0_delivers_without_offsets(face: Face, topic: str) -> None:
    with face.producer(acks=0) as producer:
        sent = [producer.send(topic, b"v%d" % i) for i in range(3)]
        producer.flush(10)
        assert [d.result().offset for d in sent] == [-1, -1, -1]
    assert [r.value for r in read_all(face, topic, 1, 3)] == [b"v0", b"v1", b"v2"]


def test_bad_configuration_is_refused_when_built(face: Face) -> None:
    for options in (
        {"acks": 2},
        {"compression_type": "brotli"},
        {"batch_size": 0},
        {"linger_ms": -1},
        {"partitioner": "by-the-moon"},
    ):
        with pytest.raises(ValueError):
            face.make_producer(**options)


def test_delivery_errors(face: Face, topic: str) -> None:
    with face.producer(max_request_size=10_000, max_block_ms=2_000) as producer:
        with pytest.raises(InvalidTopicError):
            producer.send("bad/topic", b"x").result()
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send(topic, b"x", partition=5).result()
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, b"x" * 20_000).result()
        assert producer.send(topic, b"fits").result().offset == 0  # the producer still works


def test_send_after_close_raises(face: Face, topic: str) -> None:
    with face.producer() as producer:
        assert producer.send(topic, b"before").result().offset == 0
    with pytest.raises(KafkaError):
        producer.send(topic, b"after")


def test_close_delivers_what_is_queued(face: Face, topic: str) -> None:
    with face.producer(linger_ms=60_000) as producer:
        sent = [producer.send(topic, b"v%d" % i) for i in range(5)]
    assert [d.result(0.01).offset for d in sent] == [0, 1, 2, 3, 4]


def test_partitions_added_while_running_are_used(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1)])
        with face.producer(metadata_max_age_ms=100, partitioner="round_robin") as producer:
            assert producer.send(topic, b"v").result().partition == 0
            assert producer.partitions_for(topic) == {0}
            admin.create_partitions({topic: 3})
            deadline = time.monotonic() + 10
            used: set[int] = set()
            while used != {0, 1, 2}:  # the producer refreshes its metadata on its own time
                assert time.monotonic() < deadline, f"only partitions {used} used"
                used.add(producer.send(topic, b"v").result().partition)
            assert producer.partitions_for(topic) == {0, 1, 2}


def test_an_error_in_the_with_block_comes_out_as_itself(face: Face, topic: str) -> None:
    class Mine(Exception):
        pass

    with pytest.raises(Mine), face.producer() as producer:
        delivery = producer.send(topic, b"queued")
        raise Mine
    assert delivery.result().offset == 0  # what was queued was still delivered
    with pytest.raises(Mine), face.consumer() as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        raise Mine


def test_flush_raises_when_its_timeout_passes(face: Face, topic: str) -> None:
    with face.producer(linger_ms=60_000, acks="all") as producer:
        first = producer.send(topic, b"first")
        producer.flush(10)  # the topic is known now: the next send only queues
        assert first.result().offset == 0
        delivery = producer.send(topic, b"v" * 100_000)
        with pytest.raises(KafkaTimeoutError):
            producer.flush(0)  # no broker answers in no time
        producer.flush(10)
        assert delivery.result().offset == 1


def test_send_raises_kafka_timeout_when_buffer_memory_stays_full(face: Face, topic: str) -> None:
    """``send`` waits up to ``max_block_ms`` for buffer memory, then raises KafkaTimeoutError
    on every face (the async one raised the built-in TimeoutError)."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1)])
    # a lingering batch holds the only bytes the producer may buffer until the flush
    with face.producer(linger_ms=60_000, buffer_memory=1, max_block_ms=200) as producer:
        first = producer.send(topic, b"x" * 100, b"key")
        started_s = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="buffer_memory of 1 bytes full for 200 ms"):
            producer.send(topic, b"y", b"key")
        assert time.monotonic() - started_s >= 0.15  # it waited, it did not fail at once
        producer.flush(10)
        assert first.result().offset == 0
