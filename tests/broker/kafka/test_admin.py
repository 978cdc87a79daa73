"""Kafka admin calls through each unmodified client against a real broker: topics, configs,
partitions, records, and the errors a Kafka broker gives (TOPIC_ALREADY_EXISTS = 36,
INVALID_TOPIC_EXCEPTION = 17, UNKNOWN_TOPIC_OR_PARTITION = 3)."""

from __future__ import annotations

import pytest

from odradek import Admin
from tests.broker.kafka.clients import CLIENTS, ClientError, KafkaClient, Rec, make_client
from tests.broker_process import BrokerProcess

TOPIC_ALREADY_EXISTS = 36
INVALID_TOPIC_EXCEPTION = 17
UNKNOWN_TOPIC_OR_PARTITION = 3

# the exception (or librdkafka error name) each client raises for each code
ERROR_KINDS = {
    "confluent": {36: "TOPIC_ALREADY_EXISTS", 17: "TOPIC_EXCEPTION", 3: "UNKNOWN_TOPIC_OR_PART"},
    "kafka-python": {
        36: "TopicAlreadyExistsError",
        17: "InvalidTopicError",
        3: "UnknownTopicOrPartitionError",
    },
    "aiokafka": {
        36: "TopicAlreadyExistsError",
        17: "InvalidTopicError",
        3: "UnknownTopicOrPartitionError",
    },
}


def assert_error(info: pytest.ExceptionInfo[ClientError], client: KafkaClient, code: int) -> None:
    assert info.value.code == code, info.value
    assert info.value.kind == ERROR_KINDS[client.name][code], info.value


def test_create_list_describe_delete(client: KafkaClient, odradek_admin: Admin, topic: str) -> None:
    client.create_topic(topic, 3, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    assert topic in client.list_topics()
    assert client.describe_topic(topic) == 3
    # the broker holds what the client asked for
    (described,) = odradek_admin.describe_topics([topic])
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    configs = odradek_admin.describe_configs(topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "compact"
    client.delete_topic(topic)
    assert topic not in client.list_topics()
    assert topic not in odradek_admin.list_topics()


def test_create_existing_topic(client: KafkaClient, topic: str) -> None:
    client.create_topic(topic, 1)
    with pytest.raises(ClientError) as info:
        client.create_topic(topic, 2)
    assert_error(info, client, TOPIC_ALREADY_EXISTS)
    assert client.describe_topic(topic) == 1  # the second create changed nothing


@pytest.mark.parametrize("name", ["bad name", "a/b", "x" * 250, ".."])
def test_invalid_topic_name(client: KafkaClient, odradek_admin: Admin, name: str) -> None:
    with pytest.raises(ClientError) as info:
        client.create_topic(name, 1)
    assert_error(info, client, INVALID_TOPIC_EXCEPTION)
    assert name not in odradek_admin.list_topics()


def test_unknown_topic(client: KafkaClient, topic: str) -> None:
    with pytest.raises(ClientError) as info:
        client.delete_topic(topic)
    assert_error(info, client, UNKNOWN_TOPIC_OR_PARTITION)
    if client.describe_auto_creates:  # Metadata allowing auto-creation: as Kafka, create it
        assert client.describe_topic(topic) == 1  # num.partitions
        return
    with pytest.raises(ClientError) as info:
        client.describe_topic(topic)
    assert_error(info, client, UNKNOWN_TOPIC_OR_PARTITION)
    assert topic not in client.list_topics()


def test_describe_configs(client: KafkaClient, topic: str) -> None:
    client.create_topic(topic, 1, {"retention.ms": "123456"})
    configs = client.describe_configs(topic)
    assert configs["retention.ms"] == "123456"
    assert configs["cleanup.policy"] == "delete"  # a default is described too
    assert configs["segment.bytes"] is not None


@pytest.mark.parametrize(
    "name",
    [n for n, c in CLIENTS.items() if c.incremental_alter],  # not aiokafka: no such call
)
def test_alter_configs_incremental(
    shared_broker: BrokerProcess, odradek_admin: Admin, topic: str, name: str
) -> None:
    client = make_client(name, shared_broker.bootstrap)
    try:
        _alter_incremental(client, odradek_admin, topic)
    finally:
        client.close()


def _alter_incremental(client: KafkaClient, odradek_admin: Admin, topic: str) -> None:
    client.create_topic(topic, 1, {"retention.ms": "1000000", "segment.ms": "2000000"})
    client.alter_configs_incremental(topic, {"retention.ms": "4000000"})
    configs = odradek_admin.describe_configs(topic)
    assert configs["retention.ms"].value == "4000000"
    assert configs["segment.ms"].value == "2000000"  # incremental: untouched
    client.alter_configs_incremental(topic, {}, delete=("segment.ms",))
    configs = odradek_admin.describe_configs(topic)
    assert configs["segment.ms"].is_default
    assert client.describe_configs(topic)["retention.ms"] == "4000000"


def test_alter_configs_legacy_replaces(
    client: KafkaClient, odradek_admin: Admin, topic: str
) -> None:
    client.create_topic(topic, 1, {"retention.ms": "1000000", "segment.ms": "2000000"})
    client.alter_configs_legacy(topic, {"retention.ms": "5000000"})
    configs = odradek_admin.describe_configs(topic)
    assert configs["retention.ms"].value == "5000000"
    if client.legacy_alter_keeps_others:  # the client re-sends the other overrides itself
        assert configs["segment.ms"].value == "2000000"
    else:
        assert configs["segment.ms"].is_default  # legacy AlterConfigs replaces the overrides


def test_alter_configs_unknown_topic(client: KafkaClient, topic: str) -> None:
    with pytest.raises(ClientError) as info:
        client.alter_configs_legacy(topic, {"retention.ms": "1"})
    assert info.value.code == UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions(client: KafkaClient, odradek_admin: Admin, topic: str) -> None:
    client.create_topic(topic, 1)
    client.create_partitions(topic, 4)
    assert client.describe_topic(topic) == 4
    (described,) = odradek_admin.describe_topics([topic])
    assert len(described.partitions) == 4
    # the new partitions take records
    assert client.produce(topic, [Rec(b"k", b"v")], partition=3) == [0]


def test_delete_records(client: KafkaClient, topic: str) -> None:
    client.create_topic(topic, 1)
    client.produce(topic, [Rec(None, b"%d" % i) for i in range(10)])
    assert client.delete_records(topic, 0, 6) == 6
    assert client.watermarks(topic, 0) == (6, 10)
    assert [r.value for r in client.consume(topic, 0, "beginning", 4)] == [b"6", b"7", b"8", b"9"]
