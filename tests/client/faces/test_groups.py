"""Consumer groups, the same on every face: subscribe, commit and committed offsets (the next
offset to read), resuming from a commit, auto-commit on close, leaving the group, deleting a
group's offsets."""

from __future__ import annotations

import time

import pytest

from odradek.client import NewTopic, OffsetAndMetadata, TopicPartition
from odradek.client.errors import GroupIdNotFoundError, GroupSubscribedToTopicError
from tests.client.faces.driver import Face

MEMBER = {
    "heartbeat_interval_ms": 100,
    "session_timeout_ms": 5000,
    "max_poll_interval_ms": 10_000,
    "auto_offset_reset": "earliest",
    "consumer_timeout_ms": 5000,
}


def produce(face: Face, topic: str, partitions: int, count: int) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    with face.producer(partitioner="round_robin") as producer:
        sent = [producer.send(topic, b"v%d" % i) for i in range(count)]
        producer.flush(10)
        assert all(d.result().offset >= 0 for d in sent)


def test_subscribe_commit_and_resume(face: Face, topic: str) -> None:
    produce(face, topic, 2, 10)
    group = f"g-{topic}"
    tps = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    with face.consumer(group_id=group, enable_auto_commit=False, **MEMBER) as consumer:
        consumer.subscribe([topic])
        first = consumer.take(6)
        assert consumer.assignment() == tps
        consumer.commit()
        consumed = {tp: 0 for tp in tps}
        for record in first:
            tp = TopicPartition(record.topic, record.partition)
            consumed[tp] = max(consumed[tp], record.offset + 1)
        assert {tp: consumer.committed(tp) for tp in tps} == consumed  # the next to read
        consumer.commit({TopicPartition(topic, 0): 1})
        assert consumer.committed(TopicPartition(topic, 0)) == 1
    with face.consumer(topic, group_id=group, enable_auto_commit=False, **MEMBER) as consumer:
        rest = consumer.take(10 - 6 + consumed[TopicPartition(topic, 0)] - 1)
    resumed = sorted((r.partition, r.offset) for r in rest)
    expected = sorted(
        [(0, o) for o in range(1, 5)]
        + [(1, o) for o in range(consumed[TopicPartition(topic, 1)], 5)]
    )
    assert resumed == expected


def test_close_commits_with_auto_commit(face: Face, topic: str) -> None:
    produce(face, topic, 1, 5)
    group = f"g-{topic}"
    tp = TopicPartition(topic, 0)
    with face.consumer(topic, group_id=group, auto_commit_interval_ms=60_000, **MEMBER) as c:
        assert [r.offset for r in c.take(3)] == [0, 1, 2]
    with face.admin() as admin:
        assert admin.list_group_offsets(group)[tp].offset == 3


def test_group_membership_is_visible_and_left(face: Face, topic: str) -> None:
    produce(face, topic, 1, 1)
    group = f"g-{topic}"
    with face.admin() as admin:
        with face.consumer(topic, group_id=group, **MEMBER) as consumer:
            assert len(consumer.take(1)) == 1
            [described] = admin.describe_groups([group])
            assert described.state == "Stable" and len(described.members) == 1
        deadline = time.monotonic() + 10
        while admin.describe_groups([group])[0].members:  # left on close (no session wait)
            assert time.monotonic() < deadline, "the member did not leave"
        admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(0, "m")})
        assert admin.list_group_offsets(group)[TopicPartition(topic, 0)].metadata == "m"
        admin.delete_groups([group])
        assert group not in {g.group_id for g in admin.list_groups()}


def test_delete_group_offsets(face: Face, topic: str) -> None:
    """An active member's topic keeps its offsets (GroupSubscribedToTopicError); once the
    group is empty they go; an unknown group is not found."""
    produce(face, topic, 1, 2)
    group, tp = f"g-{topic}", TopicPartition(topic, 0)
    with face.admin() as admin:
        with face.consumer(topic, group_id=group, **MEMBER) as consumer:
            assert len(consumer.take(2)) == 2
            consumer.commit()
            (kept,) = admin.delete_group_offsets(group, [tp]).values()
            assert isinstance(kept, GroupSubscribedToTopicError)
            assert admin.list_group_offsets(group)[tp].offset == 2
        deadline = time.monotonic() + 10
        while admin.describe_groups([group])[0].members:  # left on close (no session wait)
            assert time.monotonic() < deadline, "the member did not leave"
        assert admin.delete_group_offsets(group, [tp]) == {tp: None}
        assert admin.list_group_offsets(group) == {}
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets(f"never-{topic}", [tp])


def test_unsubscribe_leaves_the_group_and_stops_reading(face: Face, topic: str) -> None:
    """``unsubscribe()`` leaves the group at once (no session timeout to wait), drops the
    assignment and the records buffered for it; subscribing again resumes from the commit."""
    produce(face, topic, 1, 4)
    group = f"g-{topic}"
    tp = TopicPartition(topic, 0)
    with face.admin() as admin, face.consumer(group_id=group, **MEMBER) as consumer:
        consumer.subscribe([topic])
        assert [r.offset for r in consumer.take(1)] == [0]
        consumer.commit({tp: 1})
        consumer.unsubscribe()
        assert consumer.assignment() == set()
        assert admin.describe_groups([group])[0].members == []
        assert consumer.poll(timeout_ms=300) == {}
        consumer.subscribe([topic])
        assert [r.offset for r in consumer.take(3)] == [1, 2, 3]


def test_a_revoke_callback_that_raises_does_not_stop_the_rebalance(face: Face, topic: str) -> None:
    """An exception from ``on_revoked`` is raised by a poll (the async consumer: as a
    ``KafkaError`` caused by it), once the rebalance is done: the member reads its new
    assignment and the callback is not called again (before, the blocking member revoked the
    same partitions at every poll, raising each time, and the async one never took the new
    assignment)."""
    other = f"{topic}-other"
    produce(face, topic, 1, 3)
    produce(face, other, 1, 3)
    revoked: list[set[TopicPartition]] = []

    def on_revoked(partitions: set[TopicPartition]) -> None:
        revoked.append(partitions)
        raise RuntimeError("on_revoked failed")

    options = {**MEMBER, "partition_assignment_strategy": ["range"]}  # eager: revokes all
    with face.consumer(group_id=f"g-{topic}", on_revoked=on_revoked, **options) as consumer:
        consumer.subscribe([topic])
        assert len(consumer.take(3)) == 3
        consumer.subscribe([topic, other])
        deadline = time.monotonic() + 10
        with pytest.raises(Exception) as caught:  # the callback's, or wrapping it
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=100)
        assert "on_revoked failed" in f"{caught.value} {caught.value.__cause__}"
        assert revoked == [{TopicPartition(topic, 0)}]
        assert sorted((r.topic, r.offset) for r in consumer.take(3)) == [
            (other, o) for o in range(3)
        ]
        assert consumer.assignment() == {TopicPartition(topic, 0), TopicPartition(other, 0)}
        assert len(revoked) == 1
