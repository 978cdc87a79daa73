"""The async producer (anyio), aiokafka-style: ``await start()`` / ``await stop()`` or
``async with``; ``fut = await p.send(...)`` then ``md = await fut`` (or
``fut.add_done_callback(fn)``, ``fut.result()``: :class:`DeliveryHandle`); ``await send_and_wait``.

A sender task in the producer's own task group (entered in ``_running``: see
:class:`~odradek.client.lifetime.AsyncLifetime`) runs ``ProducerCore._sender_round`` and sends
each Produce request in a task of its own.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import anyio.abc

from odradek.client.accumulator import Batch
from odradek.client.async_client import AsyncClient
from odradek.client.drivers import async_face
from odradek.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from odradek.client.futures import DeliveryHandle, batch_done
from odradek.client.lifetime import AsyncLifetime, task_group
from odradek.client.ops import Op
from odradek.client.producer_core import Placed, ProducerCore

__all__ = ["AsyncProducer"]

_monotonic = time.monotonic
_core_send = ProducerCore.send


@async_face
class AsyncProducer(AsyncLifetime, ProducerCore):
    """The async producer. Parameters and errors: :class:`~.producer_core.ProducerCore`.

    Use it in one event loop (asyncio, uvloop or trio), inside ``async with`` (or between
    ``start()`` and ``stop()`` called from the same task). ``await send(...)`` waits only for
    a topic's first metadata or for buffer memory (up to ``max_block_ms``) and returns a
    :class:`DeliveryHandle`; cancelling the ``send`` before it returns queues nothing, and
    cancelling an ``await handle`` leaves the record queued. ``stop()`` delivers what is
    queued.
    """

    _client_type = AsyncClient
    _delivery_type = DeliveryHandle

    @functools.wraps(ProducerCore.send)
    async def send(
        self, topic: str, value: Any = None, key: Any = None, **options: Any
    ) -> DeliveryHandle:
        # the core's send, called without a dict per record unless keyword options are given
        # (forwarding *args/**kwargs cost ~40 % of a record's time); its lock-free path first,
        # as the core takes it, one Python call fewer per record
        if options:
            delivery = _core_send(self, topic, value, key, **options)
        elif key is None and (handle := self._tail_append(topic, value)) is not None:
            return handle  # type: ignore[no-any-return]
        else:
            delivery = _core_send(self, topic, value, key)  # a handle, or _queue's coroutine
        return delivery if type(delivery) is DeliveryHandle else await delivery

    def _init_face(self) -> None:
        self._appender.closed = True  # until started: every send takes _queue (and raises)
        self._tg: anyio.abc.TaskGroup | None = None  # while running (_running)
        self._wake: anyio.Event | None = None
        self._progress: anyio.Event | None = None

    # -- lifetime ----------------------------------------------------------------------------
    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        """The producer's lifetime: its sender task runs in a task group entered with
        ``async with``; on the way out the sender delivers what is queued (a cancellation
        stops it at once), then the connection closes."""
        try:
            await self._client.connection()  # fail fast if no broker answers
            self._wake = anyio.Event()
            self._progress = anyio.Event()
            self._appender.closed = False
            async with task_group(self._stop_accepting) as tg:
                self._tg = tg
                tg.start_soon(self._run_sender)
                yield
        finally:
            self._tg = None
            await self._client.close()

    def _stop_accepting(self, tg: anyio.abc.TaskGroup) -> None:
        """The body ended: ``send`` refuses records; the sender delivers what is queued."""
        self._closing = True
        self._appender.closed = True
        self._notify()

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        yield  # one thread: nothing to lock
        self._notify()
        if self._progress is not None:  # wake the sends waiting for buffer memory
            self._progress.set()
            self._progress = anyio.Event()

    # -- send --------------------------------------------------------------------------------
    async def _queue(self, place: Op[Placed | KafkaError], tail: bool) -> DeliveryHandle:
        if self._tg is None or self._closing:
            raise KafkaError("producer is not started (or is stopping)")
        placed = await self._client.run(place)
        if isinstance(placed, KafkaError):
            return DeliveryHandle(None, error=placed)
        cfg = self.config
        acc = self._acc
        if acc.buffered_bytes >= cfg.buffer_memory:
            with anyio.move_on_after(cfg.max_block_ms / 1000):
                while acc.buffered_bytes >= cfg.buffer_memory:
                    assert self._progress is not None
                    self._notify()
                    await self._progress.wait()
            if acc.buffered_bytes >= cfg.buffer_memory:
                raise self._memory_timeout()
        if self._closing:  # stop() began while this send waited: the sender may be gone
            raise KafkaError("producer is stopping")
        added = self._add(placed, tail, _monotonic())
        assert added is not None  # one thread: a tail is never held by another
        batch, index, fresh = added
        if fresh:
            self._notify()  # the sender's wake-up time changed
        return DeliveryHandle(batch, index)

    async def send_and_wait(self, topic: str, value: bytes | None = None, **kwargs: Any) -> Any:
        """``await (await send(...))``: queue one record and wait for its delivery."""
        return await (await self.send(topic, value, **kwargs))

    # -- sender ------------------------------------------------------------------------------
    async def _run_sender(self) -> None:
        assert self._tg is not None
        tg = self._tg
        while True:
            decision = self._sender_round(_monotonic())
            if decision is None:
                return
            seq, batches, refresh, wakeup, expired = decision
            self._fail_expired(expired)
            if batches:
                tg.start_soon(self._send_batches, seq, batches)
                if refresh is not None:
                    tg.start_soon(self._client.run, refresh)
            if batches or expired:
                continue
            self._wake = anyio.Event()
            with anyio.move_on_after(wakeup if wakeup is not None else 3600):
                await self._wake.wait()

    async def _send_batches(self, seq: int, batches: list[Batch]) -> None:
        cfg = self.config
        request, raw = self._produce_request(batches)
        response: Any = None
        error: BaseException | None = None
        try:
            conn = await self._client.connection()
            try:
                response, _ = await conn.exchange(request, raw, cfg.request_timeout_ms / 1000)
            except KafkaTimeoutError:
                await conn.aclose()  # unanswered: reconnect and retry (as the blocking one)
                raise KafkaConnectionError("Produce request timed out") from None
        except KafkaError as exc:
            error = exc
        self._complete(seq, response, error)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued so far and wait for each batch to complete."""
        with self._flush_pending() as pending:
            try:
                with anyio.fail_after(timeout):
                    for batch in pending:
                        await batch_done(batch)
            except TimeoutError:
                raise KafkaTimeoutError(f"flush did not complete in {timeout} s") from None
