"""Producer -> broker -> Consumer round trips: keys, null values, headers, codecs, acks,
ordering, delivery futures, flush/close."""

from __future__ import annotations

from concurrent.futures import wait

import pytest

from odradek.client import (
    Admin,
    Consumer,
    ConsumerRecord,
    NewTopic,
    Producer,
    RecordMetadata,
    TopicPartition,
)


def consume_all(bootstrap: str, tps: list[TopicPartition], expected: int) -> list[ConsumerRecord]:
    """Read ``expected`` records from the start of ``tps`` (fails if they do not arrive)."""
    with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    ) as consumer:
        consumer.assign(tps)
        out: list[ConsumerRecord] = []
        for record in consumer:
            out.append(record)
            if len(out) == expected:
                break
        return out


def create(bootstrap: str, topic: str, partitions: int = 1, **configs: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, configs)])


def test_keys_null_values_and_headers_round_trip(bootstrap: str, topic: str) -> None:
    create(bootstrap, topic)
    sent = [
        (b"k1", b"v1", None),
        (None, b"no key", None),
        (b"k3", None, None),  # a tombstone
        (b"k4", b"", [("h1", b"x"), ("h2", None), ("h1", b"dup")]),
        (None, None, [("only", b"header")]),
    ]
    with Producer(bootstrap, linger_ms=50) as producer:
        futures = [
            producer.send(topic, value, key=key, headers=headers, timestamp_ms=1_000 + i)
            for i, (key, value, headers) in enumerate(sent)
        ]
        producer.flush()
        metadata = [f.result() for f in futures]
    assert [md.offset for md in metadata] == [0, 1, 2, 3, 4]
    assert metadata[0] == RecordMetadata(topic, 0, 0, 1_000, 2, 2)  # CreateTime: the record's
    assert metadata[2].serialized_value_size == -1 and metadata[1].serialized_key_size == -1
    records = consume_all(bootstrap, [TopicPartition(topic, 0)], len(sent))
    got = [(r.key, r.value, r.headers or None) for r in records]
    assert got == [(k, v, h) for k, v, h in sent]
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    assert [r.timestamp for r in records] == [1000, 1001, 1002, 1003, 1004]
    assert {r.timestamp_type for r in records} == {0}


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec(bootstrap: str, topic: str, codec: str | None) -> None:
    create(bootstrap, topic)
    values = [b"value-%d-" % i + b"x" * (i % 50) for i in range(500)]
    with Producer(bootstrap, compression_type=codec, linger_ms=20) as producer:
        futures = [producer.send(topic, v, key=b"%d" % i) for i, v in enumerate(values)]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(500))
    records = consume_all(bootstrap, [TopicPartition(topic, 0)], 500)
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [b"%d" % i for i in range(500)]


@pytest.mark.parametrize("acks", [0, 1, -1, "all"])
def test_acks(bootstrap: str, topic: str, acks: int | str) -> None:
    create(bootstrap, topic)
    with Producer(bootstrap, acks=acks) as producer:
        futures = [producer.send(topic, b"m%d" % i) for i in range(100)]
        producer.flush()
        offsets = [f.result().offset for f in futures]
    if acks == 0:
        assert offsets == [-1] * 100  # no response: offsets unknown, as Kafka reports
    else:
        assert offsets == list(range(100))
    records = consume_all(bootstrap, [TopicPartition(topic, 0)], 100)
    assert [r.value for r in records] == [b"m%d" % i for i in range(100)]


def test_order_per_partition_with_many_requests_in_flight(bootstrap: str, topic: str) -> None:
    create(bootstrap, topic, partitions=3)
    count = 30_000
    # small batches and no linger: many Produce requests pipelined on the connection
    with Producer(
        bootstrap, linger_ms=0, batch_size=2_000, max_in_flight_requests_per_connection=5
    ) as producer:
        futures = [producer.send(topic, b"%d" % i, partition=i % 3) for i in range(count)]
        producer.flush()
        metadata = [f.result() for f in futures]
    for partition in range(3):
        offsets = [md.offset for md in metadata if md.partition == partition]
        assert offsets == list(range(len(offsets)))
    tps = [TopicPartition(topic, p) for p in range(3)]
    records = consume_all(bootstrap, tps, count)
    for partition in range(3):
        values = [int(r.value) for r in records if r.partition == partition]  # type: ignore[arg-type]
        assert values == list(range(partition, count, 3))


def test_delivery_futures_resolve_with_offsets_and_callbacks(bootstrap: str, topic: str) -> None:
    create(bootstrap, topic, partitions=2)
    seen: list[RecordMetadata] = []
    with Producer(bootstrap, linger_ms=5) as producer:
        futures = [producer.send(topic, b"x", partition=i % 2) for i in range(10)]
        futures[3].add_done_callback(lambda f: seen.append(f.result()))
        _done, not_done = wait(futures, timeout=30)
        assert not not_done
    assert [f.result().offset for f in futures] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert seen == [RecordMetadata(topic, 1, 1, futures[3].result().timestamp, -1, 1)]
    assert seen[0].timestamp > 0  # CreateTime: the time the record was sent


def test_close_delivers_everything_queued(bootstrap: str, topic: str) -> None:
    create(bootstrap, topic)
    producer = Producer(bootstrap, linger_ms=10_000)  # only close() sends these
    futures = [producer.send(topic, b"%d" % i) for i in range(1000)]
    assert not any(f.done() for f in futures)
    producer.close()
    assert [f.result(0).offset for f in futures] == list(range(1000))
    assert len(consume_all(bootstrap, [TopicPartition(topic, 0)], 1000)) == 1000


def test_log_append_time_is_reported(bootstrap: str, topic: str) -> None:
    create(bootstrap, topic, **{"message.timestamp.type": "LogAppendTime"})
    with Producer(bootstrap) as producer:
        md = producer.send(topic, b"x", timestamp_ms=5).result(30)
    assert md.timestamp > 1_600_000_000_000
    [record] = consume_all(bootstrap, [TopicPartition(topic, 0)], 1)
    assert record.timestamp == md.timestamp and record.timestamp_type == 1


def test_send_is_thread_safe(bootstrap: str, topic: str) -> None:
    import threading

    create(bootstrap, topic)
    results: dict[int, list[int]] = {}
    with Producer(bootstrap, linger_ms=1, batch_size=5_000) as producer:

        def worker(n: int) -> None:
            futures = [producer.send(topic, b"%d-%d" % (n, i)) for i in range(2000)]
            results[n] = [f.result(60).offset for f in futures]

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    offsets = [o for n in range(4) for o in results[n]]
    assert sorted(offsets) == list(range(8000))  # every record once
    for n in range(4):
        assert results[n] == sorted(results[n])  # each thread's records in order
    records = consume_all(bootstrap, [TopicPartition(topic, 0)], 8000)
    for n in range(4):
        mine = [r.value for r in records if r.value.startswith(b"%d-" % n)]  # type: ignore[union-attr]
        assert mine == [b"%d-%d" % (n, i) for i in range(2000)]


def test_full_batches_and_the_largest_record_fit_the_broker_limits(
    bootstrap: str, topic: str
) -> None:
    create(bootstrap, topic)
    with Producer(bootstrap, linger_ms=60_000) as producer:  # batches close only when full
        futures = [producer.send(topic, b"%099d" % i) for i in range(30_000)]
        biggest = producer.send(topic, b"x" * (1_048_576 - 61 - 36))
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(30_000))
        assert biggest.result().offset == 30_000
