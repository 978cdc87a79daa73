"""The admin clients: topics, partitions, configs, log dirs, offsets, record deletion.

:class:`Admin` is blocking, :class:`AsyncAdmin` the same API with ``async`` methods; both run
the operations of :mod:`odradek.client.admin_ops`. Per-item errors are raised (the first one, in
request order): ``create_topics`` raises ``TopicAlreadyExistsError`` / ``InvalidTopicError``
/ ``InvalidPartitionsError`` ... rather than returning a per-topic dict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from odradek.client import admin_ops as a
from odradek.client import group_ops as g
from odradek.client.async_client import AsyncClient
from odradek.client.group_ops import GroupDescription, GroupListing, OffsetAndMetadata
from odradek.client.ops import list_offsets_op
from odradek.client.sync_client import Client
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
      retry_backoff_ms: the first wait between reconnection attempts (doubling).

    Raises:
      ValueError: a malformed bootstrap address.

    Each call raises the first per-item error the broker answers, in request order (see the
    module's documentation), :class:`~odradek.client.errors.KafkaConnectionError` or
    :class:`~odradek.client.errors.KafkaTimeoutError`.
    """

    _client_type: Any  # the face's client class: Client or AsyncClient

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "odradek-python",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self._client = self._client_type(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._timeout_ms = request_timeout_ms


class Admin(AdminCore):
    """The blocking admin client. Parameters and errors: :class:`AdminCore`.

    Thread-safety: any thread may call it, several at once (requests are pipelined).
    """

    _client_type = Client

    def create_topics(self, new_topics: list[NewTopic], *, validate_only: bool = False) -> None:
        self._client.run(a.create_topics_op(new_topics, validate_only, self._timeout_ms))

    def delete_topics(self, names: Iterable[str]) -> None:
        self._client.run(a.delete_topics_op(names, self._timeout_ms))

    def create_partitions(self, counts: Mapping[str, int]) -> None:
        self._client.run(a.create_partitions_op(counts, self._timeout_ms))

    def list_topics(self, *, internal: bool = False) -> set[str]:
        return self._client.run(a.list_topics_op(internal))

    def describe_topics(self, names: list[str] | None = None) -> list[TopicDescription]:
        return self._client.run(a.describe_topics_op(names))

    def describe_configs(self, topic: str) -> dict[str, ConfigEntry]:
        return self._client.run(a.describe_configs_op(topic))

    def alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
    ) -> None:
        self._client.run(a.alter_configs_op(topic, set or {}, delete))

    def describe_log_dirs(self, topics: list[str] | None = None) -> dict[str, LogDirDescription]:
        return self._client.run(a.describe_log_dirs_op(topics))

    def describe_segments(self, topic: str) -> dict[int, list[SegmentInfo]]:
        """Each partition's segments, oldest first (odradek brokers only)."""
        return self._client.run(a.describe_segments_op(topic))

    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._client.run(list_offsets_op(timestamps))

    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self._client.run(a.delete_records_op(before, self._timeout_ms))

    # -- consumer groups (client.group_ops) ----------------------------------------------------
    def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        return self._client.run(g.list_groups_op(states))

    def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        return self._client.run(g.describe_groups_op(group_ids))

    def delete_groups(self, group_ids: Iterable[str]) -> None:
        self._client.run(g.delete_groups_op(group_ids))

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """Every committed offset of the group (the next offset to read per partition)."""
        found = self._client.run(g.fetch_offsets_op(group_id, None))
        return {tp: om for tp, om in found.items() if om is not None}

    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Set committed offsets of an inactive group (commit outside membership: generation
        -1; an active group answers ``UnknownMemberIdError``)."""
        self._client.run(g.commit_offsets_op(group_id, g.normalize_offsets(offsets)))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncAdmin(AdminCore):
    """The async admin client. Parameters and errors: :class:`AdminCore`.

    Use it in one event loop (asyncio, uvloop or trio); its tasks may call it at once.
    """

    _client_type = AsyncClient

    async def create_topics(
        self, new_topics: list[NewTopic], *, validate_only: bool = False
    ) -> None:
        await self._client.run(a.create_topics_op(new_topics, validate_only, self._timeout_ms))

    async def delete_topics(self, names: Iterable[str]) -> None:
        await self._client.run(a.delete_topics_op(names, self._timeout_ms))

    async def create_partitions(self, counts: Mapping[str, int]) -> None:
        await self._client.run(a.create_partitions_op(counts, self._timeout_ms))

    async def list_topics(self, *, internal: bool = False) -> set[str]:
        return await self._client.run(a.list_topics_op(internal))

    async def describe_topics(self, names: list[str] | None = None) -> list[TopicDescription]:
        return await self._client.run(a.describe_topics_op(names))

    async def describe_configs(self, topic: str) -> dict[str, ConfigEntry]:
        return await self._client.run(a.describe_configs_op(topic))

    async def alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
    ) -> None:
        await self._client.run(a.alter_configs_op(topic, set or {}, delete))

    async def describe_log_dirs(
        self, topics: list[str] | None = None
    ) -> dict[str, LogDirDescription]:
        return await self._client.run(a.describe_log_dirs_op(topics))

    async def describe_segments(self, topic: str) -> dict[int, list[SegmentInfo]]:
        """Each partition's segments, oldest first (odradek brokers only)."""
        return await self._client.run(a.describe_segments_op(topic))

    async def list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return await self._client.run(list_offsets_op(timestamps))

    async def delete_records(
        self, before: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        return await self._client.run(a.delete_records_op(before, self._timeout_ms))

    # -- consumer groups (client.group_ops) ----------------------------------------------------
    async def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        return await self._client.run(g.list_groups_op(states))

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        return await self._client.run(g.describe_groups_op(group_ids))

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        await self._client.run(g.delete_groups_op(group_ids))

    async def list_group_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        found = await self._client.run(g.fetch_offsets_op(group_id, None))
        return {tp: om for tp, om in found.items() if om is not None}

    async def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        await self._client.run(g.commit_offsets_op(group_id, g.normalize_offsets(offsets)))

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
