"""The group and log-dir admin calls through the unmodified Kafka clients' admin APIs
(ListGroups, DescribeGroups, OffsetFetch for a whole group, DeleteGroups, OffsetDelete,
DescribeLogDirs), checked against what the odradek Admin sees of the same groups."""

from __future__ import annotations

import pytest

from odradek import Admin, NewTopic, TopicPartition
from tests.broker.kafka.clients import KafkaClient
from tests.broker.kafka.group_clients import commit_assigned, start_member
from tests.broker.kafka.test_groups import fill
from tests.broker_process import BrokerProcess, wait_until

GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68
GROUP_SUBSCRIBED_TO_TOPIC = 86


def test_list_describe_offsets_and_delete(
    client: KafkaClient, shared_broker: BrokerProcess, odradek_admin: Admin, new_topic: str
) -> None:
    """An empty group with a commit and a live group with one member, as each client's admin
    lists, describes and deletes them."""
    bootstrap = shared_broker.bootstrap
    idle, live = f"idle-{new_topic}", f"live-{new_topic}"
    fill(bootstrap, new_topic, 1, 5)
    commit_assigned("confluent", bootstrap, idle, new_topic, 3)
    member = start_member("kafka-python", bootstrap, live, [new_topic])
    try:
        assert wait_until(lambda: member.assigned == {(new_topic, 0)}, 20), member.errors
        assert wait_until(lambda: client.list_groups().get(live) == "Stable", 10)
        listed = client.list_groups()
        assert listed[idle] == "Empty"
        assert client.describe_group(idle) == ("Empty", 0)
        assert client.describe_group(live) == ("Stable", 1)
        assert client.group_offsets(idle) == {(new_topic, 0): 3}
        if not client.deletes_groups:
            return
        # a group with members cannot be deleted; an unknown one is not found
        unknown = f"never-{new_topic}"
        assert client.delete_groups([live, unknown]) == {
            live: NON_EMPTY_GROUP,
            unknown: GROUP_ID_NOT_FOUND,
        }
        assert client.delete_groups([idle]) == {idle: 0}
        assert idle not in {g.group_id for g in odradek_admin.list_groups()}
        assert odradek_admin.list_group_offsets(idle) == {}
        assert idle not in client.list_groups()
    finally:
        member.close()


def test_delete_group_offsets_through_kafka_python(
    shared_broker: BrokerProcess, odradek_admin: Admin, topic: str
) -> None:
    """kafka-python's ``delete_group_offsets`` (OffsetDelete, KIP-496; the other two clients
    have no such call): an inactive group's offsets go, the others stay; a live group keeps the
    offsets of the topic its member subscribes to and loses the others; an unknown group is
    not found."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError

    bootstrap = shared_broker.bootstrap
    read, other = f"{topic}-read", f"{topic}-other"
    odradek_admin.create_topics([NewTopic(read, 2), NewTopic(other, 1)])
    fill(bootstrap, read, 2, 3)
    idle, live = f"idle-{topic}", f"live-{topic}"
    everything = {
        TopicPartition(read, 0): 1,
        TopicPartition(read, 1): 2,
        TopicPartition(other, 0): 0,
    }
    for group in (idle, live):
        odradek_admin.alter_group_offsets(group, everything)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    member = start_member("confluent", bootstrap, live, [read])
    try:
        answer = admin.delete_group_offsets(idle, [KafkaTopicPartition(read, 1)])
        assert answer == {KafkaTopicPartition(read, 1): NoError}
        assert {tp: om.offset for tp, om in odradek_admin.list_group_offsets(idle).items()} == {
            TopicPartition(read, 0): 1,
            TopicPartition(other, 0): 0,
        }
        assert wait_until(lambda: member.assigned == {(read, 0), (read, 1)}, 20), member.errors
        answer = admin.delete_group_offsets(
            live, [KafkaTopicPartition(read, 0), KafkaTopicPartition(other, 0)]
        )
        assert answer == {
            KafkaTopicPartition(read, 0): GroupSubscribedToTopicError,
            KafkaTopicPartition(other, 0): NoError,
        }
        assert TopicPartition(other, 0) not in odradek_admin.list_group_offsets(live)
        assert TopicPartition(read, 0) in odradek_admin.list_group_offsets(live)
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets(f"never-{topic}", [KafkaTopicPartition(read, 0)])
    finally:
        member.close()
        admin.close()


def test_describe_log_dirs_through_kafka_python(
    shared_broker: BrokerProcess, new_topic: str
) -> None:
    """kafka-python's ``describe_log_dirs``: the broker's one log dir, the topic's partition
    with its size on disk, and the volume's total and usable bytes."""
    from kafka import KafkaAdminClient

    fill(shared_broker.bootstrap, new_topic, 1, 10)
    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        (broker,) = admin.describe_log_dirs({new_topic: [0]})
    finally:
        admin.close()
    (log_dir,) = broker["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(shared_broker.log_dirs[0])
    (topic,) = log_dir["topics"]
    assert topic["name"] == new_topic
    (partition,) = topic["partitions"]
    assert partition["partition_index"] == 0
    assert partition["partition_size"] > 10  # ten records, at least a byte each
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
