"""Consumer groups through the unmodified Kafka clients: commits made without membership
(assign + commit, generation -1) seen by the odradek client and the reverse, and — once the
coordinator passes client-side assignments through — two subscribed members, a rebalance,
commits, and the group's lag through the odradek Admin (``odradek groups describe``)."""

from __future__ import annotations

import pytest

from odradek import Admin, NewTopic, Producer, TopicPartition
from tests.broker.kafka.conftest import CLIENT_NAMES
from tests.broker.kafka.group_clients import commit_assigned, committed, start_member
from tests.broker_process import BrokerProcess, wait_until


@pytest.fixture(params=CLIENT_NAMES)
def name(request: pytest.FixtureRequest) -> str:
    return request.param


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    with Producer(bootstrap) as producer:
        for p in range(partitions):
            for i in range(per_partition):
                producer.send(topic, b"%d-%d" % (p, i), partition=p)
        producer.flush(10)


def test_kafka_commit_seen_by_odradek(
    name: str, shared_broker: BrokerProcess, odradek_admin: Admin, new_topic: str
) -> None:
    group = f"g-{new_topic}"
    fill(shared_broker.bootstrap, new_topic, 1, 5)
    commit_assigned(name, shared_broker.bootstrap, group, new_topic, 3)
    offsets = odradek_admin.list_group_offsets(group)
    assert offsets[TopicPartition(new_topic, 0)].offset == 3
    assert committed(name, shared_broker.bootstrap, group, new_topic) == 3


def test_odradek_commit_seen_by_kafka(
    name: str, shared_broker: BrokerProcess, odradek_admin: Admin, new_topic: str
) -> None:
    group = f"g-{new_topic}"
    fill(shared_broker.bootstrap, new_topic, 1, 5)
    odradek_admin.alter_group_offsets(group, {TopicPartition(new_topic, 0): 4})
    assert committed(name, shared_broker.bootstrap, group, new_topic) == 4


@pytest.mark.slow
def test_two_members_rebalance_commit_and_lag(
    name: str, shared_broker: BrokerProcess, odradek_admin: Admin, topic: str
) -> None:
    """Member A takes both partitions; B joins and each holds one; both consume and commit;
    the odradek Admin sees the Kafka group Stable with two members and its lag; B leaves and
    A takes both again."""
    bootstrap, group = shared_broker.bootstrap, f"g-{topic}"
    odradek_admin.create_topics([NewTopic(topic, 2)])
    fill(bootstrap, topic, 2, 4)
    everything = {(topic, 0), (topic, 1)}
    a = start_member(name, bootstrap, group, [topic])
    b = None
    try:
        assert wait_until(lambda: a.assigned == everything, 10), (a.assigned, a.errors)
        b = start_member(name, bootstrap, group, [topic])
        assert wait_until(lambda: len(a.assigned) == 1 and len(b.assigned) == 1, 30), (
            a.assigned,
            b.assigned,
            a.errors,
            b.errors,
        )
        assert a.assigned | b.assigned == everything
        # every record consumed once the group settled (A may have read some before)
        assert wait_until(lambda: {r[:3] for r in a.records + b.records} >= _all(topic, 4), 20)

        def settled() -> bool:
            offsets = odradek_admin.list_group_offsets(group)
            return {tp.partition: om.offset for tp, om in offsets.items()} == {0: 4, 1: 4}

        assert wait_until(settled, 20)
        (described,) = odradek_admin.describe_groups([group])
        assert described.state == "Stable"
        assert described.protocol_type == "consumer"
        assert len(described.members) == 2
        owned = {(tp.topic, tp.partition) for m in described.members for tp in m.assignment}
        assert owned == everything
        assert lag(odradek_admin, group, topic) == {0: 0, 1: 0}
        b.close()
        b = None
        assert wait_until(lambda: a.assigned == everything, 30), (a.assigned, a.errors)
        a.close()
        assert not a.errors
        fill(bootstrap, topic, 1, 3)  # 3 more on partition 0, nobody consuming
        assert lag(odradek_admin, group, topic) == {0: 3, 1: 0}
        (described,) = odradek_admin.describe_groups([group])
        assert (described.state, described.members) == ("Empty", [])
    finally:
        a.close()
        if b is not None:
            b.close()


def lag(admin: Admin, group: str, topic: str) -> dict[int, int]:
    """Per partition, log end offset - committed offset: `odradek groups describe`'s LAG."""
    committed_offsets = admin.list_group_offsets(group)
    ends = admin.list_offsets({tp: -1 for tp in committed_offsets})
    return {
        tp.partition: ends[tp].offset - om.offset  # type: ignore[union-attr]
        for tp, om in committed_offsets.items()
        if tp.topic == topic
    }


def _all(topic: str, per_partition: int) -> set[tuple[str, int, int]]:
    return {(topic, p, o) for p in (0, 1) for o in range(per_partition)}


def test_member_resumes_from_odradek_commit(
    name: str, shared_broker: BrokerProcess, odradek_admin: Admin, new_topic: str
) -> None:
    """A Kafka member joining a group starts at the offset the odradek client committed."""
    bootstrap, group = shared_broker.bootstrap, f"g-{new_topic}"
    fill(bootstrap, new_topic, 1, 6)
    odradek_admin.alter_group_offsets(group, {TopicPartition(new_topic, 0): 4})
    member = start_member(name, bootstrap, group, [new_topic])
    try:
        assert wait_until(lambda: len(member.records) >= 2, 10), member.errors
        assert [r[2] for r in member.records] == [4, 5]
    finally:
        member.close()
