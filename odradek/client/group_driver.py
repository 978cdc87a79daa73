"""How each consumer face runs its :class:`odradek.client.group.GroupMember` in the background.

The member's operations are driven (:mod:`odradek.client.drivers`) with the face's client as
the I/O object (a JoinGroup may wait its rebalance timeout more than ``request_timeout_ms``).
What differs is only where the periodic step runs:

- :class:`BlockingGroup` (for :class:`odradek.client.consumer.Consumer`): the rebalance and
  auto-commit step runs inside ``poll`` on the calling thread (callbacks run inside ``poll``,
  as in Kafka); heartbeats run on a daemon thread that only sends Heartbeats (or, when the
  application stopped polling, the LeaveGroup of :meth:`GroupMember.leave_idle_op`) and sets
  flags.
- :class:`AsyncGroup` (for :class:`odradek.client.async_consumer.AsyncConsumer`): one task in
  the consumer's task group runs the step, the heartbeats and the callbacks (aiokafka's
  model: rebalances happen in the background; a callback may be a plain function or a
  coroutine). A fatal error is queued for the next ``getmany``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio

from odradek.client.async_client import AsyncClient
from odradek.client.blocking_client import Client
from odradek.client.errors import KafkaError
from odradek.client.group import GroupMember

__all__ = ["AsyncGroup", "BlockingGroup"]


class BlockingGroup:
    def __init__(self, client: Client, member: GroupMember) -> None:
        self.client = client
        self.member = member
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        """Nothing to wake: the next ``poll`` runs the step."""

    def step(self) -> None:
        """The consumer's part of ``poll``: regex check, rebalance, auto-commit."""
        if self.member.subscribed and self._thread is None:
            self._thread = threading.Thread(
                target=self._heartbeat_loop, name=f"heartbeat-{self.member.group_id}", daemon=True
            )
            self._thread.start()
        self.client.run(self.member.poll_op())

    def _heartbeat_loop(self) -> None:
        member = self.member
        while not self._stop.wait(max(0.005, member.next_heartbeat_s - member.clock())):
            if member.idle_expired():
                self.client.run(member.leave_idle_op())
            elif member.heartbeat_due():
                self.client.run(member.heartbeat_op())
            elif member.next_heartbeat_s <= member.clock():
                member.next_heartbeat_s = member.clock() + member.heartbeat_interval_s

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.client.config.request_timeout_ms / 1000)
        self.client.run(self.member.close_op())


class AsyncGroup:
    def __init__(
        self, client: AsyncClient, member: GroupMember, on_change: Callable[[], None]
    ) -> None:
        self.client = client
        self.member = member
        self.on_change = on_change
        self._wake: anyio.Event | None = None  # made by loop(), inside the event loop

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def loop(self) -> None:
        """The group task: rebalances, auto-commits and heartbeats, until cancelled."""
        member = self.member
        self._wake = anyio.Event()
        while True:
            try:
                await self.client.run(member.poll_op())
                if member.idle_expired():
                    await self.client.run(member.leave_idle_op())
                elif member.heartbeat_due():
                    await self.client.run(member.heartbeat_op())
            except Exception as exc:  # fatal group error or a callback's: the next getmany
                error = exc if isinstance(exc, KafkaError) else _wrap(exc)
                member.fetcher.report(error)  # raised by the next getmany
                member.rejoin_needed = False
            self.on_change()
            delay_s = member.next_wakeup_s() - member.clock()
            with anyio.move_on_after(max(0.0, delay_s)):
                await self._wake.wait()
            if self._wake.is_set():
                self._wake = anyio.Event()

    async def close(self) -> None:
        await self.client.run(self.member.close_op())


def _wrap(exc: Exception) -> KafkaError:
    error = KafkaError(f"rebalance callback failed: {exc!r}")
    error.__cause__ = exc
    return error
