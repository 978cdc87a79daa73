"""More consumer edges an experienced Kafka user relies on, the same on every face:
``subscription()``, ``unsubscribe()`` after ``assign``, a partition of a topic not created yet;
commits with explicit offsets and metadata (also aiokafka's tuples), after ``close``, and by
auto-commit at its interval; misuse errors, ``poll`` without waiting, ``consumer_timeout_ms``,
``offsets_for_times`` over several partitions, fetch limits smaller than one batch; and
groups: a rebalance listener that commits and seeks, a new subscription, two members in one
process, ``max_poll_interval_ms`` and static membership; a compacted log's gaps.

Where kafka-python (blocking) and aiokafka (async) say the same, the test pins it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from odradek.client import KafkaError, NewTopic, OffsetAndMetadata, OffsetAndTimestamp
from odradek.client import TopicPartition as TP
from tests.broker_process import BrokerProcess
from tests.client.faces.driver import Face
from tests.client.faces.test_consumer import produce
from tests.client.faces.test_edges import polled, strict_broker, until  # noqa: F401 (a fixture)
from tests.client.faces.test_groups import MEMBER


# -- subscription and assignment -------------------------------------------------------------------
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


# -- commits ---------------------------------------------------------------------------------------
def test_commit_explicit_offsets_with_metadata(face: Face, topic: str) -> None:
    """``commit({tp: OffsetAndMetadata(offset, metadata)})`` stores both; a partition not
    assigned may be committed too (kafka-python and Java allow it); ``committed`` of a
    partition never committed is ``None``."""
    produce(face, topic, 2, 3)
    group = f"g-{topic}"
    tp0, tp1 = TP(topic, 0), TP(topic, 1)
    with face.consumer(group_id=group, enable_auto_commit=False, **MEMBER) as consumer:
        consumer.assign([tp0])
        assert consumer.committed(tp1) is None
        consumer.commit({tp0: OffsetAndMetadata(2, "here"), tp1: 1})
        assert (consumer.committed(tp0), consumer.committed(tp1)) == (2, 1)
        with pytest.raises(ValueError):
            consumer.commit({tp0: -1})
    with face.admin() as admin:
        offsets = admin.list_group_offsets(group)
    assert offsets[tp0] == OffsetAndMetadata(2, "here")
    assert offsets[tp1].offset == 1


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


def test_auto_commit_at_its_interval(face: Face, topic: str) -> None:
    """With auto-commit, what was handed out is committed every ``auto_commit_interval_ms``
    while the application keeps polling (not only on close)."""
    produce(face, topic, 1, 3)
    group = f"g-{topic}"
    tp = TP(topic, 0)
    options = {**MEMBER, "auto_commit_interval_ms": 100}
    with face.admin() as admin, face.consumer(topic, group_id=group, **options) as consumer:
        assert polled(consumer, 3) == [(0, 0), (0, 1), (0, 2)]

        def committed() -> bool:
            assert consumer.poll(timeout_ms=20) == {}  # the blocking face commits in poll
            found = admin.list_group_offsets(group).get(tp)
            return found is not None and found.offset == 3

        until(committed, "no auto-commit")


def test_auto_commit_covers_assigned_partitions(face: Face, topic: str) -> None:
    """kafka-python's and aiokafka's auto-commit with ``assign`` and a ``group_id``: the
    position is committed at the interval and on close, as for a subscription."""
    produce(face, topic, 1, 2)
    group = f"g-{topic}"
    tp = TP(topic, 0)
    options = {"auto_offset_reset": "earliest", "auto_commit_interval_ms": 100}
    with face.admin() as admin, face.consumer(group_id=group, **options) as consumer:
        consumer.assign([tp])
        assert polled(consumer, 2) == [(0, 0), (0, 1)]

        def committed() -> bool:
            assert consumer.poll(timeout_ms=20) == {}  # the blocking face commits in poll
            found = admin.list_group_offsets(group).get(tp)
            return found is not None and found.offset == 2

        until(committed, "no auto-commit")
        consumer.seek(tp, 1)
    with face.admin() as admin:
        assert admin.list_group_offsets(group)[tp].offset == 1  # on close: the position


# -- positions, polls and lookups ------------------------------------------------------------------
def test_position_and_seek_misuse_raise_value_error(face: Face, topic: str) -> None:
    """The project's error for misuse is ``ValueError`` (kafka-python's and aiokafka's
    ``IllegalStateError`` for an unassigned partition; their ``ValueError`` for a negative
    offset)."""
    produce(face, topic, 1, 1)
    tp = TP(topic, 0)
    with face.consumer(auto_offset_reset="earliest") as consumer:
        with pytest.raises(ValueError):
            consumer.position(tp)
        with pytest.raises(ValueError):
            consumer.seek(tp, 0)
        consumer.assign([tp])
        with pytest.raises(ValueError):
            consumer.seek(tp, -1)
        assert consumer.position(tp) == 0


def test_poll_with_no_timeout_returns_at_once(face: Face, topic: str) -> None:
    produce(face, topic, 1, 1)
    tp = TP(topic, 0)
    with face.consumer(auto_offset_reset="latest", fetch_max_wait_ms=500) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 1
        for _ in range(3):
            started_s = time.monotonic()
            assert consumer.poll(timeout_ms=0) == {}
            assert time.monotonic() - started_s < 0.2


def test_consumer_timeout_ends_an_idle_iteration(face: Face, topic: str) -> None:
    """``consumer_timeout_ms`` ends ``for`` (kafka-python) and ``async for`` (this client's
    async face too) when no record comes, also on an empty partition."""
    produce(face, topic, 1, 0)
    with face.consumer(auto_offset_reset="earliest", consumer_timeout_ms=200) as consumer:
        consumer.assign([TP(topic, 0)])
        started_s = time.monotonic()
        assert consumer.take() == []
        assert 0.19 <= time.monotonic() - started_s < 2


def test_offsets_for_times_over_several_partitions(face: Face, topic: str) -> None:
    produce(face, topic, 3, 3)  # timestamps 1000, 2000, 3000 in each
    tps = [TP(topic, p) for p in range(3)]
    with face.consumer() as consumer:
        found = consumer.offsets_for_times({tps[0]: 0, tps[1]: 3000, tps[2]: 3001})
        assert found == {
            tps[0]: OffsetAndTimestamp(0, 1000),
            tps[1]: OffsetAndTimestamp(2, 3000),
            tps[2]: None,
        }
        for bad in (-3, -100):
            with pytest.raises(ValueError):
                consumer.offsets_for_times({tps[0]: 0, tps[1]: bad})
        assert consumer.offsets_for_times({}) == {}


def test_fetch_limits_smaller_than_a_batch_still_return_it(face: Face, topic: str) -> None:
    """Kafka returns the first batch whole even when it is larger than ``fetch_max_bytes`` and
    ``max_partition_fetch_bytes``: a small limit never leaves the records stuck."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with face.producer(linger_ms=20) as producer:
        sent = [producer.send(topic, b"x" * 1000, partition=p) for p in (0, 1) for _ in range(5)]
        producer.flush(10)
        assert all(d.result().offset >= 0 for d in sent)
    tps = [TP(topic, 0), TP(topic, 1)]
    options = {"fetch_max_bytes": 100, "max_partition_fetch_bytes": 100}
    with face.consumer(auto_offset_reset="earliest", **options) as consumer:
        consumer.assign(tps)
        assert sorted(polled(consumer, 10)) == [(p, n) for p in (0, 1) for n in range(5)]


# -- groups ----------------------------------------------------------------------------------------
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


def test_a_members_commit_is_where_the_next_member_starts(face: Face, topic: str) -> None:
    """Two consumers of one group in one process: when the first leaves, the second is given
    its partition and starts from what the first committed (and keeps its own partition
    where it was, committed by auto-commit at the revocation)."""
    produce(face, topic, 2, 4)
    group = f"g-{topic}"
    tps = {TP(topic, 0), TP(topic, 1)}
    seen: list[tuple[int, int]] = []

    def poll_into(consumer: Any) -> bool:
        batch = consumer.poll(timeout_ms=20)
        seen.extend((r.partition, r.offset) for rs in batch.values() for r in rs)
        return True

    with ExitStack() as first:
        one = first.enter_context(
            face.consumer(topic, group_id=group, **{**MEMBER, "enable_auto_commit": False})
        )
        assert len(one.take(8)) == 8
        one.commit({TP(topic, 0): 3, TP(topic, 1): 1})
        stop = threading.Event()

        def keep_polling() -> None:  # the blocking face rejoins inside poll
            while not stop.is_set():
                one.poll(timeout_ms=20)

        with face.consumer(topic, group_id=group, **MEMBER) as two:
            poller = threading.Thread(target=keep_polling)
            poller.start()
            try:
                until(
                    lambda: poll_into(two) and len(two.assignment()) == len(one.assignment()) == 1,
                    "the group did not split",
                )
            finally:
                stop.set()
                poller.join()
            first.close()  # the first member leaves
            until(lambda: poll_into(two) and len(seen) >= 4, f"only {seen}")
            assert two.poll(timeout_ms=100) == {}
            assert two.assignment() == tps
    assert sorted(seen) == [(0, 3), (1, 1), (1, 2), (1, 3)]


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


# -- a compacted log -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cleaning_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose log cleaner runs at once."""
    overrides = ["log.cleaner.backoff.ms=50", "log.segment.delete.delay.ms=0"]
    with BrokerProcess(
        [tmp_path_factory.mktemp("cleaning") / "logs"], overrides=overrides
    ) as process:
        yield process


def test_a_compacted_range_is_skipped(
    face: Face, topic: str, cleaning_broker: BrokerProcess
) -> None:
    """Records the cleaner removed leave gaps in the offsets: the consumer hands out what is
    left, in order, and its position moves on to the end (Kafka's consumers do)."""
    cleaning = face.with_bootstrap(cleaning_broker.bootstrap)
    configs = {"cleanup.policy": "compact", "segment.bytes": "512"}
    configs["min.cleanable.dirty.ratio"] = "0"
    with cleaning.admin() as admin:
        admin.create_topics([NewTopic(topic, 1, configs=configs)])
    with cleaning.producer(linger_ms=0, max_in_flight=1) as producer:
        for i in range(40):
            producer.send(topic, b"v%d" % i, b"k%d" % (i % 4)).result()
    until(
        lambda: any(e["topic"] == topic for e in cleaning_broker.events("log cleaned")),
        "no cleaning pass",
    )
    tp = TP(topic, 0)
    options = {"auto_offset_reset": "earliest", "max_poll_records": 3, "consumer_timeout_ms": 500}
    with cleaning.consumer(**options) as consumer:
        consumer.assign([tp])
        assert consumer.end_offsets([tp]) == {tp: 40}
        got = []
        deadline = time.monotonic() + 10
        while consumer.position(tp) < 40:
            assert time.monotonic() < deadline, f"stuck at {consumer.position(tp)}"
            got += [(r.offset, r.key, r.value) for r in consumer.take(1)]
        assert consumer.poll(timeout_ms=50) == {}
        offsets = [offset for offset, _, _ in got]
        assert offsets == sorted(set(offsets)) and len(offsets) < 40  # gaps, in order
        gap = min(set(range(40)) - set(offsets))
        consumer.seek(tp, gap)  # into a removed range: the next record left (the cleaner
        [after] = consumer.take(1)  # may have removed more meanwhile)
        assert after.offset > gap and consumer.position(tp) == after.offset + 1
    assert {key: value for _, key, value in got} == {
        b"k%d" % k: b"v%d" % (36 + k) for k in range(4)
    }
