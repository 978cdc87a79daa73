"""What the blocking and async consumers are, written once (no I/O here): the constructor and
its validation, the group member, assignment, and the offset lookups as sans-I/O operations
(:mod:`odradek.client.ops`) that each face's client runs.

:class:`ConsumerCore` is the base of :class:`odradek.client.consumer.Consumer` and
:class:`odradek.client.async_consumer.AsyncConsumer`. A face adds only how it waits: its
client (:attr:`ConsumerCore._client_type`), its own state (:meth:`ConsumerCore._init_face`), its
group driver (:meth:`ConsumerCore._make_group`), how it fetches and how it hands records out. The
constructor, its signature and its documentation are the core's alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from odradek.client.errors import OffsetOutOfRangeError  # type: ignore[attr-defined]
from odradek.client.fetcher import Fetcher
from odradek.client.group import GroupMember
from odradek.client.group_driver import LagMixin
from odradek.client.ops import Op, list_offsets_op, metadata_op
from odradek.client.types import OffsetAndTimestamp, TopicPartition
from odradek.protocol import messages as m

__all__ = [
    "ConsumerCore",
    "offsets_op",
    "partitions_for_topic_op",
    "position_op",
    "resolve_positions_op",
    "topics_op",
]


class ConsumerCore(LagMixin):
    """A consumer of assigned partitions, or (with ``group_id``) a consumer-group member.

    Args:
      *topics: topics to subscribe to at once (needs ``group_id``).
      bootstrap_servers: ``"host:port"``, ``"h1:p1,h2:p2"`` or a list of those.
      group_id: the consumer group; ``None``: :meth:`assign` only, no commits.
      client_id: sent with every request.
      auto_offset_reset: where a partition without a (committed) position starts:
        ``"earliest"``, ``"latest"`` or ``"none"`` (the next poll raises
        :class:`~odradek.client.errors.OffsetOutOfRangeError`).
      enable_auto_commit, auto_commit_interval_ms: commit the consumed positions every
        ``auto_commit_interval_ms``, on rebalance and on close (with ``group_id``).
      fetch_max_wait_ms, fetch_min_bytes, fetch_max_bytes, max_partition_fetch_bytes: the
        Fetch long-poll (Kafka's ``fetch.max.wait.ms`` ...).
      max_poll_records: records handed out per poll at most.
      request_timeout_ms: how long a request may go unanswered.
      retry_backoff_ms, retry_backoff_max_ms: backoff after a failed request, doubling.
      consumer_timeout_ms: iteration stops after this long without a record (``None``: never).
      **group_options: :class:`~odradek.client.group.GroupMember`'s (``session_timeout_ms``,
        ``heartbeat_interval_ms``, ``max_poll_interval_ms``, ``partition_assignment_strategy``,
        ``metadata_max_age_ms`` ...); need ``group_id``.

    Raises:
      ValueError: a bad option, or topics or group options without a ``group_id``.
    """

    _client_type: Any  # the face's client class: Client or AsyncClient

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Sequence[str],
        group_id: str | None = None,
        client_id: str = "odradek-python",
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        consumer_timeout_ms: float | None = None,
        **group_options: Any,
    ) -> None:
        self._fetcher = Fetcher(
            auto_offset_reset=auto_offset_reset,
            fetch_max_wait_ms=fetch_max_wait_ms,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_bytes=fetch_max_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
        )
        self._client = self._client_type(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
        )
        self.group_id = group_id
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.max_poll_records = max_poll_records
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.consumer_timeout_ms = consumer_timeout_ms
        self._init_face()
        member = None
        if group_id is not None:  # group options: see client.group.GroupMember
            member = GroupMember(
                group_id,
                self._fetcher,
                client_id=client_id,
                enable_auto_commit=enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms,
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=retry_backoff_max_ms,
                request_timeout_ms=request_timeout_ms,
                **group_options,
            )
            if topics:
                member.subscribe(topics)
        elif topics or group_options:
            raise ValueError(f"topics and group options need a group_id: {sorted(group_options)}")
        self._group = None if member is None else self._make_group(member)

    def _init_face(self) -> None:
        """The face's own state, set up before the group driver is made."""

    def _make_group(self, member: GroupMember) -> Any:
        """The face's driver of the group member (BlockingGroup or AsyncGroup)."""
        raise NotImplementedError

    def _member(self) -> GroupMember:
        if self._group is None:
            raise ValueError("this needs a consumer with a group_id")
        return self._group.member  # type: ignore[no-any-return]

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned (by :meth:`assign` or by the group)."""
        return self._fetcher.assignment()


def resolve_positions_op(fetcher: Fetcher) -> Op[None]:
    """Look up the offsets of the partitions waiting for a reset (``earliest``/``latest``).
    Raises :class:`OffsetOutOfRangeError` for a partition without a position under
    ``auto_offset_reset="none"``."""
    missing = fetcher.missing_positions()
    if missing:
        raise OffsetOutOfRangeError(
            f"no position for {missing} and auto_offset_reset='none' (seek first)"
        )
    wanted = fetcher.reset_requests()
    if wanted:
        fetcher.apply_resets((yield from list_offsets_op(wanted)))


def position_op(fetcher: Fetcher, tp: TopicPartition) -> Op[int]:
    """The offset of the next record ``tp`` hands out, resolving a pending reset. Raises
    ``ValueError`` if ``tp`` is not assigned."""
    tp = TopicPartition(*tp)
    fetcher._check(tp)
    yield from resolve_positions_op(fetcher)
    position = fetcher.positions[tp]
    assert position is not None
    return position


def offsets_op(tps: Iterable[TopicPartition], timestamp: int) -> Op[dict[TopicPartition, int]]:
    """``beginning_offsets`` (``timestamp`` -2) and ``end_offsets`` (-1)."""
    found: dict[TopicPartition, OffsetAndTimestamp | None] = yield from list_offsets_op(
        {TopicPartition(*tp): timestamp for tp in tps}
    )
    return {tp: hit.offset for tp, hit in found.items() if hit is not None}


def topics_op() -> Op[set[str]]:
    """The names of the cluster's topics, internal ones left out."""
    meta = yield from metadata_op(None)
    return {n for n, i in meta.topics.items() if not i.is_internal and not i.error_code}


def partitions_for_topic_op(topic: str) -> Op[set[int] | None]:
    """The partitions of ``topic``, ``None`` if it does not exist."""
    info = (yield from metadata_op([topic])).topics.get(topic)
    return None if info is None or info.error_code else set(info.partitions)


EARLIEST = m.EARLIEST_TIMESTAMP
LATEST = m.LATEST_TIMESTAMP
