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


def test_a_revoke_callback_that_raises_still_revokes_and_is_not_called_again() -> None:
    """As Java's ConsumerCoordinator.onJoinPrepare: an exception from ``on_revoked`` is raised
    (by the poll), but the partitions are revoked all the same, and the next poll goes on with
    the join without calling the callback again (before, the member kept the partitions and
    the next poll revoked them again, calling the callback once more)."""
    config = ConsumerConfig(bootstrap_servers="h", group_id="g", enable_auto_commit=False)
    member = GroupMember(config, Fetcher(config), dict, on_revoked=lambda partitions: None)
    member.subscribe(["t"])
    tp = TopicPartition("t", 0)
    member.member_id, member.generation, member.assignment = "m-1", 3, {tp}  # joined, eager
    member.fetcher.assign({tp})
    member.rejoin_needed = True  # the group is rebalancing
    op = member.poll_op()
    notify = next(op)
    assert isinstance(notify, Notify) and notify.partitions == {tp}
    with pytest.raises(RuntimeError, match="callback failed"):
        op.throw(RuntimeError("the application's callback failed"))
    assert member.assignment == set() and tp not in member.fetcher.positions
    assert member.rejoin_needed
    join = next(member.poll_op())  # the next poll joins at once: no second Notify
    assert isinstance(join, Call) and isinstance(join.request, m.JoinGroupRequest)
