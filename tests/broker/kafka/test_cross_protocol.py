"""Records cross protocols byte for byte: what each Kafka client writes, the odradek client
reads with the same key, value, headers and timestamp; what the odradek client writes, each
Kafka client reads the same way."""

from __future__ import annotations

import pytest

from odradek import Producer
from tests.broker.kafka.clients import KafkaClient, Rec
from tests.broker.kafka.test_records import native_read
from tests.broker_process import BrokerProcess

BASE_MS = 1_700_000_000_000


def records(null_header: bool) -> list[Rec]:
    return [
        Rec(b"k0", b"v0", [("a", b"1"), ("b", b"\x00\xff")], BASE_MS),
        Rec(None, b"no key", [], BASE_MS + 1),
        Rec(b"tomb", None, [("n", None if null_header else b"")], BASE_MS + 2),
        Rec(b"", b"", [("", b"")], BASE_MS + 3),
        Rec(b"big", bytes(range(256)) * 64, [("h" * 50, b"x" * 100)], BASE_MS + 4),
    ]


@pytest.mark.parametrize("codec", [None, "lz4"])
def test_kafka_written_read_by_odradek(
    client: KafkaClient, shared_broker: BrokerProcess, new_topic: str, codec: str | None
) -> None:
    sent = records(client.null_header_values)
    client.produce(new_topic, sent, compression=codec)
    got = native_read(shared_broker.bootstrap, new_topic, count=len(sent))
    assert [(r.key, r.value, r.headers, r.timestamp, r.timestamp_type) for r in got] == [
        (r.key, r.value, r.headers, r.timestamp_ms, 0) for r in sent
    ]
    assert [r.offset for r in got] == list(range(len(sent)))


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_odradek_written_read_by_kafka(
    client: KafkaClient, shared_broker: BrokerProcess, new_topic: str, codec: str | None
) -> None:
    sent = records(client.null_header_values)
    with Producer(shared_broker.bootstrap, acks="all", compression_type=codec) as producer:
        futures = [
            producer.send(
                new_topic,
                r.value,
                r.key,
                partition=0,
                timestamp_ms=r.timestamp_ms,
                headers=r.headers,
            )
            for r in sent
        ]
        assert [f.result(10).offset for f in futures] == list(range(len(sent)))
    got = client.consume(new_topic, 0, "beginning", len(sent))
    assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in got] == [
        (r.key, r.value, r.headers, r.timestamp_ms) for r in sent
    ]
