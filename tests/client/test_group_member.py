"""GroupMember's rebalance without a broker: an abandoned join leaves the member wanting to
join again, and not joining."""

from __future__ import annotations

import pytest

from odradek.client.config import ConsumerConfig
from odradek.client.drivers import Call
from odradek.client.errors import for_code
from odradek.client.fetcher import Fetcher
from odradek.client.group import GroupMember
from odradek.client.ops import Op
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
