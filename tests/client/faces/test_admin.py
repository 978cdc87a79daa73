"""The admin client, the same on every face: topics, partitions, configs, offsets, record
deletion, log dirs, and the errors they raise."""

from __future__ import annotations

import contextlib
import socket

import pytest

from odradek.client import (
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaTimeoutError,
    NewTopic,
    OffsetAndTimestamp,
    PartitionInfo,
    TopicAlreadyExistsError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from tests.client.faces.driver import Face


def test_topic_lifecycle(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)], validate_only=True)
        assert topic not in admin.list_topics()
        admin.create_topics([NewTopic(topic, 2, configs={"retention.ms": "60000"})])
        assert topic in admin.list_topics()
        assert "__consumer_offsets" not in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 2)])
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic("bad/name", 1)])
        admin.create_partitions({topic: 3})
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: 2})  # never fewer
        [described] = admin.describe_topics([topic])
        assert described.name == topic and not described.internal
        assert [p.partition for p in described.partitions] == [0, 1, 2]
        admin.delete_topics([topic])
        assert topic not in admin.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([topic])


def test_configs(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1, configs={"retention.ms": "60000"})])
        assert admin.describe_configs(topic)["retention.ms"].value == "60000"
        admin.alter_configs(topic, set={"retention.ms": "120000"})
        assert admin.describe_configs(topic)["retention.ms"].value == "120000"
        admin.alter_configs(topic, delete=["retention.ms"])
        assert admin.describe_configs(topic)["retention.ms"].is_default


def test_the_cluster_and_its_broker_configs(face: Face) -> None:
    with face.admin() as admin:
        cluster = admin.describe_cluster()
        (broker,) = cluster.brokers
        assert f"{broker.host}:{broker.port}" == face.bootstrap
        assert cluster.controller_id == broker.node_id and cluster.cluster_id
        configs = admin.describe_configs(broker=broker.node_id)
        assert configs["num.partitions"].value.isdigit()
        assert configs["log.dirs"].value
        for neither_or_both in ({}, {"topic": "t", "broker": broker.node_id}):
            with pytest.raises(ValueError, match="one of them"):
                admin.describe_configs(**neither_or_both)


def test_offsets_and_record_deletion(face: Face, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1)])
        with face.producer() as producer:
            sent = [producer.send(topic, b"v", timestamp_ms=100 * (i + 1)) for i in range(5)]
            assert [d.result().offset for d in sent] == [0, 1, 2, 3, 4]
        assert admin.list_offsets({tp: -2}) == {tp: OffsetAndTimestamp(0, -1)}
        assert admin.list_offsets({tp: -1})[tp].offset == 5  # type: ignore[union-attr]
        assert admin.list_offsets({tp: 250}) == {tp: OffsetAndTimestamp(2, 300)}
        assert admin.delete_records({tp: 3}) == {tp: 3}
        [described] = admin.describe_topics([topic])
        assert described.partitions == [PartitionInfo(0, 3, 5)]
        dirs = admin.describe_log_dirs([topic])
        assert [tp in d.partitions for d in dirs.values()] == [True]
        assert all(d.error is None for d in dirs.values())


def test_a_silent_bootstrap_server_is_passed_over(face: Face, topic: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (backlog), never answers
        servers = f"127.0.0.1:{silent.getsockname()[1]},{face.bootstrap}"
        with face.with_bootstrap(servers).admin(request_timeout_ms=300) as admin:
            # trying the silent server may take the first call's whole request_timeout_ms
            with contextlib.suppress(KafkaTimeoutError):
                admin.list_topics()
            admin.create_topics([NewTopic(topic, 1)])  # connected to the second server
            assert topic in admin.list_topics()
