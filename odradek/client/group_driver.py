"""Drivers that run :class:`odradek.client.group.GroupMember` operations for the two consumer faces.

:class:`BlockingGroup` (for :class:`odradek.client.consumer.Consumer`): operations run on the
calling thread (``poll`` runs the rebalance and auto-commit step, so callbacks run inside ``poll``
as in Kafka); heartbeats run on a daemon thread that only sends Heartbeats and sets flags.

:class:`AsyncGroup` (for :class:`odradek.client.async_consumer.AsyncConsumer`): one task in the
consumer's task group runs the step, the heartbeats and the callbacks (aiokafka's model:
rebalances happen in the background; a callback may be a plain function or a coroutine).

JoinGroup waits on the broker until the generation forms (up to the rebalance timeout,
``max_poll_interval_ms``), longer than ``request_timeout_ms``: both drivers send it on the
client's connection with a deadline of ``max_poll_interval_ms + request_timeout_ms``; every
other call goes through ``Client.call`` (reconnection and retries).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import anyio

from odradek.client.async_client import AsyncClient
from odradek.client.drivers import drive, drive_async
from odradek.client.errors import KafkaError, KafkaTimeoutError
from odradek.client.fetcher import Fetcher
from odradek.client.group import GroupMember, Notify, Sleep
from odradek.client.ops import Call, Op
from odradek.client.sync_client import Client
from odradek.client.types import ConsumerRecord, TopicPartition
from odradek.protocol import messages as m

__all__ = ["AsyncGroup", "BlockingGroup", "LagMixin", "consumed_offsets"]

Consumed = Callable[[], dict[TopicPartition, int]]


def consumed_offsets(
    positions: Mapping[TopicPartition, int | None], unyielded: Iterable[ConsumerRecord] = ()
) -> dict[TopicPartition, int]:
    """What to commit: each partition's position, moved back to the first record that was
    drained from the fetcher but not yet handed to the application (iteration buffers)."""
    out = {tp: pos for tp, pos in positions.items() if pos is not None}
    for record in unyielded:
        tp = TopicPartition(record.topic, record.partition)
        if tp in out and record.offset < out[tp]:
            out[tp] = record.offset
    return out


class LagMixin:
    """``highwater`` and ``lag`` of both consumer faces (which own ``self._fetcher``)."""

    _fetcher: Fetcher

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark of ``tp`` seen by the last fetch (``None`` before one)."""
        return self._fetcher.high_watermarks.get(TopicPartition(*tp))

    def lag(self) -> dict[TopicPartition, int]:
        """Records left to read per assigned partition (last high watermark - position)."""
        fetcher = self._fetcher
        out = {}
        for tp, position in fetcher.positions.items():
            high = fetcher.high_watermarks.get(tp)
            if position is not None and high is not None:
                out[tp] = max(0, high - position)
        return out


def _join_timeout_s(member: GroupMember, request_timeout_ms: int) -> float:
    return (member.rebalance_timeout_ms + request_timeout_ms) / 1000


class BlockingGroup:
    def __init__(self, client: Client, member: GroupMember, consumed: Consumed) -> None:
        self.client = client
        self.member = member
        self.consumed = consumed
        self._join_timeout_s = _join_timeout_s(member, client.request_timeout_ms)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self, op: Op[Any]) -> Any:
        """Run a group operation on the calling thread (callbacks run here too)."""
        return drive(op, self._effect)

    def _effect(self, item: Call | Sleep | Notify) -> Any:
        if isinstance(item, Sleep):
            time.sleep(item.seconds)  # a retry backoff
            return None
        if isinstance(item, Notify):
            return item.callback(set(item.partitions))
        if isinstance(item.request, m.JoinGroupRequest):
            future = self.client.connection().submit(item.request, item.raw)
            assert future is not None
            try:
                return future.result(self._join_timeout_s)
            except FutureTimeout:
                raise KafkaTimeoutError("JoinGroup got no response in time") from None
        return self.client.call(item.request, item.raw)

    def step(self) -> None:
        """The consumer's part of ``poll``: regex check, rebalance, auto-commit."""
        if self.member.subscribed and self._thread is None:
            self._thread = threading.Thread(
                target=self._heartbeat_loop, name=f"heartbeat-{self.member.group_id}", daemon=True
            )
            self._thread.start()
        self.run(self.member.poll_op(self.consumed))

    def _heartbeat_loop(self) -> None:
        member = self.member
        while not self._stop.wait(max(0.005, member.next_heartbeat_s - member.clock())):
            if member.heartbeat_due():
                self.run(member.heartbeat_op())
            elif member.next_heartbeat_s <= member.clock():
                member.next_heartbeat_s = member.clock() + member.heartbeat_interval_s

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.client.request_timeout_ms / 1000)
        self.run(self.member.close_op(self.consumed))


class AsyncGroup:
    def __init__(
        self,
        client: AsyncClient,
        member: GroupMember,
        consumed: Consumed,
        on_change: Callable[[], None],
        errors: list[KafkaError],
    ) -> None:
        self.client = client
        self.member = member
        self.consumed = consumed
        self.on_change = on_change
        self.errors = errors  # the fetcher's: raised by the next getmany
        self._join_timeout_s = _join_timeout_s(member, client.request_timeout_ms)
        self._wake: anyio.Event | None = None  # made by loop(), inside the event loop

    async def run(self, op: Op[Any]) -> Any:
        """Run a group operation in the calling task (callbacks run here too)."""
        return await drive_async(op, self._effect)

    async def _effect(self, item: Call | Sleep | Notify) -> Any:
        if isinstance(item, Sleep):
            await anyio.sleep(item.seconds)  # a retry backoff
            return None
        if isinstance(item, Notify):
            result = item.callback(set(item.partitions))
            return (await result) if inspect.isawaitable(result) else result
        if isinstance(item.request, m.JoinGroupRequest):
            conn = await self.client.connection()
            try:
                with anyio.fail_after(self._join_timeout_s):
                    return await conn.request(item.request, item.raw)
            except TimeoutError:
                raise KafkaTimeoutError("JoinGroup got no response in time") from None
        return await self.client.call(item.request, item.raw)

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def loop(self) -> None:
        """The group task: rebalances, auto-commits and heartbeats, until cancelled."""
        member = self.member
        self._wake = anyio.Event()
        while True:
            try:
                await self.run(member.poll_op(self.consumed))
                if member.heartbeat_due():
                    await self.run(member.heartbeat_op())
            except Exception as exc:  # fatal group error or a callback's: the next getmany
                self.errors.append(exc if isinstance(exc, KafkaError) else _wrap(exc))
                member.rejoin_needed = False
            self.on_change()
            delay_s = member.next_wakeup_s() - member.clock()
            with anyio.move_on_after(max(0.0, delay_s)):
                await self._wake.wait()
            if self._wake.is_set():
                self._wake = anyio.Event()

    async def close(self) -> None:
        await self.run(self.member.close_op(self.consumed))


def _wrap(exc: Exception) -> KafkaError:
    error = KafkaError(f"rebalance callback failed: {exc!r}")
    error.__cause__ = exc
    return error
