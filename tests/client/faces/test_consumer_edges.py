"""More consumer edges an experienced Kafka user relies on, the same on every face:
``subscription()``, commits with explicit offsets and metadata, commits and lookups outside
the assignment or after ``close``, auto-commit at its interval, ``poll`` without waiting,
``consumer_timeout_ms`` for ``for`` and ``async for``, ``offsets_for_times`` over several
partitions, fetch limits smaller than one batch, and two members of one group in one process.

Where kafka-python (blocking) and aiokafka (async) say the same, the test pins it."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.client import KafkaError, NewTopic, OffsetAndMetadata
from odradek.client import TopicPartition as TP
from tests.broker_process import BrokerProcess
from tests.client.faces.driver import Face
from tests.client.faces.test_consumer import produce
from tests.client.faces.test_edges import polled, strict_broker, until  # noqa: F401 (a fixture)
from tests.client.faces.test_groups import MEMBER


def test_subscription_names_the_topics_or_the_patterns_matches(face: Face, topic: str) -> None:
    """kafka-python's and aiokafka's ``subscription()``: the topics subscribed to, or those the
    pattern matches now; nothing once unsubscribed."""
    produce(face, f"{topic}-a", 1, 1)
    produce(face, f"{topic}-b", 1, 1)
    with face.consumer(group_id=f"g-{topic}", **MEMBER) as consumer:
        assert consumer.subscription() == set()
        consumer.subscribe([f"{topic}-a", f"{topic}-b"])
        assert consumer.subscription() == {f"{topic}-a", f"{topic}-b"}
        consumer.unsubscribe()
        assert consumer.subscription() == set()
        consumer.subscribe(pattern=f"{topic}-[ab]")
        assert len(consumer.take(2)) == 2  # joined: the pattern was matched against the topics
        assert consumer.subscription() == {f"{topic}-a", f"{topic}-b"}
        consumer.unsubscribe()
        consumer.assign([TP(f"{topic}-a", 0)])
        assert consumer.subscription() == set()  # as Java's (kafka-python: None)
    with face.consumer(f"{topic}-a", group_id=f"g-{topic}", **MEMBER) as consumer:
        assert consumer.subscription() == {f"{topic}-a"}


def test_commit_and_committed_after_close_raise(face: Face, topic: str) -> None:
    """A commit after ``close`` raises (Java's ``IllegalStateException``, aiokafka's
    ``IllegalStateError``), as ``poll`` does: it is not silently dropped."""
    produce(face, topic, 1, 2)
    tp = TP(topic, 0)
    with face.consumer(group_id=f"g-{topic}", enable_auto_commit=False, **MEMBER) as consumer:
        consumer.assign([tp])
        assert len(consumer.take(1)) == 1
    with pytest.raises(KafkaError):
        consumer.commit()
    with pytest.raises(KafkaError):
        consumer.commit({tp: 1})
    with pytest.raises(KafkaError):
        consumer.committed(tp)


def test_unsubscribe_clears_a_manual_assignment(face: Face, topic: str) -> None:
    """kafka-python's, aiokafka's and Java's ``unsubscribe()`` also clears the partitions given
    to ``assign``, with or without a ``group_id``."""
    produce(face, topic, 1, 2)
    tp = TP(topic, 0)
    for options in ({}, {"group_id": f"g-{topic}", "enable_auto_commit": False}):
        with face.consumer(auto_offset_reset="earliest", **options) as consumer:
            consumer.assign([tp])
            assert [r.offset for r in consumer.take(1)] == [0]
            consumer.unsubscribe()
            assert consumer.assignment() == set()
            assert consumer.poll(timeout_ms=50) == {}
            consumer.assign([tp])
            assert consumer.position(tp) == 0


class SeekingCommittingListener:
    """A rebalance listener as kafka-python's and aiokafka's users write them: it commits what
    was consumed when partitions are revoked, and seeks each assigned partition to offset 1."""

    def __init__(self, face: Face, consumer: Any) -> None:
        self.is_async = face.is_async
        self.target = consumer._target if face.is_async else consumer.target
        self.calls: list[tuple[str, set[TP]]] = []

    def on_partitions_revoked(self, revoked: Any) -> Any:
        self.calls.append(("revoked", set(revoked)))
        return self.target.commit()  # async: a coroutine, awaited by the consumer

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.calls.append(("assigned", set(assigned)))
        for tp in assigned:
            self.target.seek(tp, 1)


def test_a_listener_commits_on_revoke_and_seeks_on_assign(face: Face, topic: str) -> None:
    """A new ``subscribe`` while subscribed rebalances to the new topics; the listener's commit
    in ``on_partitions_revoked`` and seek in ``on_partitions_assigned`` take effect."""
    a, b = TP(f"{topic}-a", 0), TP(f"{topic}-b", 0)
    produce(face, a.topic, 1, 4)
    produce(face, b.topic, 1, 3)
    options = {**MEMBER, "enable_auto_commit": False}
    with face.consumer(group_id=f"g-{topic}", **options) as consumer:
        listener = SeekingCommittingListener(face, consumer)
        consumer.subscribe([a.topic], listener=listener)
        assert [(r.topic, r.offset) for r in consumer.take(2)] == [(a.topic, 1), (a.topic, 2)]
        consumer.subscribe([b.topic], listener=listener)
        assert [(r.topic, r.offset) for r in consumer.take(2)] == [(b.topic, 1), (b.topic, 2)]
        assert consumer.assignment() == {b}
        assert consumer.subscription() == {b.topic}
        assert consumer.committed(a) == 3  # committed by on_partitions_revoked
        assert listener.calls == [("assigned", {a}), ("revoked", {a}), ("assigned", {b})]


def test_commit_takes_aiokafkas_offset_and_metadata_tuples(face: Face, topic: str) -> None:
    """aiokafka's ``commit({tp: (offset, metadata)})``; kafka-python's ``OffsetAndMetadata``
    has a third field (the leader epoch), ignored here."""
    produce(face, topic, 2, 1)
    group = f"g-{topic}"
    tp0, tp1 = TP(topic, 0), TP(topic, 1)
    with face.consumer(group_id=group, enable_auto_commit=False, **MEMBER) as consumer:
        consumer.commit({tp0: (1, "plain"), tp1: (1, "epoch", -1)})
    with face.admin() as admin:
        offsets = admin.list_group_offsets(group)
    assert (offsets[tp0], offsets[tp1]) == (
        OffsetAndMetadata(1, "plain"),
        OffsetAndMetadata(1, "epoch"),
    )


def test_an_assigned_partition_of_a_missing_topic_waits_for_it(
    face: Face,
    topic: str,
    strict_broker: BrokerProcess,  # noqa: F811 (test_edges' fixture)
) -> None:
    """A partition of a topic that does not exist yet (a broker that creates none): ``poll``
    returns nothing and retries (kafka-python's, aiokafka's and Java's consumers wait for the
    topic), and reads it once it is there."""
    strict = face.with_bootstrap(strict_broker.bootstrap)
    tp = TP(topic, 0)
    with strict.consumer(auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        assert consumer.poll(timeout_ms=200) == {}
        assert consumer.poll(timeout_ms=0) == {}
        with strict.admin() as admin:
            admin.create_topics([NewTopic(topic, 1)])
        with strict.producer() as producer:
            assert producer.send(topic, b"v").result().offset == 0
        assert polled(consumer, 1) == [(0, 0)]


def test_a_member_that_stops_polling_leaves_and_rejoins_when_it_polls(
    face: Face, topic: str
) -> None:
    """KIP-62's ``max_poll_interval_ms`` (kafka-python's and aiokafka's too): a member that
    calls no ``poll`` for that long leaves the group (though its heartbeats go on), so its
    partitions can go to others; its next ``poll`` joins again, from the group's commit. A
    ``poll`` waiting longer than that for records is not idle."""
    produce(face, topic, 1, 4)
    group = f"g-{topic}"
    options = {**MEMBER, "enable_auto_commit": False, "max_poll_interval_ms": 300}
    with face.admin() as admin, face.consumer(topic, group_id=group, **options) as consumer:
        assert [r.offset for r in consumer.take(4)] == [0, 1, 2, 3]
        assert consumer.poll(timeout_ms=500) == {}  # waiting in poll is not idle
        assert len(admin.describe_groups([group])[0].members) == 1
        consumer.commit({TP(topic, 0): 2})
        until(lambda: not admin.describe_groups([group])[0].members, "the idle member stayed")
        assert polled(consumer, 2) == [(0, 2), (0, 3)]  # joined again, from the commit
        assert len(admin.describe_groups([group])[0].members) == 1


def test_a_static_member_keeps_its_place_when_it_closes(face: Face, topic: str) -> None:
    """KIP-345 (Java, kafka-python and aiokafka): a static member (``group_instance_id``)
    sends no LeaveGroup when it closes; its place waits ``session_timeout_ms`` for the same
    instance, which takes it over and resumes from the commit made on close."""
    produce(face, topic, 1, 4)
    group = f"g-{topic}"
    options = {**MEMBER, "group_instance_id": "i-1", "auto_commit_interval_ms": 60_000}
    with face.admin() as admin:
        for expected in ([0, 1], [2, 3]):
            with face.consumer(topic, group_id=group, **options) as consumer:
                assert [r.offset for r in consumer.take(2)] == expected
            [described] = admin.describe_groups([group])
            assert [m.group_instance_id for m in described.members] == ["i-1"]
