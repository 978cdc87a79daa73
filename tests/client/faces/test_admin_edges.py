"""The admin client's edges, the same on every face: the refusals Kafka's admin clients give
(by error code), delete and recreate, partitions added, configs, groups, record deletion, and
the admin when no broker answers or the broker restarted."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.client import (
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaConnectionError,
    KafkaError,
    NewTopic,
    NonEmptyGroupError,
    OffsetAndMetadata,
    OffsetOutOfRangeError,
    PartitionInfo,
    TopicAlreadyExistsError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from tests.broker_process import BrokerProcess
from tests.client.faces.conftest import FAST_GROUPS
from tests.client.faces.driver import Face
from tests.client.faces.test_edges import until
from tests.client.faces.test_groups import MEMBER
from tests.ports import reserve_port


def sent_offsets(face: Face, topic: str, count: int, partition: int = 0) -> list[int]:
    with face.producer() as producer:
        sent = [producer.send(topic, b"v%d" % i, partition=partition) for i in range(count)]
        return [d.result().offset for d in sent]


# -- topics ------------------------------------------------------------------------------------
def test_create_topics_refusals_by_kafkas_codes(face: Face, topic: str) -> None:
    refusals = [
        (NewTopic(f"{topic}/x", 1), InvalidTopicError, 17),
        (NewTopic("..", 1), InvalidTopicError, 17),
        (NewTopic("x" * 250, 1), InvalidTopicError, 17),
        (NewTopic(topic + "-0", 0), InvalidPartitionsError, 37),
        (NewTopic(topic + "-neg", -2), InvalidPartitionsError, 37),
        (NewTopic(topic + "-rf", 1, 2), InvalidReplicationFactorError, 38),
        (NewTopic(topic + "-key", 1, configs={"no.such.key": "1"}), InvalidConfigError, 40),
        (NewTopic(topic + "-val", 1, configs={"retention.ms": "soon"}), InvalidConfigError, 40),
    ]
    with face.admin() as admin:
        for new, error, code in refusals:
            for validate_only in (True, False):
                with pytest.raises(error) as raised:
                    admin.create_topics([new], validate_only=validate_only)
                assert raised.value.code == code
        assert not {t for t in admin.list_topics() if t.startswith(topic)}
        with pytest.raises(InvalidConfigError, match=r"no\.such\.key"):  # the error names the key
            admin.create_topics([NewTopic(topic, 1, configs={"no.such.key": "1"})])
        with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
            admin.create_topics([NewTopic(topic, 1, configs={"retention.ms": "soon"})])

        admin.create_topics([NewTopic(topic)])  # -1 partitions: the broker's num.partitions
        [described] = admin.describe_topics([topic])
        assert len(described.partitions) >= 1
        for validate_only in (True, False):
            with pytest.raises(TopicAlreadyExistsError) as raised:
                admin.create_topics([NewTopic(topic, 1)], validate_only=validate_only)
            assert raised.value.code == 36
        # several topics: the first error is raised, the others are still created
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 1), NewTopic(topic + "-2", 1)])
        assert topic + "-2" in admin.list_topics()


def test_delete_then_recreate_starts_empty(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
        assert sent_offsets(face, topic, 3, partition=1) == [0, 1, 2]
        admin.delete_topics([topic])
        with pytest.raises(UnknownTopicOrPartitionError) as raised:
            admin.delete_topics([topic])
        assert raised.value.code == 3
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topics([topic])
        admin.create_topics([NewTopic(topic, 2)])
        [described] = admin.describe_topics([topic])
        assert described.partitions == [PartitionInfo(0, 0, 0), PartitionInfo(1, 0, 0)]
        assert sent_offsets(face, topic, 1, partition=1) == [0]
        assert admin.list_offsets({TopicPartition(topic, 1): -1})[TopicPartition(topic, 1)] == (
            1,
            -1,
        )
    with face.consumer(auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 1)])
        assert [(r.offset, r.value) for r in consumer.take(1)] == [(0, b"v0")]


def test_create_partitions(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
        for count in (1, 2):  # fewer or the same
            with pytest.raises(InvalidPartitionsError) as raised:
                admin.create_partitions({topic: count})
            assert raised.value.code == 37
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.create_partitions({topic + "-none": 3})
        with face.producer(metadata_max_age_ms=100) as producer:
            assert producer.partitions_for(topic) == {0, 1}
            admin.create_partitions({topic: 4})
            [described] = admin.describe_topics([topic])
            assert [p.partition for p in described.partitions] == [0, 1, 2, 3]
            # a running producer learns of them by its next metadata refresh (kafka-python and
            # aiokafka refuse a partition beyond the cached count at once, as odradek does)
            until(
                lambda: (
                    producer.send(topic, b"x").result()
                    and producer.partitions_for(topic) == {0, 1, 2, 3}
                ),
                "the producer did not see the new partitions",
            )
            assert producer.send(topic, b"x", partition=3).result().offset >= 0
        with face.producer() as producer:
            assert producer.partitions_for(topic) == {0, 1, 2, 3}
            assert producer.send(topic, b"x", partition=2).result().offset >= 0


def test_concurrent_calls_each_get_their_own_answer(face: Face, topic: str) -> None:
    names = [f"{topic}-{i}" for i in range(8)]
    errors: list[Exception] = []
    with face.admin() as admin:

        def create_and_describe(name: str, partitions: int) -> None:
            try:
                admin.create_topics([NewTopic(name, partitions)])
                [described] = admin.describe_topics([name])
                assert len(described.partitions) == partitions, name
            except Exception as exc:  # reported below, on the test's thread
                errors.append(exc)

        threads = [
            threading.Thread(target=create_and_describe, args=(name, i + 1))
            for i, name in enumerate(names)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        assert set(names) <= admin.list_topics()


# -- configs -----------------------------------------------------------------------------------
def test_config_edges(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1, configs={"retention.ms": "60000"})])
        with pytest.raises(InvalidConfigError, match=r"no\.such\.key"):
            admin.alter_configs(topic, set={"no.such.key": "1"})
        with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
            admin.alter_configs(topic, set={"retention.ms": "soon"})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.alter_configs(topic + "-none", set={"retention.ms": "1000"})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_configs(topic + "-none")
        # set and delete are incremental: other overrides stay
        admin.alter_configs(topic, set={"cleanup.policy": "compact"})
        configs = admin.describe_configs(topic)
        assert configs["retention.ms"].value == "60000" and not configs["retention.ms"].is_default
        assert configs["cleanup.policy"].value == "compact"
        admin.alter_configs(topic, delete=["retention.ms"])
        configs = admin.describe_configs(topic)
        assert configs["retention.ms"].is_default and configs["cleanup.policy"].value == "compact"
        assert not any(entry.sensitive and entry.value for entry in configs.values())


# -- groups ------------------------------------------------------------------------------------
def test_group_admin_edges(face: Face, topic: str) -> None:
    group = f"g-{topic}"
    tp = TopicPartition(topic, 0)
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1)])
        sent_offsets(face, topic, 3)
        [unknown] = admin.describe_groups([group])
        assert (unknown.state, unknown.members) == ("Dead", [])
        assert admin.list_group_offsets(group) == {}
        with pytest.raises(GroupIdNotFoundError) as raised:
            admin.delete_groups([group])
        assert raised.value.code == 69
        with face.consumer(topic, group_id=group, enable_auto_commit=False, **MEMBER) as consumer:
            assert len(consumer.take(2)) == 2
            consumer.commit()
            [described] = admin.describe_groups([group])
            assert described.state == "Stable" and described.protocol_type == "consumer"
            [member] = described.members
            assert member.assignment == {tp} and member.topics == [topic]
            assert (group, "Stable") in {(g.group_id, g.state) for g in admin.list_groups()}
            assert [g.group_id for g in admin.list_groups(["Stable"])].count(group) == 1
            assert group not in {g.group_id for g in admin.list_groups(["Empty"])}
            assert admin.list_group_offsets(group) == {tp: OffsetAndMetadata(2, "")}
            with pytest.raises(NonEmptyGroupError) as raised:
                admin.delete_groups([group])
            assert raised.value.code == 68
        until(lambda: admin.describe_groups([group])[0].state == "Empty", "the member left")
        assert group in {g.group_id for g in admin.list_groups(["Empty"])}
        assert admin.list_group_offsets(group) == {tp: OffsetAndMetadata(2, "")}  # kept
        admin.delete_groups([group])
        assert admin.list_group_offsets(group) == {}
        assert admin.describe_groups([group])[0].state == "Dead"


# -- record deletion ---------------------------------------------------------------------------
def test_delete_records_edges(face: Face, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
        sent_offsets(face, topic, 5)
        with pytest.raises(OffsetOutOfRangeError) as raised:
            admin.delete_records({tp: 6})  # past the high watermark
        assert raised.value.code == 1
        assert admin.delete_records({tp: 2}) == {tp: 2}
        assert admin.delete_records({tp: 1}) == {tp: 2}  # below the log start: nothing to do
        tp1 = TopicPartition(topic, 1)
        assert admin.delete_records({tp: -1, tp1: -1}) == {tp: 5, tp1: 0}  # the high watermark
        [described] = admin.describe_topics([topic])
        assert described.partitions == [PartitionInfo(0, 5, 5), PartitionInfo(1, 0, 0)]
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_records({TopicPartition(topic, 2): 0})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_records({TopicPartition(topic + "-none", 0): 0})


# -- no broker, a restarted broker -------------------------------------------------------------
def test_no_broker_answers_within_request_timeout(face: Face) -> None:
    closed = face.with_bootstrap(f"127.0.0.1:{reserve_port()}")  # a port nobody listens on
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        mute = face.with_bootstrap(f"127.0.0.1:{silent.getsockname()[1]}")
        for nobody in (closed, mute):
            with nobody.admin(request_timeout_ms=400) as admin:
                started_s = time.monotonic()
                with pytest.raises((KafkaConnectionError, KafkaError)):
                    admin.list_topics()
                assert time.monotonic() - started_s < 2


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker this module's tests may stop and restart (on the same port)."""
    with BrokerProcess([tmp_path_factory.mktemp("own") / "logs"], overrides=FAST_GROUPS) as process:
        yield process


def test_admin_outlives_a_broker_restart(face: Face, topic: str, own_broker: BrokerProcess) -> None:
    """While the broker is down a call fails within ``request_timeout_ms``; one that is
    still retrying when the broker is back succeeds; later calls reconnect."""
    if own_broker.process is None or own_broker.process.poll() is not None:
        own_broker.start()
    restarted = face.with_bootstrap(own_broker.bootstrap)
    with restarted.admin(request_timeout_ms=500) as quick, restarted.admin() as patient:
        quick.create_topics([NewTopic(topic, 1)])
        assert topic in patient.list_topics()
        own_broker.stop()
        started_s = time.monotonic()
        with pytest.raises(KafkaConnectionError):
            quick.list_topics()
        assert time.monotonic() - started_s < 2
        starter = threading.Thread(target=own_broker.start)
        starter.start()
        try:
            assert topic in patient.list_topics()  # retried until the broker answered
        finally:
            starter.join(30)
        quick.create_partitions({topic: 2})
        [described] = quick.describe_topics([topic])
        assert len(described.partitions) == 2


def test_a_config_value_that_is_not_a_string_is_refused_at_once(face: Face, topic: str) -> None:
    """Kafka's config values are strings (Java's ``Map<String, String>``); an ``int`` or
    ``None`` is a ``TypeError`` naming the key, before anything is sent."""
    with face.admin(request_timeout_ms=3000) as admin:
        for value in (60000, None):
            with pytest.raises(TypeError, match=r"retention\.ms"):
                admin.create_topics([NewTopic(topic, 1, configs={"retention.ms": value})])
        assert topic not in admin.list_topics()
        admin.create_topics([NewTopic(topic, 1)])
        for value in (120000, None):
            with pytest.raises(TypeError, match=r"retention\.ms"):
                admin.alter_configs(topic, set={"retention.ms": value})
        assert admin.describe_configs(topic)["retention.ms"].is_default


def test_validate_only_checks_partitions_and_configs_and_changes_nothing(
    face: Face, topic: str
) -> None:
    """kafka-python's and Java's ``create_partitions`` and ``alter_configs`` take
    ``validate_only``: the broker's refusals, and no change."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
        admin.create_partitions({topic: 3}, validate_only=True)
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: 2}, validate_only=True)
        admin.alter_configs(topic, set={"retention.ms": "1000"}, validate_only=True)
        with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
            admin.alter_configs(topic, set={"retention.ms": "soon"}, validate_only=True)
        [described] = admin.describe_topics([topic])
        assert len(described.partitions) == 2
        assert admin.describe_configs(topic)["retention.ms"].is_default


def test_a_request_timeout_beyond_int32_is_not_sent_to_the_broker(face: Face, topic: str) -> None:
    """``request_timeout_ms`` is also the broker's timeout for the topic and record calls, an
    Int32 on the wire: a larger one (a user's "no limit") must still make calls that work."""
    tp = TopicPartition(topic, 0)
    done = threading.Event()
    with face.admin(request_timeout_ms=2**31) as admin:

        def calls() -> None:
            admin.create_topics([NewTopic(topic, 1)])
            admin.create_partitions({topic: 2})
            assert admin.delete_records({tp: -1}) == {tp: 0}
            admin.delete_topics([topic])
            done.set()

        worker = threading.Thread(target=calls, daemon=True)
        worker.start()
        try:
            assert done.wait(5), "the calls did not end"
        finally:
            admin.close()  # ends the calls (as 'client is closed') if they hang
            worker.join(10)


def test_an_argument_the_broker_cannot_decode_is_refused_at_once(face: Face, topic: str) -> None:
    """A field of the wrong type or out of its wire range (a ``float`` timestamp such as
    ``time.time() * 1000``, a ``str`` count) raises at once, naming the field: kafka-python
    and aiokafka fail such a request on the client too. Sent, it would make the broker close
    the connection, and the call would resend it until ``request_timeout_ms``."""
    tp = TopicPartition(topic, 0)
    refused: list[tuple[Callable[[Any], Any], type[Exception], str]] = [
        (lambda a: a.list_offsets({tp: time.time() * 1000}), TypeError, r"\.timestamp"),
        (lambda a: a.create_partitions({topic: "3"}), TypeError, r"\.count"),
        (lambda a: a.create_topics([NewTopic(topic + "-x", "3")]), TypeError, "num_partitions"),
        (lambda a: a.create_topics([NewTopic(topic + "-x", 1, 2**15)]), ValueError, "replicati"),
        (lambda a: a.delete_records({tp: "0"}), TypeError, r"\.offset"),
        (lambda a: a.delete_topics([topic, 5]), TypeError, r"topic_names\[1\]"),
        (lambda a: a.alter_group_offsets("g", {tp: 1.0}), TypeError, "committed offset"),
    ]
    with face.admin(request_timeout_ms=3000) as admin:
        admin.create_topics([NewTopic(topic, 2)])
        for call, error, field in refused:
            with pytest.raises(error, match=field):
                call(admin)
        assert admin.describe_topics([topic])[0].partitions == [
            PartitionInfo(0, 0, 0),
            PartitionInfo(1, 0, 0),
        ]
