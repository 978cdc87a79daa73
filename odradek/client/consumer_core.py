"""What the blocking and async consumers are, written once (no I/O here): the constructor and
its configuration, the group member, assignment, lag, and every method that is a request
(commits, positions, offset lookups, topics) as a sans-I/O operation that each face drives
(:func:`odradek.client.drivers.operation`).

:class:`ConsumerCore` is the base of :class:`odradek.client.consumer.Consumer` and
:class:`odradek.client.async_consumer.AsyncConsumer`. A face adds only how it waits: its
client (:attr:`ConsumerCore._client_type`), its own state (:meth:`ConsumerCore._init_face`), its
group driver (:meth:`ConsumerCore._make_group`), how it fetches and how it iterates (over the
core's records drained for iteration: :meth:`ConsumerCore._hand_out`). The constructor, its
signature and its documentation are the core's alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain
from typing import Any

from odradek.client.config import ConsumerConfig, options_of
from odradek.client.drivers import operation
from odradek.client.fetcher import Fetcher
from odradek.client.group import GroupMember
from odradek.client.group_ops import OffsetAndMetadata, fetch_offsets_op
from odradek.client.ops import Op, list_offsets_op, metadata_op
from odradek.client.types import ConsumerRecord, OffsetAndTimestamp, TopicPartition
from odradek.protocol import messages as m

__all__ = ["ConsumerCore"]


class ConsumerCore:
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
      **group_options: the group's (need ``group_id``): ``session_timeout_ms``,
        ``heartbeat_interval_ms``, ``max_poll_interval_ms``, ``partition_assignment_strategy``,
        ``group_instance_id``, ``metadata_max_age_ms`` (:class:`~.config.ConsumerConfig`),
        and the rebalance callbacks ``on_assigned`` / ``on_revoked`` (each called with a set
        of partitions; an ``async`` one is awaited by the async face).

    Raises:
      ValueError: a bad option, or topics or group options without a ``group_id``.

    The options are kept, validated, in :attr:`config` (a :class:`~.config.ConsumerConfig`).
    """

    _client_type: Any  # the face's client class: Client or AsyncClient

    @options_of(ConsumerConfig, topics=True)
    def __init__(
        self, *topics: str, bootstrap_servers: str | Sequence[str], **options: Any
    ) -> None:
        if options.get("group_id") is None and (topics or set(options) & _GROUP_OPTIONS):
            raise ValueError(f"topics and group options need a group_id: {sorted(options)}")
        callbacks = {k: options.pop(k) for k in _CALLBACKS if k in options}
        self.config = cfg = ConsumerConfig(bootstrap_servers=bootstrap_servers, **options)
        self._fetcher = Fetcher(cfg)
        # records drained for iteration and the iterator handing them out (its length hint is
        # the number not yet handed out): _hand_out, _unyielded, _rewind
        self._iter_records: list[ConsumerRecord] = []
        self._iter_it: Iterator[ConsumerRecord] = iter(self._iter_records)
        self._client = self._io = self._client_type(config=cfg)
        self._init_face()
        member = None
        if cfg.group_id is not None:
            member = GroupMember(
                cfg, self._fetcher, self._consumed, release=self._rewind, **callbacks
            )
            if topics:
                member.subscribe(topics)
        self._group = None if member is None else self._make_group(member)

    # the options as attributes, as they were before ``config``
    group_id = property(lambda self: self.config.group_id)
    max_poll_records = property(lambda self: self.config.max_poll_records)
    consumer_timeout_ms = property(lambda self: self.config.consumer_timeout_ms)

    def _init_face(self) -> None:
        """The face's own state, set up before the group driver is made."""

    def _make_group(self, member: GroupMember) -> Any:
        """The face's driver of the group member (BlockingGroup or AsyncGroup)."""
        raise NotImplementedError

    def _check_open(self) -> None:
        """Raise :class:`~odradek.client.errors.KafkaError` if the consumer is closed (async:
        not running), as ``poll`` does."""
        raise NotImplementedError

    def _kick(self) -> None:
        """The assignment or a position changed: the async face's fetch task looks again."""

    def _member(self) -> GroupMember:
        if self._group is None:
            raise ValueError("this needs a consumer with a group_id")
        return self._group.member  # type: ignore[no-any-return]

    # -- records drained for iteration --------------------------------------------------------
    def _hand_out(self, batch: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        """The records of ``batch`` (a drain), in order, are the next records iteration hands
        out (call it once the last ones are all handed out or rewound)."""
        if len(batch) == 1:
            [records] = batch.values()
        else:
            records = list(chain.from_iterable(batch.values()))
        self._iter_records = records
        self._iter_it = iter(records)

    def _unyielded(self) -> list[ConsumerRecord]:
        """The records drained for iteration but not handed out yet, in order."""
        left = self._iter_it.__length_hint__()  # type: ignore[attr-defined]
        return self._iter_records[len(self._iter_records) - left :]

    def _rewind(self) -> None:
        """Give the records drained for iteration but not handed out yet back to the fetcher,
        so positions, commits and the next poll start at the first of them."""
        unyielded = self._unyielded()
        if unyielded:
            self._fetcher.unread(unyielded)
        # exhaust the iterator in place: a running ``for`` loop holds it (Consumer.__iter__)
        self._iter_it.__setstate__(len(self._iter_records))  # type: ignore[attr-defined]
        self._iter_records = []
        self._iter_it = iter(self._iter_records)

    def _consumed(self) -> dict[TopicPartition, int]:
        """What to commit: each partition's position, moved back to its first record drained
        for iteration but not yet handed to the application."""
        out = {tp: pos for tp, pos in self._fetcher.positions.items() if pos is not None}
        for record in self._unyielded():
            tp = TopicPartition(record.topic, record.partition)
            if tp in out and record.offset < out[tp]:
                out[tp] = record.offset
        return out

    @contextmanager
    def _polling(self) -> Iterator[None]:
        """Around each wait for records: waiting inside a poll is not idle
        (``max_poll_interval_ms``: :meth:`GroupMember.poll_started`)."""
        if self._group is None:
            yield
            return
        member = self._group.member
        if member.poll_started():  # it left the group idle: join again
            self._group.wake()
        try:
            yield
        finally:
            member.poll_ended()

    # -- assignment and positions ------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly ``partitions`` (no group membership); new ones start at the group's
        committed offset (with a ``group_id``: kafka-python's and aiokafka's ``assign``), and
        by ``auto_offset_reset`` without one. Raises ``ValueError`` while subscribed (as
        kafka-python's and aiokafka's ``IllegalStateError``): :meth:`unsubscribe` first."""
        if self._group is not None and self._group.member.subscribed:
            raise ValueError("assign() while subscribed: unsubscribe() first")
        self._rewind()
        self._fetcher.assign(partitions, committed=True)
        self._kick()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Read ``tp`` from ``offset`` next. Raises ``ValueError`` if ``tp`` is not assigned or
        ``offset`` is negative, ``TypeError`` if it is not an ``int``."""
        self._rewind()
        self._fetcher.seek(tp, offset)
        self._kick()

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching ``partitions`` and returning their records until :meth:`resume`, as
        kafka-python's and aiokafka's ``pause``: what was fetched for them stays buffered, and
        their positions where they are. A partition that ``assign`` or a cooperative rebalance
        keeps stays paused; an eager rebalance (the ``range`` and ``roundrobin`` strategies)
        revokes every partition first, which drops every pause, as in Java's consumer
        (kafka-python keeps them; aiokafka drops them on any new assignment). Raises
        ``ValueError`` if one is not assigned."""
        self._rewind()
        self._fetcher.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch and return records of paused ``partitions`` again. Raises ``ValueError`` if
        one is not assigned."""
        self._fetcher.resume(partitions)
        self._kick()

    def paused(self) -> set[TopicPartition]:
        """The partitions :meth:`pause` stopped (and those a new :meth:`subscribe` left out,
        until the rebalance revokes them)."""
        return set(self._fetcher.paused)

    @operation
    def seek_to_beginning(self, *tps: TopicPartition) -> Op[None]:
        """Read ``tps`` (every assigned partition if none) from their log start offset."""
        return self._reset_op(tps, "earliest")

    @operation
    def seek_to_end(self, *tps: TopicPartition) -> Op[None]:
        """Read ``tps`` (every assigned partition if none) from their high watermark."""
        return self._reset_op(tps, "latest")

    def _reset_op(self, tps: tuple[TopicPartition, ...], policy: str) -> Op[None]:
        """Reset ``tps`` by ``policy``: the offsets are looked up before the next fetch. It
        sends nothing itself: an operation only so that the async face's method is awaited."""
        self._rewind()
        for tp in tps or self.assignment():
            self._fetcher.request_reset(tp, policy)
        self._kick()
        yield from ()

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned (by :meth:`assign` or by the group)."""
        return self._fetcher.assignment()

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark of ``tp`` seen by the last fetch (``None`` before one)."""
        return self._fetcher.high_watermarks.get(TopicPartition(*tp))

    def lag(self) -> dict[TopicPartition, int]:
        """Records left to read per assigned partition: the last high watermark less the
        position (the next record the application gets, as :meth:`position`)."""
        high_watermarks = self._fetcher.high_watermarks
        out = {}
        for tp, position in self._consumed().items():
            high = high_watermarks.get(tp)
            if high is not None:
                out[tp] = max(0, high - position)
        return out

    def subscription(self) -> set[str]:
        """The topics subscribed to, as kafka-python's and aiokafka's ``subscription()``: those
        given to :meth:`subscribe`, or those its pattern matched at the last metadata check
        (none before the first). An empty set when not subscribed, also after :meth:`assign`
        (as Java's; kafka-python returns ``None`` there, aiokafka the assigned topics)."""
        if self._group is None or not self._group.member.subscribed:
            return set()
        return set(self._group.member.topics)

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Join the group for ``topics`` or the topics matching ``pattern`` (a regex, checked
        every ``metadata_max_age_ms``); ``listener``: kafka-python's rebalance listener (an
        object with ``on_partitions_assigned`` and ``on_partitions_revoked``). The join
        happens in the next poll (blocking) or in the background (async); a new subscription
        replaces the last one, and the partitions it leaves out are paused at once (neither
        fetched nor returned) until that rebalance revokes them. Raises
        ``ValueError`` without a ``group_id``, or while :meth:`assign` has partitions assigned
        (kafka-python's and aiokafka's ``IllegalStateError``: ``assign([])`` first)."""
        member = self._member()
        if not member.subscribed and self.assignment():
            raise ValueError("subscribe() while partitions are assigned: assign([]) first")
        member.subscribe(topics, pattern, listener)
        self._rewind()
        # As Java's subscribe (clearBufferedDataForUnassignedTopics): no record of a partition
        # the new subscription leaves out is handed out, though the rebalance that revokes it
        # runs later (async: in the background).
        self._fetcher.pause([tp for tp in self.assignment() if not member.matches(tp.topic)])
        self._group.wake()  # type: ignore[union-attr]

    # -- operations (each face's methods: drivers.operation) -----------------------------------
    @operation
    def commit(
        self,
        offsets: Mapping[TopicPartition, int | tuple[int, str | None] | OffsetAndMetadata]
        | None = None,
    ) -> Op[None]:
        """Commit ``offsets`` (the next offsets to read), by default the consumed positions;
        an offset may carry a metadata string: ``OffsetAndMetadata(offset, metadata)``, or
        aiokafka's ``(offset, metadata)``.
        Raises ``ValueError`` without a ``group_id``, :class:`~.errors.KafkaError` once the
        consumer is closed (async: not running; Java's ``IllegalStateException``)."""
        member = self._member()
        self._check_open()
        return member.commit_op(self._consumed() if offsets is None else offsets)

    @operation
    def committed(self, tp: TopicPartition) -> Op[int | None]:
        """The group's committed offset for ``tp`` (the next to read), ``None`` if none."""
        tp = TopicPartition(*tp)
        found = (yield from fetch_offsets_op(self._member().group_id, [tp])).get(tp)
        return None if found is None else found.offset

    @operation
    def unsubscribe(self) -> Op[None]:
        """Leave the group if subscribed (committing first with auto-commit is the caller's
        choice), and drop every partition, also those given to :meth:`assign` (as
        kafka-python's, aiokafka's and Java's ``unsubscribe``), with or without a
        ``group_id``."""
        self._rewind()
        if self._group is not None:
            yield from self._group.member.leave_op()
        self._fetcher.assign(())

    @operation
    def position(self, tp: TopicPartition) -> Op[int]:
        """The offset of the next record to be returned (resolving a pending reset). Raises
        ``ValueError`` if ``tp`` is not assigned."""
        self._rewind()
        return self._fetcher.position_op(tp)

    @operation
    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> Op[dict[TopicPartition, int]]:
        """The log start offset of each partition."""
        return offsets_op(tps, m.EARLIEST_TIMESTAMP)

    @operation
    def end_offsets(self, tps: Iterable[TopicPartition]) -> Op[dict[TopicPartition, int]]:
        """The high watermark of each partition (the offset the next record will get)."""
        return offsets_op(tps, m.LATEST_TIMESTAMP)

    @operation
    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> Op[dict[TopicPartition, OffsetAndTimestamp | None]]:
        """The first offset of each partition whose record timestamp is >= the timestamp
        (ms; -1 latest, -2 earliest), ``None`` where there is none. Raises ``ValueError`` for
        other negative timestamps."""
        for tp, ts in timestamps.items():
            if ts < m.EARLIEST_TIMESTAMP:
                raise ValueError(
                    f"timestamp for {tp} must be >= 0, or -1 (latest) or -2 (earliest), not {ts}"
                )
        return list_offsets_op({TopicPartition(*tp): ts for tp, ts in timestamps.items()})

    @operation
    def topics(self) -> Op[set[str]]:
        """The names of the cluster's topics, internal ones left out."""
        meta = yield from metadata_op(None)
        return meta.topic_names()

    @operation
    def partitions_for_topic(self, topic: str) -> Op[set[int] | None]:
        """The partitions of ``topic``, ``None`` if it does not exist."""
        info = (yield from metadata_op([topic])).topics.get(topic)
        return None if info is None or info.error_code else set(info.partitions)


_CALLBACKS = ("on_assigned", "on_revoked")
_GROUP_OPTIONS = {
    *_CALLBACKS,
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "max_poll_interval_ms",
    "partition_assignment_strategy",
    "group_instance_id",
    "metadata_max_age_ms",
}


def offsets_op(tps: Iterable[TopicPartition], timestamp: int) -> Op[dict[TopicPartition, int]]:
    """``beginning_offsets`` (``timestamp`` -2) and ``end_offsets`` (-1)."""
    found: dict[TopicPartition, OffsetAndTimestamp | None] = yield from list_offsets_op(
        {TopicPartition(*tp): timestamp for tp in tps}
    )
    return {tp: hit.offset for tp, hit in found.items() if hit is not None}
