"""Edges an experienced Kafka user relies on, the same on every face: iteration mixed with
``poll``, seeks and assignments while a drained chunk is half handed out, committed offsets of
manually assigned partitions, resets past the log's ends, pattern subscriptions, rebalance
listeners, and the producer's record limits, unknown topics and delivery metadata.

Where kafka-python (blocking) and aiokafka (async) say the same, the test pins it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.client import (
    KafkaError,
    MessageSizeTooLargeError,
    NewTopic,
    OffsetOutOfRangeError,
    TopicPartition,
)
from tests.broker_process import BrokerProcess
from tests.client.faces.conftest import FAST_GROUPS
from tests.client.faces.driver import Face
from tests.client.faces.test_consumer import produce
from tests.client.faces.test_groups import MEMBER


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


# -- consumer: iteration, poll, seeks ----------------------------------------------------------
def test_iteration_and_poll_mixed_lose_and_repeat_nothing(face: Face, topic: str) -> None:
    produce(face, topic, 1, 12)
    tp = TopicPartition(topic, 0)
    with face.consumer(auto_offset_reset="earliest", max_poll_records=5) as consumer:
        consumer.assign([tp])
        assert [r.offset for r in consumer.take(2)] == [0, 1]  # a chunk of 5 half handed out
        assert consumer.position(tp) == 2
        assert polled(consumer, 3) == [(0, 2), (0, 3), (0, 4)]
        assert [r.offset for r in consumer.take(3)] == [5, 6, 7]
        batch = consumer.poll(timeout_ms=1000, max_records=2)
        assert [r.offset for r in batch[tp]] == [8, 9]
        assert [r.offset for r in consumer.take(2)] == [10, 11]
        assert consumer.position(tp) == 12


def test_seeks_and_assign_during_a_half_handed_out_chunk(face: Face, topic: str) -> None:
    produce(face, topic, 1, 10)
    tp = TopicPartition(topic, 0)
    with face.consumer(auto_offset_reset="earliest", max_poll_records=10) as consumer:
        consumer.assign([tp])
        assert [r.offset for r in consumer.take(3)] == [0, 1, 2]
        consumer.seek(tp, 1)
        assert [r.offset for r in consumer.take(2)] == [1, 2]
        consumer.assign([tp])  # the same partition: its position stays
        assert consumer.position(tp) == 3
        assert [r.offset for r in consumer.take(1)] == [3]
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 10
        consumer.seek_to_beginning()
        assert [r.offset for r in consumer.take(2)] == [0, 1]


def test_a_seek_past_the_end_resets_by_auto_offset_reset(face: Face, topic: str) -> None:
    produce(face, topic, 1, 4)
    tp = TopicPartition(topic, 0)
    with face.consumer(auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 100)
        assert [r.offset for r in consumer.take(2)] == [0, 1]  # out of range: from the start
    with face.consumer(auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 100)
        assert consumer.poll(timeout_ms=300) == {}
        until(lambda: consumer.position(tp) == 4, "no reset to the end")
    with face.consumer(auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 100)
        with pytest.raises(OffsetOutOfRangeError):
            until(lambda: consumer.poll(timeout_ms=100), "no error")


def test_deleted_records_move_the_beginning(face: Face, topic: str) -> None:
    produce(face, topic, 1, 5)
    tp = TopicPartition(topic, 0)
    with face.admin() as admin:
        assert admin.delete_records({tp: 3}) == {tp: 3}
    with face.consumer(auto_offset_reset="earliest") as consumer:
        assert consumer.beginning_offsets([tp]) == {tp: 3}
        assert consumer.end_offsets([tp]) == {tp: 5}
        consumer.assign([tp])
        assert consumer.position(tp) == 3
        assert [r.offset for r in consumer.take(2)] == [3, 4]
        consumer.seek(tp, 1)  # below the log start: out of range, reset to the (new) start
        assert [r.offset for r in consumer.take(1)] == [3]
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 3


def test_max_poll_records_bounds_every_poll(face: Face, topic: str) -> None:
    produce(face, topic, 2, 6)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    with face.consumer(auto_offset_reset="earliest", max_poll_records=4) as consumer:
        consumer.assign(tps)
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 10
        while len(seen) < 12:
            assert time.monotonic() < deadline
            batch = consumer.poll(timeout_ms=200)
            assert sum(map(len, batch.values())) <= 4
            seen += [(r.partition, r.offset) for rs in batch.values() for r in rs]
            small = consumer.poll(timeout_ms=0, max_records=1)
            assert sum(map(len, small.values())) <= 1
            seen += [(r.partition, r.offset) for rs in small.values() for r in rs]
        assert sorted(seen) == [(p, n) for p in range(2) for n in range(6)]


# -- consumer: groups ----------------------------------------------------------------------------
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


def test_commit_after_a_partial_iteration_commits_what_was_handed_out(
    face: Face, topic: str
) -> None:
    produce(face, topic, 1, 10)
    group = f"g-{topic}"
    tp = TopicPartition(topic, 0)
    options = {**MEMBER, "max_poll_records": 10}
    with face.consumer(topic, group_id=group, enable_auto_commit=False, **options) as consumer:
        assert [r.offset for r in consumer.take(3)] == [0, 1, 2]
        consumer.commit()
        assert consumer.committed(tp) == 3
        assert consumer.position(tp) == 3
        assert [r.offset for r in consumer.take(1)] == [3]
    with face.consumer(topic, group_id=group, auto_commit_interval_ms=60_000, **options) as c:
        assert [r.offset for r in c.take(2)] == [3, 4]
    with face.consumer(group_id=group, **MEMBER) as consumer:
        assert consumer.committed(tp) == 5  # auto-commit on close: what was handed out


def test_unsubscribe_then_assign(face: Face, topic: str) -> None:
    """After ``unsubscribe`` the consumer may ``assign``: the partition starts at the group's
    commit, and a seek moves it as usual."""
    produce(face, topic, 2, 3)
    group = f"g-{topic}"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with face.consumer(group_id=group, enable_auto_commit=False, **MEMBER) as consumer:
        consumer.subscribe([topic])
        assert len(consumer.take(6)) == 6
        consumer.commit({tp0: 2})
        consumer.unsubscribe()
        assert consumer.assignment() == set()
        consumer.assign([tp0, tp1])
        assert consumer.position(tp0) == 2
        consumer.seek(tp1, 1)
        got = sorted((r.partition, r.offset) for r in consumer.take(3))
        assert got == [(0, 2), (1, 1), (1, 2)]
        assert consumer.assignment() == {tp0, tp1}


def test_pattern_subscription_picks_up_a_topic_created_later(face: Face, topic: str) -> None:
    later = f"{topic}-later"
    produce(face, f"{topic}-first", 1, 1)
    group = f"g-{topic}"
    options = {**MEMBER, "metadata_max_age_ms": 200}
    with face.consumer(group_id=group, **options) as consumer:
        consumer.subscribe(pattern=f"{topic}-.*")
        assert [r.topic for r in consumer.take(1)] == [f"{topic}-first"]
        produce(face, later, 1, 2)
        got = consumer.take(2)
        assert [(r.topic, r.offset) for r in got] == [(later, 0), (later, 1)]
        assert consumer.assignment() == {
            TopicPartition(f"{topic}-first", 0),
            TopicPartition(later, 0),
        }


class Listener:
    """kafka-python's ``ConsumerRebalanceListener`` (aiokafka's has the same two methods)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.calls.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.calls.append(("assigned", set(assigned)))


def test_rebalance_listener_hears_each_assignment(face: Face, topic: str) -> None:
    """kafka-python's and aiokafka's listener (eager assignors): ``on_partitions_assigned``
    gets the whole new assignment, and a rebalance first revokes every partition held."""
    produce(face, topic, 2, 2)
    group = f"g-{topic}"
    tps = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    first, second = Listener(), Listener()
    with face.consumer(group_id=group, **MEMBER) as one:
        one.subscribe([topic], listener=first)
        assert len(one.take(4)) == 4
        assert [call for call in first.calls if call[0] == "assigned"] == [("assigned", tps)]
        held: list[set[TopicPartition]] = [tps]
        stop = threading.Event()

        def keep_polling() -> None:  # the blocking face rebalances inside poll
            while not stop.is_set():
                one.poll(timeout_ms=50)
                held.append(one.assignment())

        with face.consumer(group_id=group, **MEMBER) as two:
            poller = threading.Thread(target=keep_polling)
            poller.start()
            try:
                two.subscribe([topic], listener=second)
                until(
                    lambda: (
                        two.poll(timeout_ms=50) == {}
                        and len(two.assignment()) == 1
                        and len(held[-1]) == 1
                    ),
                    "the group did not split the partitions",
                )
            finally:
                stop.set()
                poller.join()
            mine, theirs = held[-1], two.assignment()
            assert mine | theirs == tps
            assert first.calls[-2:] == [("revoked", tps), ("assigned", mine)]  # eager: all
            assert second.calls[-1] == ("assigned", theirs)


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


# -- producer ------------------------------------------------------------------------------------
def test_a_record_over_the_brokers_message_max_bytes_fails_alone(face: Face, topic: str) -> None:
    """The broker's ``message.max.bytes`` (~1 MiB) refuses a batch that the producer's own
    larger ``max_request_size`` let through: MessageSizeTooLargeError for its records, none
    for the other partition's record sent with it, and the producer keeps working."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with face.producer(max_request_size=4 << 20, linger_ms=50) as producer:
        big = producer.send(topic, b"x" * (2 << 20), partition=0)
        small = producer.send(topic, b"small", partition=1)
        producer.flush(10)
        with pytest.raises(MessageSizeTooLargeError):
            big.result()
        assert small.result().offset == 0
        assert producer.send(topic, b"after", partition=0).result().offset == 0


def test_a_partition_out_of_range_fails_the_delivery(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with face.producer() as producer:
        for partition in (2, -1):
            with pytest.raises(KafkaError):
                producer.send(topic, b"x", partition=partition).result()
        assert producer.send(topic, b"fits", partition=1).result().partition == 1


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
    with BrokerProcess(
        [tmp_path_factory.mktemp("strict") / "logs"], overrides=overrides
    ) as process:
        yield process


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


def test_assign_and_subscribe_exclude_each_other(face: Face, topic: str) -> None:
    """kafka-python's and aiokafka's ``assign`` while subscribed, and ``subscribe`` while
    partitions are assigned, raise (``IllegalStateError`` there, ``ValueError`` here)."""
    produce(face, topic, 1, 2)
    tp = TopicPartition(topic, 0)
    with face.consumer(group_id=f"g-{topic}", enable_auto_commit=False, **MEMBER) as consumer:
        consumer.subscribe([topic])
        assert [r.offset for r in consumer.take(1)] == [0]
        consumer.commit()
        with pytest.raises(ValueError):
            consumer.assign([tp])
        assert consumer.assignment() == {tp}
        consumer.unsubscribe()
        consumer.assign([tp])
        with pytest.raises(ValueError):
            consumer.subscribe([topic])
        consumer.assign([])
        consumer.subscribe([topic])
        assert [r.offset for r in consumer.take(1)] == [1]
