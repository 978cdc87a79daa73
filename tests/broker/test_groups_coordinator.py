"""The group coordinator's state machine alone: a fake clock, no broker, no I/O."""

from __future__ import annotations

import itertools

import pytest

from odradek.broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from odradek.broker.groups.group import GroupState
from odradek.broker.groups.member import Pending
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode as E

SESSION_MS = 10_000
REBALANCE_MS = 30_000


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def advance(self, ms: int) -> int:
        self.now_ms += ms
        return self.now_ms


class Harness:
    """A coordinator, a fake clock, and a stand-in for the api's record writer."""

    def __init__(self, delay_ms: int = 0, partitions: dict[str, int] | None = None) -> None:
        self.clock = Clock()
        self.partitions = partitions if partitions is not None else {"t": 6}
        ids = itertools.count(1)
        self.c = GroupCoordinator(
            CoordinatorConfig(
                initial_rebalance_delay_ms=delay_ms,
                min_session_timeout_ms=1000,
                max_session_timeout_ms=60_000,
            ),
            lambda topic: self.partitions.get(topic, 0),
            new_member_id=lambda client: f"{client}-{next(ids)}",
        )
        self.stored: list[tuple[str, int]] = []

    def store_all(self) -> None:
        """What the api's timer task does: write each queued record, report it stored."""
        while self.c.outbox:
            item = self.c.outbox.pop(0)
            self.stored.append((item.group_id, item.generation))
            self.c.stored(item.group_id, item.generation, self.clock.now_ms)

    def tick(self, ms: int) -> None:
        self.c.tick(self.clock.advance(ms))
        self.store_all()

    def join(
        self, member_id: str = "", group: str = "g", **kw: object
    ) -> Pending[m.JoinGroupResponse]:
        fields: dict[str, object] = {
            "group_id": group,
            "member_id": member_id,
            "client_id": "c",
            "session_timeout_ms": SESSION_MS,
            "rebalance_timeout_ms": REBALANCE_MS,
            "topics": ["t"],
        }
        fields.update(kw)
        req = m.JoinGroupRequest(correlation_id=0, **fields)  # type: ignore[arg-type]
        return self.c.join(req, "/127.0.0.1", self.clock.now_ms)

    def new_member(self, group: str = "g", **kw: object) -> Pending[m.JoinGroupResponse]:
        """The KIP-394 dance: a first join gets MEMBER_ID_REQUIRED, the second joins."""
        first = self.join("", group, **kw)
        assert first.result is not None and first.result.error_code == E.MEMBER_ID_REQUIRED
        return self.join(first.result.member_id, group, **kw)

    def sync(self, member_id: str, generation: int, group: str = "g") -> Pending:
        req = m.SyncGroupRequest(
            correlation_id=0, group_id=group, generation_id=generation, member_id=member_id
        )
        return self.c.sync(req, self.clock.now_ms)

    def heartbeat(self, member_id: str, generation: int, group: str = "g") -> E:
        req = m.HeartbeatRequest(
            correlation_id=0, group_id=group, generation_id=generation, member_id=member_id
        )
        return self.c.heartbeat(req, self.clock.now_ms)

    def group(self, group: str = "g"):
        return self.c.groups[group]


def ok(pending: Pending) -> m.JoinGroupResponse:
    assert pending.done, "still waiting"
    assert pending.result.error_code == 0, E(pending.result.error_code).name
    return pending.result


def test_first_join_requires_member_id_then_forms_generation_one() -> None:
    h = Harness()
    first = h.join()
    assert first.result.error_code == E.MEMBER_ID_REQUIRED
    member_id = first.result.member_id
    assert member_id == "c-1"
    joined = ok(h.join(member_id))
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, member_id, "range")
    assert [mb.member_id for mb in joined.members] == [member_id]  # the leader sees members
    assert h.group().state == GroupState.COMPLETING_REBALANCE
    sync = h.sync(member_id, 1)
    assert not sync.done  # the group record is not stored yet
    h.store_all()
    assert sync.done and sync.result.assignment == {"t": [0, 1, 2, 3, 4, 5]}
    assert h.group().state == GroupState.STABLE
    assert h.stored == [("g", 1)]


def test_invalid_requests() -> None:
    h = Harness()
    assert h.join(group="").result.error_code == E.INVALID_GROUP_ID
    assert h.join(session_timeout_ms=999).result.error_code == E.INVALID_SESSION_TIMEOUT
    assert h.join(session_timeout_ms=60_001).result.error_code == E.INVALID_SESSION_TIMEOUT
    assert h.join("nobody").result.error_code == E.UNKNOWN_MEMBER_ID
    assert h.join(assignors=["nope"]).result.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.c.groups == {}  # no group was created by the failed joins
    ok(h.new_member(assignors=["roundrobin"]))
    assert h.join(assignors=["range"]).result.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_second_member_triggers_rebalance_and_partitions_split() -> None:
    h = Harness()
    a = ok(h.new_member()).member_id
    h.sync(a, 1)
    h.store_all()
    b_join = h.new_member()
    assert not b_join.done and h.group().state == GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, 1) == E.REBALANCE_IN_PROGRESS
    a_join = h.join(a)
    gen = ok(a_join).generation_id
    assert gen == 2 and ok(b_join).generation_id == 2
    b = b_join.result.member_id
    sa, sb = h.sync(a, 2), h.sync(b, 2)
    h.store_all()
    assert sa.result.assignment == {"t": [0, 1, 2]}
    assert sb.result.assignment == {"t": [3, 4, 5]}
    assert h.heartbeat(a, 2) == E.NONE
    assert h.heartbeat(a, 1) == E.ILLEGAL_GENERATION


def test_member_that_does_not_rejoin_is_removed_after_rebalance_timeout() -> None:
    h = Harness()
    a = ok(h.new_member()).member_id
    h.sync(a, 1)
    h.store_all()
    b_join = h.new_member(session_timeout_ms=60_000)
    # a keeps heartbeating (so its session does not expire) but never rejoins
    for _ in range(REBALANCE_MS // 5000):
        assert h.heartbeat(a, 1) == E.REBALANCE_IN_PROGRESS
        h.tick(5000)
        assert not b_join.done or h.clock.now_ms >= REBALANCE_MS
    h.tick(1)
    assert ok(b_join).generation_id == 2
    assert list(h.group().members) == [b_join.result.member_id]
    assert h.heartbeat(a, 2) == E.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_member_and_rebalances() -> None:
    h = Harness()
    a = ok(h.new_member()).member_id  # generation 1: a alone
    b_join = h.new_member()
    gen = ok(h.join(a)).generation_id  # a rejoins; generation 2 has both
    b = ok(b_join).member_id
    h.sync(a, gen)
    h.sync(b, gen)
    h.store_all()
    h.tick(SESSION_MS - 1)
    assert h.heartbeat(a, gen) == E.NONE  # a is alive; b is silent
    h.tick(1)
    assert h.group().state == GroupState.PREPARING_REBALANCE
    assert b not in h.group().members
    rejoin = ok(h.join(a))
    assert rejoin.generation_id == gen + 1
    sync = h.sync(a, gen + 1)
    h.store_all()
    assert sync.result.assignment == {"t": [0, 1, 2, 3, 4, 5]}


def test_last_member_leaving_empties_the_group() -> None:
    h = Harness()
    a = ok(h.new_member()).member_id
    h.sync(a, 1)
    h.store_all()
    code, results = h.c.leave("g", [m.MemberIdentity(member_id=a)], h.clock.now_ms)
    assert code == E.NONE and results[0].error_code == E.NONE
    assert h.group().state == GroupState.EMPTY and h.group().generation == 2
    code, results = h.c.leave("g", [m.MemberIdentity(member_id=a)], h.clock.now_ms)
    assert results[0].error_code == E.UNKNOWN_MEMBER_ID
    h.store_all()
    assert h.stored[-1] == ("g", 2)


def test_pending_member_id_expires() -> None:
    h = Harness()
    first = h.join()
    h.tick(SESSION_MS)
    assert h.join(first.result.member_id).result.error_code == E.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_gathers_members_starting_together() -> None:
    h = Harness(delay_ms=3000)
    a_join = h.new_member()
    h.tick(2000)
    b_join = h.new_member()
    h.tick(1000)  # the delay ends, but b's arrival extends it once more
    assert not a_join.done and not b_join.done
    h.tick(2999)
    assert not a_join.done
    h.tick(1)
    assert ok(a_join).generation_id == ok(b_join).generation_id == 1
    assert len(ok(a_join).members) + len(ok(b_join).members) == 2  # one leader sees both


def test_commit_validation_follows_kafka() -> None:
    h = Harness()
    now = h.clock.now_ms
    # a simple consumer (no membership) on a group that does not exist yet
    assert h.c.validate_commit("s", -1, "", None, now) == E.NONE
    assert h.group("s").state == GroupState.EMPTY
    assert h.c.validate_commit("nope", 3, "x", None, now) == E.ILLEGAL_GENERATION
    assert h.c.validate_commit("", -1, "", None, now) == E.INVALID_GROUP_ID
    a = ok(h.new_member()).member_id
    # CompletingRebalance: members wait for their assignment
    assert h.c.validate_commit("g", 1, a, None, now) == E.REBALANCE_IN_PROGRESS
    h.sync(a, 1)
    h.store_all()
    assert h.c.validate_commit("g", 1, a, None, now) == E.NONE
    assert h.c.validate_commit("g", 0, a, None, now) == E.ILLEGAL_GENERATION
    assert h.c.validate_commit("g", 1, "ghost", None, now) == E.UNKNOWN_MEMBER_ID
    # an admin reset of an active group is refused
    assert h.c.validate_commit("g", -1, "", None, now) == E.UNKNOWN_MEMBER_ID
    # PreparingRebalance: the current generation may still commit (before it rejoins)
    h.new_member()
    assert h.group().state == GroupState.PREPARING_REBALANCE
    assert h.c.validate_commit("g", 1, a, None, now) == E.NONE
    h.c.leave("g", [m.MemberIdentity(member_id=a)], now)  # the newcomer forms generation 2
    assert h.group().generation == 2
    b = next(iter(h.group().members))
    h.c.leave("g", [m.MemberIdentity(member_id=b)], h.clock.now_ms)
    assert h.group().state == GroupState.EMPTY
    assert h.c.validate_commit("g", -1, "", None, now) == E.NONE  # reset of an Empty group


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    h = Harness()
    a = ok(h.join(group_instance_id="i-a")).member_id  # static: no MEMBER_ID_REQUIRED
    h.sync(a, 1)
    h.store_all()
    again = ok(h.join(group_instance_id="i-a"))
    assert again.generation_id == 1 and again.member_id != a
    assert h.heartbeat(a, 1) == E.UNKNOWN_MEMBER_ID
    assert h.group().state == GroupState.STABLE
    req = m.HeartbeatRequest(
        correlation_id=0, group_id="g", generation_id=1, member_id=a, group_instance_id="i-a"
    )
    assert h.c.heartbeat(req, h.clock.now_ms) == E.FENCED_INSTANCE_ID
    sync = h.sync(again.member_id, 1)
    assert sync.result.assignment == {"t": [0, 1, 2, 3, 4, 5]}


def test_partitions_added_to_a_subscribed_topic_rebalance() -> None:
    h = Harness()
    a = ok(h.new_member()).member_id
    h.sync(a, 1)
    h.store_all()
    h.c.topics_changed(["t"], h.clock.now_ms)
    assert h.group().state == GroupState.STABLE  # same count: nothing to do
    h.partitions["t"] = 8
    h.c.topics_changed(["t"], h.clock.now_ms)
    assert h.group().state == GroupState.PREPARING_REBALANCE
    ok(h.join(a))
    sync = h.sync(a, 2)
    h.store_all()
    assert sync.result.assignment == {"t": list(range(8))}


def test_cooperative_rebalance_revokes_first_then_reassigns() -> None:
    h = Harness()
    coop = {"assignors": ["cooperative-sticky"]}
    a = ok(h.new_member(**coop)).member_id
    h.sync(a, 1)
    h.store_all()
    b_join = h.new_member(**coop)
    ok(h.join(a, **coop))
    b = ok(b_join).member_id
    sa, sb = h.sync(a, 2), h.sync(b, 2)
    h.store_all()
    # generation 2: a gives up half, b gets nothing yet; then a follow-up rebalance
    assert sum(len(p) for p in sa.result.assignment.values()) == 3
    assert sb.result.assignment == {}
    assert h.group().state == GroupState.PREPARING_REBALANCE
    ja, jb = h.join(a, **coop), h.join(b, **coop)
    assert ok(ja).generation_id == ok(jb).generation_id == 3
    sa, sb = h.sync(a, 3), h.sync(b, 3)
    h.store_all()
    owned_a, owned_b = set(sa.result.assignment["t"]), set(sb.result.assignment["t"])
    assert owned_a | owned_b == set(range(6)) and not owned_a & owned_b
    assert owned_a == set(h.group().members[a].assignment["t"])
    assert h.group().state == GroupState.STABLE


def test_store_failure_makes_members_rejoin() -> None:
    h = Harness()
    a = ok(h.new_member()).member_id
    sync = h.sync(a, 1)
    item = h.c.outbox.pop()
    h.c.stored(item.group_id, item.generation, h.clock.now_ms, E.COORDINATOR_NOT_AVAILABLE)
    assert sync.result.error_code == E.COORDINATOR_NOT_AVAILABLE
    assert h.group().state == GroupState.PREPARING_REBALANCE


@pytest.mark.parametrize("state_member", [True, False])
def test_delete_only_empty_groups(state_member: bool) -> None:
    h = Harness()
    assert h.c.delete("missing") == E.GROUP_ID_NOT_FOUND
    assert h.c.delete("") == E.INVALID_GROUP_ID
    a = ok(h.new_member()).member_id
    if state_member:
        assert h.c.delete("g") == E.NON_EMPTY_GROUP
    else:
        h.c.leave("g", [m.MemberIdentity(member_id=a)], h.clock.now_ms)
        assert h.c.delete("g") == E.NONE
        h.c.forget("g")
        assert "g" not in h.c.groups
