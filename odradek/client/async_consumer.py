"""The async consumer (anyio), aiokafka-style: ``await start()``/``await stop()`` or
``async with``; ``await getone()``, ``await getmany(timeout_ms=...)``, ``async for``.

A fetch task in the consumer's task group (:meth:`AsyncConsumer._fetch_loop`) fetches ahead of
the application; ``getmany`` waits for its data. Consumer groups: a group task in the same task
group (:class:`odradek.client.group_driver.AsyncGroup`); :meth:`AsyncConsumer._running` says how
they end.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc

from odradek.client import consumer_core as core
from odradek.client import ops
from odradek.client.async_client import AsyncClient
from odradek.client.drivers import async_face
from odradek.client.errors import KafkaError
from odradek.client.group import GroupMember
from odradek.client.group_driver import AsyncGroup
from odradek.client.lifetime import AsyncLifetime, task_group
from odradek.client.types import ConsumerRecord, TopicPartition

__all__ = ["AsyncConsumer"]


@async_face
class AsyncConsumer(AsyncLifetime, core.ConsumerCore):
    """The async consumer. Parameters and errors: :class:`~.consumer_core.ConsumerCore`.

    Use it in one event loop (asyncio, uvloop or trio), from one task at a time, inside
    ``async with`` (or between ``start()`` and ``stop()`` called from the same task). Cancelling
    ``getmany``/``getone`` loses no record: what was drained stays buffered for the next call.
    """

    _client_type = AsyncClient

    def _init_face(self) -> None:
        self._tg: anyio.abc.TaskGroup | None = None  # while running (_running)
        self._need_fetch: anyio.Event | None = None
        self._data: anyio.Event | None = None

    def _check_open(self) -> None:
        if self._tg is None:
            raise KafkaError("consumer is not started")

    def _make_group(self, member: GroupMember) -> AsyncGroup:
        return AsyncGroup(self._client, member, self._kick)

    # -- lifetime ----------------------------------------------------------------------------
    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        """The consumer's lifetime (:mod:`odradek.client.lifetime`). On the way out its fetch
        task (and group task) are cancelled, then the group member commits (with auto-commit)
        and leaves, then the connection closes."""
        entered = False
        try:
            await self._client.connection()
            self._need_fetch = anyio.Event()
            self._data = anyio.Event()
            async with task_group(_cancel) as tg:
                self._tg = tg
                entered = True
                tg.start_soon(self._fetch_loop)
                if self._group is not None:
                    tg.start_soon(self._group.loop)
                yield
        finally:
            self._tg = None
            try:
                if entered and self._group is not None:
                    self._rewind()
                    await self._group.close()
            finally:
                await self._client.close()

    # -- fetching ----------------------------------------------------------------------------
    def _kick(self) -> None:
        if self._need_fetch is not None:
            self._need_fetch.set()

    async def _fetch_loop(self) -> None:
        """Sends a Fetch, in a task of its own, whenever partitions need data (several may be
        in flight, for different partitions: see :mod:`odradek.client.fetcher`)."""
        fetcher = self._fetcher
        assert self._tg is not None and self._need_fetch is not None
        while True:
            try:
                if fetcher.positions_unknown():
                    await self._client.run(fetcher.resolve_positions_op())
                offsets = fetcher.fetchable()
            except KafkaError as exc:
                delay_s = fetcher.on_error(exc)
                self._notify_data()
                await anyio.sleep(delay_s)
                continue
            if offsets:
                fetcher.fetch_started(offsets)
                self._tg.start_soon(self._fetch, offsets)
                continue
            await self._need_fetch.wait()
            self._need_fetch = anyio.Event()

    async def _fetch(self, offsets: dict[TopicPartition, int]) -> None:
        """One Fetch; its partitions stay in flight through the backoff after a failure."""
        fetcher = self._fetcher
        try:
            fetched = await self._client.run(ops.fetch_op(offsets, **fetcher.fetch_options))
            delay_s = fetcher.on_fetch(offsets, fetched)
        except KafkaError as exc:
            delay_s = fetcher.on_error(exc)
        self._notify_data()
        if delay_s:
            await anyio.sleep(delay_s)
        fetcher.fetch_ended(offsets)
        self._kick()

    def _notify_data(self) -> None:
        if self._data is not None:
            self._data.set()
            self._data = anyio.Event()

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records of the assigned partitions (of those of ``partitions`` only, if given: the
        others' records stay buffered for a later call), waiting up to ``timeout_ms`` for some.
        A partition not assigned has no records (aiokafka's ``getmany`` ignores it too). Raises
        the first error queued for those partitions (or for all, without ``partitions``), or
        for the consumer as a whole (a failed request, a group error)."""
        self._check_open()
        self._rewind()
        with self._polling():
            return await self._getmany(partitions, timeout_ms, max_records)

    async def _getmany(
        self, partitions: tuple[TopicPartition, ...], timeout_ms: float, max_records: int | None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        deadline = time.monotonic() + timeout_ms / 1000
        fetcher = self._fetcher
        while True:
            fetcher.raise_errors(partitions)
            records = fetcher.drain(max_records or self.max_poll_records, partitions)
            if fetcher.positions_unknown() or fetcher.fetchable():
                self._kick()  # the fetch task sends what the drain made room for
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            assert self._data is not None
            with anyio.move_on_after(remaining):
                await self._data.wait()

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord:
        """The next record (of one of ``partitions``, if given, as aiokafka's ``getone``),
        waiting as long as it takes. Raises as :meth:`getmany` does."""
        while partitions:  # one at a time: a call for other partitions puts nothing back
            batch = await self.getmany(*partitions, timeout_ms=1000, max_records=1)
            for records in batch.values():
                return records[0]
        return await self._next_record(None)

    def __aiter__(self) -> AsyncConsumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        return await self._next_record(self.consumer_timeout_ms)

    async def _next_record(self, timeout_ms: float | None) -> ConsumerRecord:
        """The next record drained for iteration, refilled by ``getmany`` when none is left;
        ``timeout_ms=None`` waits as long as it takes, else ``StopAsyncIteration`` after it."""
        for record in self._iter_it:
            return record
        wait_ms = 1000 if timeout_ms is None else timeout_ms
        while not (batch := await self.getmany(timeout_ms=wait_ms)):
            if timeout_ms is not None:
                raise StopAsyncIteration
        self._hand_out(batch)  # no await since the drain: a cancellation loses nothing
        return next(self._iter_it)


def _cancel(tg: anyio.abc.TaskGroup) -> None:
    tg.cancel_scope.cancel()
