"""A consumer group's rebalance, rules 2 and 3 of :mod:`odradek.client.group`, as a sans-I/O
operation on a :class:`~odradek.client.group.GroupMember` (effects:
:mod:`odradek.client.drivers`). A member that lost its membership (generation -1) revokes
everything first, as eager assignors do, even under ``cooperative-sticky``.

Errors: JoinGroup and SyncGroup are sent until they succeed: ``REBALANCE_IN_PROGRESS``,
``ILLEGAL_GENERATION`` and ``UNKNOWN_MEMBER_ID`` join again at once (the last two with the
generation dropped, ``UNKNOWN_MEMBER_ID`` with a new member id), retriable and connection errors
after a backoff (``retry_backoff_ms`` doubling); anything else raises. Abandoned (cancelled, a
fatal error), the member is left with ``rejoin_needed``, so its next poll joins again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.client.drivers import Notify, Sleep
from odradek.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from odradek.client.group_ops import OffsetAndMetadata, fetch_offsets_op, join_op, sync_op
from odradek.client.ops import Op
from odradek.client.types import TopicPartition
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.client.group import Callback, GroupMember

__all__ = ["REJOIN_CODES", "rebalance_op"]

log = logging.getLogger("odradek.client.group")  # the membership's one logger, as before the split

# answers that mean "join again" (not "back off"), to a join, a heartbeat or a commit
REJOIN_CODES = {
    ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.UNKNOWN_MEMBER_ID,
}


def rebalance_op(member: GroupMember) -> Op[None]:
    """Join (again) and take the assignment the group's leader made (group rules 2 and 3).

    A rebalance callback that raises does not stop it, as in Java's ``ConsumerCoordinator``:
    the partitions are revoked and assigned all the same, the other callback still runs, and
    the first callback's exception is raised once the member has its new assignment."""
    callback_error: Exception | None = None
    if member.assignment and (not member.cooperative or member.generation < 0):  # < 0: lost
        callback_error = yield from _revoke_op(member, set(member.assignment))
    failures = 0
    member.joining = True
    try:
        while True:
            member.rejoin_needed = False  # a heartbeat may set it again meanwhile
            if member.reset_member:
                member.reset_member = False
                member.member_id, member.generation = "", -1
            try:
                new, committed = yield from _join_and_sync_op(member)
                break
            except KafkaError as exc:
                member.rejoin_needed = True
                delay_s = _membership_error(member, exc, failures)
                failures += 1
                if delay_s:
                    yield Sleep(delay_s)
    except BaseException:  # abandoned (cancelled, interrupted, fatal): join again next time
        member.rejoin_needed = True
        raise
    finally:
        member.joining = False
    revoked = member.assignment - new
    if revoked:  # cooperative: only what moved away
        error = yield from _revoke_op(member, revoked)
        callback_error = callback_error or error
    added = new - member.assignment
    member.assignment = new
    member.fetcher.assign(new)  # positions of kept partitions stay
    for tp in added:
        hit = committed.get(tp)
        if hit is not None:
            member.fetcher.seek(tp, hit.offset)
            member.last_committed[tp] = hit.offset
    member.next_heartbeat_s = member.clock() + member.heartbeat_interval_s
    log.info(
        "group %s: generation %d, member %s, assigned %s",
        member.group_id,
        member.generation,
        member.member_id,
        sorted(new),
    )
    if member.on_assigned is not None:
        error = yield from _callback_op(member.on_assigned, added)
        callback_error = callback_error or error
    if callback_error is not None:
        raise callback_error


def _join_and_sync_op(
    member: GroupMember,
) -> Op[tuple[set[TopicPartition], dict[TopicPartition, OffsetAndMetadata | None]]]:
    joined = yield from join_op(member)
    member.member_id, member.generation = joined.member_id, joined.generation_id
    member.protocol_name = joined.protocol_name
    new = yield from sync_op(member)
    added = new - member.assignment
    committed = (yield from fetch_offsets_op(member.group_id, added)) if added else {}
    return new, committed


def _membership_error(member: GroupMember, exc: KafkaError, failures: int) -> float:
    """How long to wait before joining again after ``exc``; raises if it is fatal."""
    if exc.code in REJOIN_CODES:
        if exc.code != ErrorCode.REBALANCE_IN_PROGRESS:
            member.reset_member = exc.code == ErrorCode.UNKNOWN_MEMBER_ID
            member.generation = -1
        return 0.0
    if exc.retriable or isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
        log.warning("group %s: join failed, retrying: %s", member.group_id, exc)
        return member.config.backoff_s(failures)
    raise exc


def _revoke_op(member: GroupMember, partitions: set[TopicPartition]) -> Op[Exception | None]:
    """Commit (auto-commit), tell the application, then stop reading ``partitions`` (even if
    ``on_revoked`` raised: what it raised is returned)."""
    member.release()
    if member.enable_auto_commit and member.generation >= 0:
        offsets = {tp: off for tp, off in member.consumed().items() if tp in partitions}
        yield from member.commit_quietly_op(offsets)
    error = None
    if member.on_revoked is not None:
        error = yield from _callback_op(member.on_revoked, partitions)
    member.assignment -= partitions
    member.fetcher.assign(member.assignment)
    return error


def _callback_op(callback: Callback, partitions: set[TopicPartition]) -> Op[Exception | None]:
    """Run a rebalance callback; returns what it raised (``None``: nothing). An abandoned
    operation (a cancellation) is not caught."""
    try:
        yield Notify(callback, set(partitions))
    except Exception as exc:
        return exc
    return None
