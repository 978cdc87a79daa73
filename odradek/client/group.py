"""Consumer-group membership as a sans-I/O state machine, shared by both consumer faces.

:class:`GroupMember` holds the membership (member id, generation, assignment, subscription)
and drives a :class:`~odradek.client.fetcher.Fetcher`. Its operations are sans-I/O (effects and
drivers: :mod:`odradek.client.drivers`), run in the background by
:mod:`odradek.client.group_driver` (blocking or anyio).

Rebalance protocol (Kafka's, over the broker's server-side assignment, docs/protocol.md;
rules 2 and 3 are :func:`odradek.client.rebalance.rebalance_op`):

1. ``rejoin_needed`` is set by ``subscribe``, a heartbeat answering ``REBALANCE_IN_PROGRESS``
   / ``ILLEGAL_GENERATION`` / ``UNKNOWN_MEMBER_ID``, a failed commit of the same kind, or a
   regex subscription whose matching topics changed (checked every ``metadata_max_age_ms``).
2. Eager assignors (``range``, ``roundrobin``, ``sticky``): before joining, the member commits
   its consumed positions (auto-commit), calls ``on_revoked(all)`` and drops every partition,
   so no partition is read by two members at once. ``cooperative-sticky`` keeps its
   partitions through the join and revokes only those it lost, after the SyncGroup.
3. JoinGroup (with the KIP-394 member-id round trip), SyncGroup, then OffsetFetch for the
   partitions added; they start at their committed offset (the next offset to read) or, with
   none committed, by ``auto_offset_reset`` (``none``: the next poll raises). Then
   ``on_assigned(added)``. Errors: :mod:`odradek.client.rebalance`.
4. Heartbeats (``heartbeat_interval_ms``) run only while the member is stable (not joining);
   an answer about a generation the member has left since is ignored.
5. Liveness (KIP-62, as in Java, kafka-python, aiokafka): a stable member whose application
   has not polled for ``max_poll_interval_ms`` (waiting inside a poll counts as polling) leaves
   the group, its partitions lost: not committed, and paused by its next poll, which joins
   again and so revokes all of them first (even ``cooperative-sticky``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from odradek.client.config import ConsumerConfig
from odradek.client.drivers import Sleep
from odradek.client.errors import CommitFailedError, KafkaError
from odradek.client.fetcher import Fetcher
from odradek.client.group_ops import (
    OffsetAndMetadata,
    commit_offsets_op,
    heartbeat_op,
    leave_op,
    normalize_offsets,
)
from odradek.client.ops import Op, metadata_op
from odradek.client.rebalance import REJOIN_CODES, rebalance_op
from odradek.client.types import TopicPartition
from odradek.protocol.errors import ErrorCode

__all__ = ["GroupMember"]

log = logging.getLogger(__name__)

_FENCED_CODES = {ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}  # CommitFailedError
Callback = Callable[[set[TopicPartition]], Any]


class GroupMember:
    """One consumer's membership of ``config.group_id`` (options: :class:`ConsumerConfig`'s
    group options), driving ``fetcher``'s assignment; ``consumed()`` gives the offsets an
    automatic commit commits (the consumer's positions); ``release()`` gives the fetcher back
    the records the consumer drained but did not hand out, before a revocation changes the
    assignment (so none of a revoked partition, or of one whose position a rebalance resets,
    is handed out after it). ``clock`` is injected (tests)."""

    def __init__(
        self,
        config: ConsumerConfig,
        fetcher: Fetcher,
        consumed: Callable[[], dict[TopicPartition, int]],
        *,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
        release: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert config.group_id is not None
        self.config = config
        self.group_id = config.group_id
        self.group_instance_id = config.group_instance_id
        self.fetcher = fetcher
        self.consumed = consumed
        self.enable_auto_commit = config.enable_auto_commit
        self.heartbeat_interval_s = config.heartbeat_interval_ms / 1000
        self.on_assigned, self.on_revoked = on_assigned, on_revoked
        self.release = release
        self.clock = clock
        # membership
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.assignment: set[TopicPartition] = set()
        self.subscribed = False
        self.topics: list[str] = []
        self.pattern: re.Pattern[str] | None = None
        self.rejoin_needed = False
        self.reset_member = False
        self.joining = False
        now = clock()
        self.max_poll_interval_s = config.max_poll_interval_ms / 1000
        self.last_poll_s = now
        self.polling = 0  # polls running now (rule 5)
        self.left_idle = False  # left for not polling (rule 5): rejoin at the next poll
        self.next_heartbeat_s = now
        self.next_commit_s = now + config.auto_commit_interval_ms / 1000
        self.next_metadata_s = now
        self.last_committed: dict[TopicPartition, int] = {}

    # -- subscription ----------------------------------------------------------------------
    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | re.Pattern[str] | None = None,
        listener: Any = None,
    ) -> None:
        topics = [topics] if isinstance(topics, str) else sorted(set(topics))
        if bool(topics) == (pattern is not None):
            raise ValueError("subscribe to a list of topics or to a pattern (one of them)")
        self.pattern = None if pattern is None else re.compile(pattern)
        self.topics = topics
        self.subscribed = True
        self.rejoin_needed = True
        self.next_metadata_s = self.clock()
        if listener is not None:  # kafka-python's ConsumerRebalanceListener, or alike
            self.on_assigned = listener.on_partitions_assigned
            self.on_revoked = listener.on_partitions_revoked

    def matches(self, topic: str) -> bool:
        """Whether the subscription covers ``topic`` (one of its topics, or its pattern's)."""
        return topic in self.topics if self.pattern is None else bool(self.pattern.fullmatch(topic))

    @property
    def stable(self) -> bool:
        return self.generation >= 0 and not self.joining and not self.rejoin_needed

    @property
    def cooperative(self) -> bool:
        return self.protocol_name == "cooperative-sticky"

    def heartbeat_due(self) -> bool:
        return self.stable and self.clock() >= self.next_heartbeat_s

    def next_wakeup_s(self) -> float:
        """When :meth:`poll_op` or :meth:`heartbeat_op` has something to do next (clock s)."""
        now = self.clock()
        times = [now + 1.0]
        if self.subscribed and self.rejoin_needed:
            return now
        if self.generation >= 0:
            times.append(self.next_heartbeat_s)
        if self.stable and not self.polling:
            times.append(self.last_poll_s + self.max_poll_interval_s)
        if self.enable_auto_commit:
            times.append(self.next_commit_s)
        if self.pattern is not None:
            times.append(self.next_metadata_s)
        return min(times)

    # -- the consumer's periodic step --------------------------------------------------------
    def poll_op(self) -> Op[None]:
        """Everything due: the regex check, a rebalance, an auto-commit."""
        now = self.clock()
        if self.subscribed and self.pattern is not None and now >= self.next_metadata_s:
            yield from self._check_pattern_op()
        if self.subscribed and self.rejoin_needed:
            yield from rebalance_op(self)
        if self.enable_auto_commit and self.clock() >= self.next_commit_s:
            self.next_commit_s = self.clock() + self.config.auto_commit_interval_ms / 1000
            yield from self.commit_quietly_op(self.consumed())

    def _check_pattern_op(self) -> Op[None]:
        assert self.pattern is not None
        self.next_metadata_s = self.clock() + self.config.metadata_max_age_ms / 1000
        try:
            meta = yield from metadata_op(None)
        except KafkaError as exc:
            log.warning("group %s: metadata for the pattern failed: %s", self.group_id, exc)
            self.next_metadata_s = self.clock() + self.config.retry_backoff_ms / 1000
            return
        topics = sorted(filter(self.pattern.fullmatch, meta.topic_names()))
        if topics != self.topics:
            self.topics = topics
            self.rejoin_needed = True

    # -- heartbeats ----------------------------------------------------------------------------
    def heartbeat_op(self) -> Op[None]:
        if not self.stable:
            return
        generation, member_id = self.generation, self.member_id
        self.next_heartbeat_s = self.clock() + self.heartbeat_interval_s
        try:
            code = yield from heartbeat_op(self)
        except KafkaError as exc:  # the connection: try again at the next interval
            log.warning("group %s: heartbeat failed: %s", self.group_id, exc)
            return
        if not code or self.joining or (generation, member_id) != (self.generation, self.member_id):
            return
        log.info("group %s: heartbeat answered %s: rejoin", self.group_id, ErrorCode(code).name)
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset_member = True
        self.rejoin_needed = True

    # -- offsets -------------------------------------------------------------------------------
    def commit_op(
        self, offsets: Mapping[TopicPartition, int | tuple[int, str | None] | OffsetAndMetadata]
    ) -> Op[None]:
        """Commit ``offsets`` (the next offsets to read) as this member (or outside membership
        when not subscribed). Retriable errors are retried for ``request_timeout_ms``;
        ``REBALANCE_IN_PROGRESS`` / ``ILLEGAL_GENERATION`` / ``UNKNOWN_MEMBER_ID`` schedule a
        rejoin. Raises :class:`~.errors.CommitFailedError` (as Java and kafka-python) when the
        broker answers ``ILLEGAL_GENERATION`` or ``UNKNOWN_MEMBER_ID`` (the group rebalanced
        without this member), and at once, sending nothing, once the member left the group
        for not polling (rule 5)."""
        normal = normalize_offsets(offsets)
        if self.left_idle:  # rule 5: not a member until the next poll joins again
            raise CommitFailedError(
                f"group {self.group_id}: no poll for max_poll_interval_ms "
                f"({self.config.max_poll_interval_ms} ms), so this member left the group; "
                "poll to join it again"
            )
        deadline = self.clock() + self.config.request_timeout_ms / 1000
        failures = 0
        while True:
            member = self.subscribed and self.generation >= 0
            try:
                yield from commit_offsets_op(
                    self.group_id,
                    normal,
                    self.generation if member else -1,
                    self.member_id if member else "",
                    self.group_instance_id if member else None,
                )
                break
            except KafkaError as exc:
                if exc.code in REJOIN_CODES and self.subscribed and not self.joining:
                    self.rejoin_needed = True
                    self.reset_member = exc.code == ErrorCode.UNKNOWN_MEMBER_ID
                if exc.code in _FENCED_CODES:
                    raise CommitFailedError(
                        f"group {self.group_id}: the broker refused the commit "
                        f"({exc.code.name}): the group has rebalanced without this member"
                    ) from exc
                if not exc.retriable or self.clock() >= deadline:
                    raise
            yield Sleep(self.config.backoff_s(failures))
            failures += 1
        for tp, om in normal.items():
            self.last_committed[tp] = om.offset

    def commit_quietly_op(self, offsets: Mapping[TopicPartition, int]) -> Op[None]:
        """An automatic commit: only what moved since the last commit; failures are logged."""
        changed = {tp: off for tp, off in offsets.items() if self.last_committed.get(tp) != off}
        if not changed or self.left_idle:  # rule 5: its partitions may be others' by now
            return
        try:
            yield from self.commit_op(changed)
        except KafkaError as exc:
            log.warning("group %s: auto-commit of %s failed: %s", self.group_id, changed, exc)

    # -- liveness (rule 5) ---------------------------------------------------------------------
    def poll_started(self) -> bool:
        """The application polls, until :meth:`poll_ended`. Returns whether the member, having
        left idle, joins again (then its partitions are paused until the rejoin revokes them)."""
        self.polling += 1
        self.last_poll_s = self.clock()
        if not self.left_idle:
            return False
        self.left_idle = False
        self.rejoin_needed = True
        self.fetcher.pause(self.assignment)
        return True

    def poll_ended(self) -> None:
        self.polling -= 1
        self.last_poll_s = self.clock()

    def idle_expired(self) -> bool:
        """Whether the application has not polled for ``max_poll_interval_ms``."""
        idle_s = self.clock() - self.last_poll_s
        return self.stable and not self.polling and idle_s > self.max_poll_interval_s

    def leave_idle_op(self) -> Op[None]:
        log.warning("group %s: no poll for max_poll_interval_ms: leaving", self.group_id)
        member_id, self.member_id, self.generation = self.member_id, "", -1
        self.left_idle = True
        yield from self._send_leave_op(member_id)

    # -- leaving -------------------------------------------------------------------------------
    def close_op(self) -> Op[None]:
        """Commit (auto-commit), then leave the group; errors are logged, not raised."""
        if self.enable_auto_commit:
            yield from self.commit_quietly_op(self.consumed())
        yield from self.leave_op()

    def leave_op(self) -> Op[None]:
        member_id, self.member_id, self.generation = self.member_id, "", -1
        self.subscribed = False
        self.rejoin_needed = False
        self.assignment = set()
        self.fetcher.assign(())
        self.left_idle = False
        yield from self._send_leave_op(member_id)

    def _send_leave_op(self, member_id: str) -> Op[None]:
        """LeaveGroup; never for a static member (KIP-345, as Java, kafka-python, aiokafka):
        its place waits ``session_timeout_ms`` for the same ``group_instance_id``."""
        if not member_id or self.group_instance_id is not None:
            return
        try:
            code = yield from leave_op(self.group_id, member_id)
        except KafkaError as exc:
            log.warning("group %s: leave failed: %s", self.group_id, exc)
            return
        if code:
            log.warning("group %s: leave answered %s", self.group_id, ErrorCode(code).name)
