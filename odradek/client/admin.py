"""The admin clients: topics, partitions, configs, log dirs, offsets, record deletion.

:class:`AdminCore` writes each method once, as an operation of :mod:`odradek.client.admin_ops`
or :mod:`odradek.client.group_ops`; :class:`Admin` runs them blocking, :class:`AsyncAdmin` as
coroutines (:func:`odradek.client.drivers.operation`). Per-item errors are raised (the first one, in
request order): ``create_topics`` raises ``TopicAlreadyExistsError`` / ``InvalidTopicError``
/ ``InvalidPartitionsError`` ... rather than returning a per-topic dict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from odradek.client import admin_ops as a
from odradek.client import group_ops as g
from odradek.client.async_client import AsyncClient
from odradek.client.blocking_client import Client
from odradek.client.config import ClientConfig, options_of
from odradek.client.drivers import async_face, blocking_face, operation
from odradek.client.group_ops import GroupDescription, GroupListing, OffsetAndMetadata
from odradek.client.ops import Op, list_offsets_op
from odradek.client.types import (
    ConfigEntry,
    LogDirDescription,
    NewTopic,
    OffsetAndTimestamp,
    SegmentInfo,
    TopicDescription,
    TopicPartition,
)

__all__ = ["Admin", "AdminCore", "AsyncAdmin"]


class AdminCore:
    """An admin client: topics, partitions, configs, log dirs, offsets, groups.

    Args:
      bootstrap_servers: ``"host:port"``, ``"h1:p1,h2:p2"`` or a list of those.
      client_id: sent with every request.
      request_timeout_ms: how long a request may go unanswered; also the broker's own
        timeout for topic creation and deletion.
      retry_backoff_ms, retry_backoff_max_ms: the wait between reconnection attempts,
        doubling from the one to the other.

    Raises:
      ValueError: a malformed bootstrap address.

    Each call raises the first per-item error the broker answers, in request order (see the
    module's documentation), :class:`~odradek.client.errors.KafkaConnectionError` or
    :class:`~odradek.client.errors.KafkaTimeoutError`.
    """

    _client_type: Any  # the face's client class: Client or AsyncClient

    @options_of(ClientConfig)
    def __init__(self, bootstrap_servers: str | Sequence[str], **options: Any) -> None:
        self._client = self._io = self._client_type(bootstrap_servers, **options)
        self.config = self._client.config
        self._timeout_ms = self.config.request_timeout_ms

    @operation
    def create_topics(self, new_topics: list[NewTopic], *, validate_only: bool = False) -> Op[None]:
        """Create topics (``validate_only``: only check that they could be)."""
        return a.create_topics_op(new_topics, validate_only, self._timeout_ms)

    @operation
    def delete_topics(self, names: Iterable[str]) -> Op[None]:
        """Delete topics and their data."""
        return a.delete_topics_op(names, self._timeout_ms)

    @operation
    def create_partitions(self, counts: Mapping[str, int]) -> Op[None]:
        """Raise topics' partition counts to ``counts`` (topic -> new total)."""
        return a.create_partitions_op(counts, self._timeout_ms)

    @operation
    def list_topics(self, *, internal: bool = False) -> Op[set[str]]:
        """The topic names (internal topics too with ``internal``)."""
        return a.list_topics_op(internal)

    @operation
    def describe_topics(self, names: list[str] | None = None) -> Op[list[TopicDescription]]:
        """The topics' partitions (every topic's for ``None``)."""
        return a.describe_topics_op(names)

    @operation
    def describe_configs(self, topic: str) -> Op[dict[str, ConfigEntry]]:
        """The topic's configuration, by Kafka's topic-level names."""
        return a.describe_configs_op(topic)

    @operation
    def alter_configs(
        self, topic: str, set: Mapping[str, str] | None = None, delete: Iterable[str] = ()
    ) -> Op[None]:
        """Set (``set``) and remove (``delete``) topic-level overrides."""
        return a.alter_configs_op(topic, set or {}, delete)

    @operation
    def describe_log_dirs(
        self, topics: list[str] | None = None
    ) -> Op[dict[str, LogDirDescription]]:
        """Each log directory and the sizes of the partitions in it."""
        return a.describe_log_dirs_op(topics)

    @operation
    def describe_segments(self, topic: str) -> Op[dict[int, list[SegmentInfo]]]:
        """Each partition's segments, oldest first (odradek brokers only)."""
        return a.describe_segments_op(topic)

    @operation
    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> Op[dict[TopicPartition, OffsetAndTimestamp | None]]:
        """-2 earliest, -1 latest, else the first offset whose timestamp is at least the one
        given (``None`` if none)."""
        return list_offsets_op(timestamps)

    @operation
    def delete_records(self, before: Mapping[TopicPartition, int]) -> Op[dict[TopicPartition, int]]:
        """Delete the records below each offset; returns the new log start offsets."""
        return a.delete_records_op(before, self._timeout_ms)

    # -- consumer groups (client.group_ops) ----------------------------------------------------
    @operation
    def list_groups(self, states: Iterable[str] = ()) -> Op[list[GroupListing]]:
        """The consumer groups (those in ``states`` if given)."""
        return g.list_groups_op(states)

    @operation
    def describe_groups(self, group_ids: Iterable[str]) -> Op[list[GroupDescription]]:
        """The groups' state, protocol and members."""
        return g.describe_groups_op(group_ids)

    @operation
    def delete_groups(self, group_ids: Iterable[str]) -> Op[None]:
        """Delete empty groups and their committed offsets."""
        return g.delete_groups_op(group_ids)

    @operation
    def list_group_offsets(self, group_id: str) -> Op[dict[TopicPartition, OffsetAndMetadata]]:
        """Every committed offset of the group (the next offset to read per partition)."""
        found = yield from g.fetch_offsets_op(group_id, None)
        return {tp: om for tp, om in found.items() if om is not None}

    @operation
    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> Op[None]:
        """Set committed offsets of an inactive group (commit outside membership: generation
        -1; an active group answers ``UnknownMemberIdError``)."""
        return g.commit_offsets_op(group_id, g.normalize_offsets(offsets))


@blocking_face
class Admin(AdminCore):
    """The blocking admin client. Parameters, methods and errors: :class:`AdminCore`.

    Thread-safety: any thread may call it, several at once (requests are pipelined).
    """

    _client_type = Client

    def close(self) -> None:
        """Close the connection."""
        self._client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@async_face
class AsyncAdmin(AdminCore):
    """The async admin client: :class:`AdminCore`'s methods as coroutines.

    Use it in one event loop (asyncio, uvloop or trio); its tasks may call it at once.
    """

    _client_type = AsyncClient

    async def close(self) -> None:
        """Close the connection."""
        await self._client.close()

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
