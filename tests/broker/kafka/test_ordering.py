"""Kafka's protocol answers in request order on each connection (aiokafka and kafka-python
match answers by position): a long-poll Fetch pipelined before a Metadata is answered first,
when the poll ends. And the native client and a Kafka client share the port at once."""

from __future__ import annotations

import threading
import time

from odradek import Consumer, Producer, TopicPartition
from tests.broker.kafka.clients import KafkaClient, Rec
from tests.broker.kafka.kwire import KafkaWire, fetch_fields
from tests.broker_process import BrokerProcess

FETCH_V = 11
METADATA_V = 8


def metadata_fields(topic: str) -> dict:
    return {
        "topics": [{"name": topic}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def test_pipelined_answers_keep_request_order(shared_broker: BrokerProcess, new_topic: str) -> None:
    with KafkaWire(shared_broker.port) as wire:  # type: ignore[arg-type]
        started = time.monotonic()
        fetch_cid = wire.send(1, FETCH_V, fetch_fields(new_topic, 0, max_wait_ms=800))
        meta_cids = [wire.send(3, METADATA_V, metadata_fields(new_topic)) for _ in range(3)]
        cid, fetched = wire.recv(1, FETCH_V)
        waited_s = time.monotonic() - started
        assert cid == fetch_cid  # first asked, first answered, though Metadata was ready first
        assert waited_s >= 0.7  # the poll ran its course: nothing to read
        (partition,) = fetched["responses"][0]["partitions"]
        assert (partition["error_code"], bytes(partition["records"])) == (0, b"")
        for expected in meta_cids:
            cid, meta = wire.recv(3, METADATA_V)
            assert cid == expected
            assert meta["topics"][0]["name"] == new_topic


def test_long_poll_answered_by_a_later_append(shared_broker: BrokerProcess, new_topic: str) -> None:
    """A Fetch waiting at the end of the log is answered when a record arrives (by the
    native client), before its max wait, and the Metadata behind it follows."""
    with KafkaWire(shared_broker.port) as wire:  # type: ignore[arg-type]
        started = time.monotonic()
        fetch_cid = wire.send(1, FETCH_V, fetch_fields(new_topic, 0, max_wait_ms=20_000))
        meta_cid = wire.send(3, METADATA_V, metadata_fields(new_topic))
        with Producer(shared_broker.bootstrap) as producer:
            producer.send(new_topic, b"wake", key=b"k").result(10)
        cid, fetched = wire.recv(1, FETCH_V)
        assert cid == fetch_cid and time.monotonic() - started < 15
        (partition,) = fetched["responses"][0]["partitions"]
        assert partition["high_watermark"] == 1 and len(partition["records"]) > 0
        assert wire.recv(3, METADATA_V)[0] == meta_cid


def test_native_and_kafka_clients_at_once(
    client: KafkaClient, shared_broker: BrokerProcess, new_topic: str
) -> None:
    """The odradek client and a Kafka client produce to the same partition concurrently on
    the same port; each record lands once, each side's records in its own order."""
    count = 200
    errors: list[BaseException] = []

    def native_side() -> None:
        try:
            with Producer(shared_broker.bootstrap, acks="all") as producer:
                futures = [producer.send(new_topic, b"n%d" % i, partition=0) for i in range(count)]
                for f in futures:
                    f.result(10)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=native_side)
    thread.start()
    client.produce(new_topic, [Rec(None, b"k%d" % i) for i in range(count)])
    thread.join(30)
    assert not errors, errors
    tp = TopicPartition(new_topic, 0)
    with Consumer(bootstrap_servers=shared_broker.bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(values) < 2 * count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
    assert [v for v in values if v[:1] == b"n"] == [b"n%d" % i for i in range(count)]
    assert [v for v in values if v[:1] == b"k"] == [b"k%d" % i for i in range(count)]
    # and the Kafka client reads the native client's records too
    got = client.consume(new_topic, 0, "beginning", 2 * count)
    assert [r.value for r in got] == values
