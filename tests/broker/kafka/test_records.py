"""Produce and consume-by-assignment through each unmodified Kafka client: keys, headers, null
values, every compression codec, acks 0/1/all, seeks, offsets by timestamp (and the largest
timestamp's), watermarks and a long poll. Records are read back by the same client and, byte
for byte, by the odradek client (the broker stores what the client sent: a produce never
re-encodes a batch)."""

from __future__ import annotations

import threading
import time

import pytest

from odradek import Consumer, TopicPartition
from tests.broker.kafka.clients import KafkaClient, Rec, make_client
from tests.broker.kafka.conftest import CLIENT_NAMES
from tests.broker_process import BrokerProcess, wait_until

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def sample(count: int = 5, null_header: bool = True) -> list[Rec]:
    """Records with keys, headers (one with a null value if ``null_header``), a null key and
    a null value."""
    records = [
        Rec(b"key-%d" % i, b"value-%d" % i * (i + 1), [("h", b"%d" % i), ("empty", b"")])
        for i in range(count - 2)
    ]
    records.append(Rec(None, b"no key", [("n", None if null_header else b"")]))
    records.append(Rec(b"tombstone", None))
    return records


def native_read(bootstrap: str, topic: str, partition: int = 0, count: int = 1) -> list:
    """``count`` records of one partition from offset 0, read by the odradek client."""
    tp = TopicPartition(topic, partition)
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list = []
        deadline = time.monotonic() + 10
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(records)
        return out


def same(records: list[Rec], got: list[Rec]) -> None:
    assert [(r.key, r.value, r.headers) for r in got] == [
        (r.key, r.value, r.headers) for r in records
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_each_codec(
    client: KafkaClient, shared_broker: BrokerProcess, new_topic: str, codec: str | None
) -> None:
    records = sample(null_header=client.null_header_values)
    assert client.produce(new_topic, records, compression=codec) == list(range(len(records)))
    got = client.consume(new_topic, 0, "beginning", len(records))
    same(records, got)
    assert [r.offset for r in got] == list(range(len(records)))
    # the odradek client reads the client's batches as they were written
    native = native_read(shared_broker.bootstrap, new_topic, count=len(records))
    assert [(r.key, r.value, r.headers) for r in native] == [
        (r.key, r.value, r.headers) for r in records
    ]
    assert [r.timestamp for r in native] == [r.timestamp_ms for r in got]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(client: KafkaClient, new_topic: str, acks: int | str) -> None:
    records = [Rec(b"k", b"v%d" % i) for i in range(3)]
    offsets = client.produce(new_topic, records, acks=acks)
    if acks != 0:  # acks=0 gets no answer, so no offsets
        assert offsets == [0, 1, 2]
    got = client.consume(new_topic, 0, "beginning", 3)
    assert [r.value for r in got] == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("name", CLIENT_NAMES)
def test_idempotent_produce(shared_broker: BrokerProcess, new_topic: str, name: str) -> None:
    """The idempotent producer (InitProducerId, then sequenced batches), compressed. The
    timeout is short: this takes well under a second."""
    client = make_client(name, shared_broker.bootstrap)
    try:
        records = sample(null_header=client.null_header_values)
        offsets = client.produce(
            new_topic, records, compression="zstd", idempotent=True, timeout_s=5
        )
        assert offsets == list(range(len(records)))
        same(records, client.consume(new_topic, 0, "beginning", len(records)))
    finally:
        client.close()


def test_timestamps_kept(client: KafkaClient, new_topic: str) -> None:
    base_ms = 1_700_000_000_000
    records = [Rec(b"k", b"%d" % i, [], base_ms + 1000 * i) for i in range(4)]
    client.produce(new_topic, records)
    got = client.consume(new_topic, 0, "beginning", 4)
    assert [r.timestamp_ms for r in got] == [r.timestamp_ms for r in records]


def test_seek_and_from_end(client: KafkaClient, new_topic: str) -> None:
    client.produce(new_topic, [Rec(None, b"%d" % i) for i in range(10)])
    assert [r.offset for r in client.consume(new_topic, 0, 7, 3)] == [7, 8, 9]
    assert client.consume(new_topic, 0, "end", 1, timeout_s=1.0) == []  # nothing after the end


def test_watermarks(client: KafkaClient, new_topic: str) -> None:
    assert client.watermarks(new_topic, 0) == (0, 0)
    client.produce(new_topic, [Rec(None, b"x")] * 5)
    assert client.watermarks(new_topic, 0) == (0, 5)


def test_offsets_for_times(client: KafkaClient, new_topic: str) -> None:
    base_ms = 1_700_000_000_000
    client.produce(new_topic, [Rec(None, b"%d" % i, [], base_ms + 100 * i) for i in range(5)])
    assert client.offset_for_time(new_topic, 0, base_ms) == 0
    assert client.offset_for_time(new_topic, 0, base_ms + 150) == 2  # the next at or after
    assert client.offset_for_time(new_topic, 0, base_ms + 400) == 4
    assert client.offset_for_time(new_topic, 0, base_ms + 401) is None  # none that late


def test_max_timestamp_offset_through_confluent_admin(
    shared_broker: BrokerProcess, new_topic: str
) -> None:
    """confluent-kafka's ``list_offsets`` with ``OffsetSpec.max_timestamp()`` (ListOffsets v7,
    KIP-734): the first record with the largest timestamp, whatever its place; an empty
    partition answers -1."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    tp = KafkaTopicPartition(new_topic, 0)

    def largest() -> tuple[int, int]:
        found = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
        return found.offset, found.timestamp

    assert largest() == (-1, -1)
    base_ms = 1_700_000_000_000
    stamps = [base_ms, base_ms + 900, base_ms + 100, base_ms + 900, base_ms + 500]
    make_client("confluent", shared_broker.bootstrap).produce(
        new_topic, [Rec(None, b"%d" % i, [], ts) for i, ts in enumerate(stamps)]
    )
    assert largest() == (1, base_ms + 900)


def test_long_poll_gets_a_later_record(
    client: KafkaClient, shared_broker: BrokerProcess, new_topic: str
) -> None:
    """A consumer positioned at the end waits; a record produced meanwhile (by the odradek
    client) reaches it."""
    from odradek import Producer

    result: list[list[Rec]] = []
    waiting = threading.Thread(
        target=lambda: result.append(client.consume(new_topic, 0, 0, 1, timeout_s=15))
    )
    waiting.start()
    time.sleep(1.0)  # let the consumer reach its long poll (nothing to observe from outside)
    with Producer(shared_broker.bootstrap) as producer:
        producer.send(new_topic, b"late", key=b"k").result(10)
    waiting.join(20)
    assert wait_until(lambda: bool(result), 1)
    assert [(r.key, r.value, r.offset) for r in result[0]] == [(b"k", b"late", 0)]
