"""Consumer positions and offsets: seek, position, beginning/end offsets, offsets_for_times,
out-of-range reset policies, partial batches, prefetch, the groups placeholder."""

from __future__ import annotations

import pytest

from odradek.client import (
    Admin,
    Client,
    Consumer,
    NewTopic,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    Producer,
    TopicPartition,
)


def fill(bootstrap: str, topic: str, count: int, *, batch_every: int = 10) -> None:
    """``count`` records, values b"0".., timestamps 1000 + 10*i, in batches of ``batch_every``."""
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    with Producer(bootstrap, linger_ms=60_000) as producer:
        for i in range(count):
            producer.send(topic, b"%d" % i, timestamp_ms=1000 + 10 * i)
            if (i + 1) % batch_every == 0:
                producer.flush()


def poll_values(consumer: Consumer, want: int) -> list[int]:
    out: list[int] = []
    for record in consumer:
        out.append(int(record.value))  # type: ignore[arg-type]
        if len(out) == want:
            break
    return out


def test_seek_position_beginning_end_and_times(bootstrap: str, topic: str) -> None:
    fill(bootstrap, topic, 50)
    tp = TopicPartition(topic, 0)
    with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    ) as consumer:
        consumer.assign([tp])
        assert consumer.assignment() == {tp}
        assert consumer.position(tp) == 0
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 50}
        times = consumer.offsets_for_times({tp: 1000 + 10 * 17 - 5})
        assert times == {tp: OffsetAndTimestamp(17, 1170)}
        assert consumer.offsets_for_times({tp: 10**13}) == {tp: None}
        consumer.seek(tp, 17)  # in the middle of a batch (batches hold 10 records)
        assert consumer.position(tp) == 17
        assert poll_values(consumer, 5) == [17, 18, 19, 20, 21]
        assert consumer.position(tp) == 22
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 50
        assert consumer.poll(timeout_ms=200) == {}
        consumer.seek_to_beginning()
        assert poll_values(consumer, 50) == list(range(50))
        assert consumer.topics() >= {topic}
        assert consumer.partitions_for_topic(topic) == {0}
        assert consumer.partitions_for_topic("no-such-topic-here") is None


def test_latest_reset_sees_only_new_records(bootstrap: str, topic: str) -> None:
    fill(bootstrap, topic, 5)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 5
        with Producer(bootstrap) as producer:
            producer.send(topic, b"99").result(30)
        assert poll_values(consumer, 1) == [99]


def test_out_of_range_resets_by_policy(bootstrap: str, topic: str) -> None:
    fill(bootstrap, topic, 20)
    tp = TopicPartition(topic, 0)
    with Admin(bootstrap) as admin:
        assert admin.delete_records({tp: 10}) == {tp: 10}
    for policy, expected in (("earliest", 10), ("latest", 20)):
        with Consumer(
            bootstrap_servers=bootstrap, auto_offset_reset=policy, consumer_timeout_ms=3000
        ) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 3)  # below the log start offset: out of range
            records = consumer.poll(timeout_ms=3000)
            if policy == "earliest":
                assert [r.offset for r in records[tp]][:1] == [10]
            assert consumer.position(tp) >= expected
    with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="none", consumer_timeout_ms=3000
    ) as consumer:
        consumer.assign([tp])
        with pytest.raises(OffsetOutOfRangeError):
            consumer.position(tp)  # no position and no policy
        consumer.seek(tp, 3)
        with pytest.raises(OffsetOutOfRangeError):
            consumer.poll(timeout_ms=3000)


def test_small_partition_fetch_sizes_handle_partial_batches(bootstrap: str, topic: str) -> None:
    fill(bootstrap, topic, 200, batch_every=7)
    tp = TopicPartition(topic, 0)
    with Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=300,  # cuts the response inside batches
        max_poll_records=3,
        consumer_timeout_ms=5000,
    ) as consumer:
        consumer.assign([tp])
        assert poll_values(consumer, 200) == list(range(200))
    with Client(bootstrap) as client:
        part = client.fetch_raw({tp: 0}, partition_max_bytes=300)[tp]
        assert part.error is None and part.high_watermark == 200
        assert len(part.records) > 0


def test_fetch_raw_reports_partition_errors(bootstrap: str, topic: str) -> None:
    fill(bootstrap, topic, 3)
    with Client(bootstrap) as client:
        result = client.fetch_raw({TopicPartition(topic, 0): 10})
        assert isinstance(result[TopicPartition(topic, 0)].error, OffsetOutOfRangeError)
