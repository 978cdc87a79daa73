"""Consumer groups against real broker processes, over the raw protocol (tests/broker/wire.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode as E
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

FAST = [
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=200",
]


class Member:
    """One group member on its own connection (JoinGroup blocks, so each has a socket)."""

    def __init__(self, port: int, group: str, topics: list[str], **join: Any) -> None:
        self.wire = Wire(port)
        self.group = group
        self.topics = topics
        self.join_fields = {"session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, **join}
        self.member_id = ""
        self.generation = -1
        self.assignment: dict[str, list[int]] = {}

    def close(self) -> None:
        self.wire.close()

    def get_id(self) -> None:
        """The first join: KIP-394 answers MEMBER_ID_REQUIRED with our id."""
        reply = self.wire.call(self._join_request())
        assert reply.error_code == E.MEMBER_ID_REQUIRED, reply
        self.member_id = reply.member_id

    def _join_request(self) -> m.JoinGroupRequest:
        return m.JoinGroupRequest(
            correlation_id=0,
            group_id=self.group,
            member_id=self.member_id,
            client_id="test",
            topics=self.topics,
            **self.join_fields,
        )

    def send_join(self) -> None:
        self.wire.send(self._join_request())

    def finish_join(self) -> m.JoinGroupResponse:
        reply, _ = self.wire.recv()
        assert reply.error_code == 0, E(reply.error_code).name
        self.generation = reply.generation_id
        return reply

    def sync(self) -> dict[str, list[int]]:
        reply = self.wire.call(
            m.SyncGroupRequest(
                correlation_id=0,
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
            )
        )
        assert reply.error_code == 0, E(reply.error_code).name
        self.assignment = reply.assignment
        return reply.assignment

    def heartbeat(self) -> E:
        reply = self.wire.call(
            m.HeartbeatRequest(
                correlation_id=0,
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
            )
        )
        return E(reply.error_code)

    def leave(self) -> E:
        reply = self.wire.call(
            m.LeaveGroupRequest(
                correlation_id=0,
                group_id=self.group,
                members=[m.MemberIdentity(member_id=self.member_id)],
            )
        )
        return E(reply.members[0].error_code)

    def commit(self, offsets: dict[tuple[str, int], int], generation: int | None = None) -> E:
        return commit(
            self.wire,
            self.group,
            offsets,
            self.generation if generation is None else generation,
            self.member_id,
        )


def commit(
    wire: Wire, group: str, offsets: dict[tuple[str, int], int], generation: int, member_id: str
) -> E:
    """Commit ``offsets``; the one error code of every partition (they must agree)."""
    topics: dict[str, list[m.OffsetCommitPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            m.OffsetCommitPartition(partition_index=partition, committed_offset=offset)
        )
    reply = wire.call(
        m.OffsetCommitRequest(
            correlation_id=0,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            topics=[m.OffsetCommitTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
    )
    codes = {p.error_code for t in reply.topics for p in t.partitions}
    assert len(codes) == 1, reply
    return E(codes.pop())


def fetch_offsets(wire: Wire, group: str) -> dict[tuple[str, int], int]:
    reply = wire.call(m.OffsetFetchRequest(correlation_id=0, group_id=group, topics=None))
    assert reply.error_code == 0
    return {
        (t.name, p.partition_index): p.committed_offset for t in reply.topics for p in t.partitions
    }


def describe(wire: Wire, group: str) -> m.DescribedGroup:
    return wire.call(m.DescribeGroupsRequest(correlation_id=0, groups=[group])).groups[0]


def form_generation(*members: Member) -> None:
    """Every member (already holding an id) joins; all land in one generation and sync."""
    for member in members:
        member.send_join()
    generations = {member.finish_join().generation_id for member in members}
    assert len(generations) == 1
    for member in members:
        member.sync()


def poll(condition: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"


def assert_split(members: list[Member], topic: str, partitions: int) -> None:
    owned = [p for mb in members for p in mb.assignment.get(topic, [])]
    assert sorted(owned) == list(range(partitions))  # no overlap, no gap


@pytest.fixture
def fast_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(overrides=FAST)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_two_members_split_then_one_leaves(
    broker_factory: Callable[..., BrokerProcess], backend: str
) -> None:
    fast_broker = broker_factory(overrides=FAST, backend=backend)
    admin = Wire(fast_broker.port)
    admin.create_topic("t", 5)
    a, b = Member(fast_broker.port, "g", ["t"]), Member(fast_broker.port, "g", ["t"])
    a.get_id()
    b.get_id()
    form_generation(a, b)
    assert_split([a, b], "t", 5)
    assert sorted([len(a.assignment["t"]), len(b.assignment["t"])]) == [2, 3]
    group = describe(admin, "g")
    assert group.group_state == "Stable" and group.protocol_data == "range"
    assert {mb.member_id: mb.assignment for mb in group.members} == {
        a.member_id: a.assignment,
        b.member_id: b.assignment,
    }
    assert b.leave() == E.NONE
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    form_generation(a)
    assert a.assignment == {"t": [0, 1, 2, 3, 4]} and a.generation == 2
    for wire in (admin, a, b):
        wire.close()


def test_session_timeout_removes_a_silent_member(fast_broker: BrokerProcess) -> None:
    admin = Wire(fast_broker.port)
    admin.create_topic("t", 4)
    a = Member(fast_broker.port, "g", ["t"], session_timeout_ms=10_000)
    b = Member(fast_broker.port, "g", ["t"], session_timeout_ms=1500)
    a.get_id()
    b.get_id()
    form_generation(a, b)
    first = time.monotonic()
    poll(lambda: a.heartbeat() == E.REBALANCE_IN_PROGRESS)  # b went silent: it times out
    assert time.monotonic() - first < 5.0  # b's 1.5 s session, not a's 10 s
    form_generation(a)
    assert a.assignment == {"t": [0, 1, 2, 3]}
    assert [mb.member_id for mb in describe(admin, "g").members] == [a.member_id]
    assert b.heartbeat() == E.UNKNOWN_MEMBER_ID


def test_commit_fetch_and_generation_checks(fast_broker: BrokerProcess) -> None:
    admin = Wire(fast_broker.port)
    admin.create_topic("t", 2)
    a = Member(fast_broker.port, "g", ["t"])
    a.get_id()
    form_generation(a)
    assert a.commit({("t", 0): 10, ("t", 1): 20}) == E.NONE
    assert fetch_offsets(admin, "g") == {("t", 0): 10, ("t", 1): 20}
    assert a.commit({("t", 0): 11}, generation=a.generation - 1) == E.ILLEGAL_GENERATION
    assert commit(admin, "g", {("t", 0): 0}, a.generation, "ghost") == E.UNKNOWN_MEMBER_ID
    # an admin reset (generation -1) of an active group is refused
    assert commit(admin, "g", {("t", 0): 0}, -1, "") == E.UNKNOWN_MEMBER_ID
    assert commit(admin, "g", {("nope", 0): 0}, -1, "") == E.UNKNOWN_MEMBER_ID
    assert a.commit({("t", 9): 1}) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch_offsets(admin, "g") == {("t", 0): 10, ("t", 1): 20}
    assert a.leave() == E.NONE
    assert describe(admin, "g").group_state == "Empty"
    # ... and accepted once the group is Empty
    assert commit(admin, "g", {("t", 0): 0}, -1, "") == E.NONE
    assert fetch_offsets(admin, "g") == {("t", 0): 0, ("t", 1): 20}
    # a simple consumer's group (no membership) and fetching specific partitions
    assert commit(admin, "simple", {("t", 1): 7}, -1, "") == E.NONE
    reply = admin.call(
        m.OffsetFetchRequest(
            correlation_id=0,
            group_id="simple",
            topics=[m.OffsetFetchTopic(name="t", partition_indexes=[0, 1])],
        )
    )
    assert [p.committed_offset for p in reply.topics[0].partitions] == [-1, 7]
    assert commit(admin, "", {("t", 1): 7}, -1, "") == E.INVALID_GROUP_ID


def test_commits_and_groups_survive_sigkill(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=FAST)
    admin = Wire(broker.port)
    admin.create_topic("t", 3)
    a = Member(broker.port, "g", ["t"], session_timeout_ms=30_000)
    a.get_id()
    form_generation(a)
    for i in range(50):  # every acknowledged commit must survive
        assert a.commit({("t", i % 3): i}) == E.NONE
    assert commit(admin, "simple", {("t", 0): 99}, -1, "") == E.NONE
    broker.kill()
    broker.start()
    admin = Wire(broker.port)
    assert fetch_offsets(admin, "g") == {("t", 0): 48, ("t", 1): 49, ("t", 2): 47}
    assert fetch_offsets(admin, "simple") == {("t", 0): 99}
    group = describe(admin, "g")  # the group record was replayed too
    assert group.group_state == "Stable"
    assert [(mb.member_id, mb.assignment) for mb in group.members] == [
        (a.member_id, {"t": [0, 1, 2]})
    ]
    a.wire = Wire(broker.port)
    assert a.heartbeat() == E.NONE  # the member carries on in its generation
    assert a.commit({("t", 0): 100}) == E.NONE
    topics = {t.name: t for t in admin.metadata(None).topics}
    assert topics["__consumer_offsets"].is_internal and not topics["t"].is_internal
    assert len(topics["__consumer_offsets"].partitions) == 50
    configs = admin.call(
        m.DescribeConfigsRequest(
            correlation_id=0,
            resources=[
                m.DescribeConfigsResource(
                    resource_type=m.ConfigResourceType.TOPIC,
                    resource_name="__consumer_offsets",
                    configuration_keys=["cleanup.policy"],
                )
            ],
        )
    )
    assert [(c.name, c.value) for c in configs.results[0].configs] == [
        ("cleanup.policy", "compact")
    ]


def test_deleted_topic_offsets_are_removed(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(overrides=FAST)
    admin = Wire(broker.port)
    admin.create_topic("doomed", 2)
    admin.create_topic("kept", 1)
    assert commit(admin, "g", {("doomed", 0): 5, ("doomed", 1): 6, ("kept", 0): 7}, -1, "") == 0
    reply = admin.call(m.DeleteTopicsRequest(correlation_id=0, topic_names=["doomed"]))
    assert reply.topics[0].error_code == 0
    assert fetch_offsets(admin, "g") == {("kept", 0): 7}
    admin.create_topic("doomed", 2)  # a new topic of the same name starts with no offsets
    assert fetch_offsets(admin, "g") == {("kept", 0): 7}
    broker.kill()
    broker.start()
    assert fetch_offsets(Wire(broker.port), "g") == {("kept", 0): 7}  # tombstones are durable


def test_list_describe_delete_groups(fast_broker: BrokerProcess) -> None:
    admin = Wire(fast_broker.port)
    admin.create_topic("t", 1)
    a = Member(fast_broker.port, "active", ["t"])
    a.get_id()
    form_generation(a)
    assert commit(admin, "idle", {("t", 0): 3}, -1, "") == E.NONE

    def listed(*states: str) -> dict[str, str]:
        reply = admin.call(m.ListGroupsRequest(correlation_id=0, states_filter=list(states)))
        return {g.group_id: g.group_state for g in reply.groups}

    assert listed() == {"active": "Stable", "idle": "Empty"}
    assert listed("stable") == {"active": "Stable"}
    assert describe(admin, "unknown").group_state == "Dead"
    assert describe(admin, "").error_code == E.INVALID_GROUP_ID

    def delete(*groups: str) -> list[int]:
        reply = admin.call(m.DeleteGroupsRequest(correlation_id=0, groups_names=list(groups)))
        return [r.error_code for r in reply.results]

    assert delete("active", "idle", "unknown") == [
        E.NON_EMPTY_GROUP,
        E.NONE,
        E.GROUP_ID_NOT_FOUND,
    ]
    assert fetch_offsets(admin, "idle") == {}
    assert listed() == {"active": "Stable"}
    a.leave()
    assert delete("active") == [E.NONE]
    assert listed() == {}
    fast_broker.kill()
    fast_broker.start()
    assert Wire(fast_broker.port).call(m.ListGroupsRequest(correlation_id=0)).groups == []


def test_join_waits_without_blocking_the_connection(fast_broker: BrokerProcess) -> None:
    admin = Wire(fast_broker.port)
    admin.create_topic("t", 2)
    a, b = Member(fast_broker.port, "g", ["t"]), Member(fast_broker.port, "g", ["t"])
    a.get_id()
    b.get_id()
    a.send_join()  # waits for b (a pending member)
    list_cid = a.wire.send(m.ListGroupsRequest(correlation_id=0))
    reply, _ = a.wire.recv()
    assert reply.correlation_id == list_cid  # answered while the join still waits
    b.send_join()
    assert a.finish_join().generation_id == b.finish_join().generation_id == 1


def test_partitions_added_rebalance_the_group(fast_broker: BrokerProcess) -> None:
    admin = Wire(fast_broker.port)
    admin.create_topic("t", 2)
    a = Member(fast_broker.port, "g", ["t"])
    a.get_id()
    form_generation(a)
    reply = admin.call(
        m.CreatePartitionsRequest(
            correlation_id=0, topics=[m.CreatePartitionsTopic(name="t", count=4)]
        )
    )
    assert reply.results[0].error_code == 0
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    form_generation(a)
    assert a.assignment == {"t": [0, 1, 2, 3]}


def test_initial_rebalance_delay_and_session_bounds(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=["group.initial.rebalance.delay.ms=300"])
    admin = Wire(broker.port)
    admin.create_topic("t", 2)
    bad = Member(broker.port, "g", ["t"], session_timeout_ms=100)  # below the 6000 ms minimum
    assert bad.wire.call(bad._join_request()).error_code == E.INVALID_SESSION_TIMEOUT
    a = Member(broker.port, "g", ["t"])
    a.get_id()
    started = time.monotonic()
    form_generation(a)
    assert time.monotonic() - started >= 0.3  # the first rebalance waited for the delay


def test_graceful_shutdown_answers_a_waiting_join(fast_broker: BrokerProcess) -> None:
    Wire(fast_broker.port).create_topic("t", 1)
    a, b = Member(fast_broker.port, "g", ["t"]), Member(fast_broker.port, "g", ["t"])
    a.get_id()
    b.get_id()
    a.send_join()  # waits for b, which never comes
    started = time.monotonic()
    assert fast_broker.stop() == 0
    assert time.monotonic() - started < 10  # not the 30 s shutdown grace
    reply, _ = a.wire.recv()
    assert reply.error_code == E.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_partitions_split_without_overlap_or_gap_for_1_to_p_plus_1_members(
    fast_broker: BrokerProcess, assignor: str
) -> None:
    partitions = 5
    Wire(fast_broker.port).create_topic("t", partitions)
    for count in range(1, partitions + 2):
        group = f"{assignor}-{count}"
        members = [
            Member(fast_broker.port, group, ["t"], assignors=[assignor]) for _ in range(count)
        ]
        for member in members:
            member.get_id()
        form_generation(*members)
        assert_split(members, "t", partitions)
        sizes = sorted(len(mb.assignment.get("t", [])) for mb in members)
        if assignor != "range":  # range takes ceil(P/C) chunks (5 over 4: 2, 2, 1, 0)
            assert sizes[-1] - sizes[0] <= 1
        for member in members:
            member.close()


def test_offset_delete(broker_factory: Callable[..., BrokerProcess]) -> None:
    """OffsetDelete (KIP-496): an active group keeps the offsets of its subscribed topic and
    loses the others; once Empty it loses those too; the tombstones survive SIGKILL."""
    broker = broker_factory(overrides=FAST)
    admin = Wire(broker.port)
    admin.create_topic("t", 2)
    admin.create_topic("u", 1)
    a = Member(broker.port, "g", ["t"], session_timeout_ms=30_000)
    a.get_id()
    form_generation(a)
    assert a.commit({("t", 0): 5, ("t", 1): 6, ("u", 0): 7}) == E.NONE

    def delete(group: str, *tps: tuple[str, int]) -> tuple[int, dict[tuple[str, int], int]]:
        topics: dict[str, list[int]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(partition)
        request = m.OffsetDeleteRequest(
            correlation_id=0,
            group_id=group,
            topics=[m.OffsetFetchTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
        )
        reply = admin.call(request)
        codes = {
            (t.name, p.partition_index): p.error_code for t in reply.topics for p in t.partitions
        }
        return reply.error_code, codes

    assert delete("g", ("t", 0), ("u", 0), ("u", 9), ("absent", 0)) == (
        E.NONE,
        {
            ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC,
            ("u", 0): E.NONE,
            ("u", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
            ("absent", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        },
    )
    assert fetch_offsets(admin, "g") == {("t", 0): 5, ("t", 1): 6}
    assert delete("unknown", ("t", 0)) == (E.GROUP_ID_NOT_FOUND, {})
    assert delete("", ("t", 0)) == (E.INVALID_GROUP_ID, {})
    a.leave()
    assert delete("g", ("t", 1), ("u", 0)) == (E.NONE, {("t", 1): E.NONE, ("u", 0): E.NONE})
    assert fetch_offsets(admin, "g") == {("t", 0): 5}
    broker.kill()
    broker.start()
    assert fetch_offsets(Wire(broker.port), "g") == {("t", 0): 5}
