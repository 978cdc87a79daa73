"""GroupMember without a broker: an abandoned join leaves the member wanting to join again,
and not joining; a member that left for not polling refuses commits until it polls."""

from __future__ import annotations

import pytest

from odradek.client.config import ConsumerConfig
from odradek.client.drivers import Call, Notify
from odradek.client.errors import (  # type: ignore[attr-defined]
    CommitFailedError,
    KafkaConnectionError,
    for_code,
)
from odradek.client.fetcher import Fetcher
from odradek.client.group import GroupMember
from odradek.client.ops import Op
from odradek.client.types import TopicPartition
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode


def _joining_member() -> tuple[GroupMember, Op[None]]:
    config = ConsumerConfig(bootstrap_servers="localhost:9092", group_id="g")
    member = GroupMember(config, Fetcher(config), dict)
    member.subscribe(["t"])
    op = member.poll_op()
    call = next(op)  # the JoinGroup, sent
    assert isinstance(call, Call) and isinstance(call.request, m.JoinGroupRequest)
    assert member.joining and not member.rejoin_needed
    return member, op


def test_a_join_abandoned_by_its_driver_is_joined_again() -> None:
    member, op = _joining_member()
    op.close()  # the driver was cancelled mid-join
    assert member.rejoin_needed and not member.joining


def test_a_fatal_join_error_is_raised_and_joined_again_next_time() -> None:
    member, op = _joining_member()
    with pytest.raises(type(for_code(ErrorCode.GROUP_AUTHORIZATION_FAILED))):
        op.throw(for_code(ErrorCode.GROUP_AUTHORIZATION_FAILED, "g"))
    assert member.rejoin_needed and not member.joining


def test_a_member_that_left_for_not_polling_refuses_commits_until_it_polls() -> None:
    """Rule 5: after leaving for not polling, a commit raises CommitFailedError (Java's
    CommitFailedException) without sending anything; the next poll makes it commit again."""
    now_s = [0.0]
    config = ConsumerConfig(bootstrap_servers="h", group_id="g", max_poll_interval_ms=1000)
    member = GroupMember(config, Fetcher(config), dict, clock=lambda: now_s[0])
    member.subscribe(["t"])
    member.member_id, member.generation, member.rejoin_needed = "m-1", 3, False  # joined
    now_s[0] = 1.5
    assert member.idle_expired()
    leave = member.leave_idle_op()
    assert isinstance(next(leave).request, m.LeaveGroupRequest)
    with pytest.raises(StopIteration):  # a failed LeaveGroup is logged: the member left
        leave.throw(KafkaConnectionError("lost"))
    offsets = {TopicPartition("t", 0): 7}
    with pytest.raises(CommitFailedError, match="max_poll_interval_ms"):
        next(member.commit_op(offsets))
    assert member.poll_started()  # joins again
    commit = next(member.commit_op(offsets)).request
    assert isinstance(commit, m.OffsetCommitRequest) and commit.generation_id == -1


@pytest.mark.parametrize("code", [ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID])
def test_a_commit_the_rebalanced_group_refuses_raises_commit_failed(code: ErrorCode) -> None:
    """As Java's and kafka-python's consumers: the broker's answer is the cause, and the
    member joins again at its next poll."""
    config = ConsumerConfig(bootstrap_servers="h", group_id="g")
    member = GroupMember(config, Fetcher(config), dict)
    member.subscribe(["t"])
    member.member_id, member.generation, member.rejoin_needed = "m-1", 3, False
    commit = member.commit_op({TopicPartition("t", 0): 7})
    assert next(commit).request.generation_id == 3
    with pytest.raises(CommitFailedError, match=code.name) as caught:
        commit.throw(for_code(code, "g: t-0"))
    assert caught.value.__cause__.code == code and member.rejoin_needed


def _joined_member(assignment: set[TopicPartition], strategy: str) -> GroupMember:
    """A member of generation 3 reading ``assignment``, its group rebalancing."""
    config = ConsumerConfig(
        bootstrap_servers="h",
        group_id="g",
        enable_auto_commit=False,
        partition_assignment_strategy=[strategy],
    )
    member = GroupMember(config, Fetcher(config), dict)
    member.subscribe(["t"])
    member.member_id, member.generation, member.assignment = "m-1", 3, set(assignment)
    member.protocol_name = strategy
    member.fetcher.assign(assignment)
    member.rejoin_needed = True
    return member


def _rebalance(member: GroupMember, new: set[TopicPartition]) -> None:
    """Run ``member``'s poll, the broker handing it ``new``, until the poll raises (or ends:
    ``StopIteration``). ``on_revoked`` is not called: it raises. The other callbacks are."""
    op = member.poll_op()
    outcome: tuple[object, BaseException | None] = (None, None)
    while True:
        value, error = outcome
        effect = op.throw(error) if error is not None else op.send(value)
        if isinstance(effect, Notify):
            if effect.callback is member.on_revoked:
                outcome = (None, RuntimeError("on_revoked failed"))
            else:
                outcome = (effect.callback(effect.partitions), None)
            continue
        assert isinstance(effect, Call)
        request = effect.request
        if isinstance(request, m.JoinGroupRequest):
            response: m.Response = m.JoinGroupResponse(
                correlation_id=0,
                member_id="m-1",
                generation_id=4,
                protocol_name=member.config.partition_assignment_strategy[0],
            )
        elif isinstance(request, m.SyncGroupRequest):
            assignment: dict[str, list[int]] = {}
            for tp in sorted(new):
                assignment.setdefault(tp.topic, []).append(tp.partition)
            response = m.SyncGroupResponse(correlation_id=0, assignment=assignment)
        else:
            assert isinstance(request, m.OffsetFetchRequest)
            response = m.OffsetFetchResponse(correlation_id=0)
        outcome = ((response, memoryview(b"")), None)


@pytest.mark.parametrize(
    ("strategy", "old", "new", "added"),
    [("range", {0}, {0, 1}, {0, 1}), ("cooperative-sticky", {0, 1}, {1, 2}, {2})],
)
def test_a_rebalance_callback_that_raises_does_not_stop_the_rebalance(
    strategy: str, old: set[int], new: set[int], added: set[int]
) -> None:
    """As Java's ConsumerCoordinator: an exception from ``on_revoked`` is raised by the poll,
    but only once the rebalance is done: the partitions are revoked all the same, the new
    ones assigned and ``on_assigned`` called, and the member needs no other rebalance (before,
    the member kept the revoked partitions, and the eager one revoked them again at the next
    poll; the cooperative one never took the partitions added)."""
    t = [TopicPartition("t", p) for p in range(3)]
    assigned: list[set[TopicPartition]] = []
    member = _joined_member({t[p] for p in old}, strategy)
    member.on_revoked = lambda partitions: None  # raises: see _rebalance
    member.on_assigned = assigned.append
    with pytest.raises(RuntimeError, match="on_revoked failed"):
        _rebalance(member, {t[p] for p in new})
    assert member.assignment == {t[p] for p in new}
    assert set(member.fetcher.positions) == member.assignment
    assert assigned == [{t[p] for p in added}]  # eager: every partition was revoked
    assert not member.rejoin_needed and member.generation == 4
