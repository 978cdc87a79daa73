"""The async faces' lifetime, written once: ``async with face:``, or ``start()`` then ``stop()``.

A face (:class:`~odradek.client.async_producer.AsyncProducer`,
:class:`~odradek.client.async_consumer.AsyncConsumer`) defines ``_running()``: an async context
manager that connects, enters the face's task group with ``async with`` (:func:`task_group`),
starts its tasks, yields while the face runs, and on the way out winds them down (what that
means is the face's to say).
:class:`AsyncLifetime` holds that context open between ``__aenter__`` and ``__aexit__`` (or
``start`` and ``stop``) in an :class:`contextlib.AsyncExitStack`.

Rules: a task group must be left by the task that entered it, so ``stop()`` must be called from
the task that called ``start()`` (``async with`` does this by construction). An exception
raised in the ``async with`` body reaches ``_running`` (and comes out as itself); a cancellation
cancels the face's tasks with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Self

import anyio
import anyio.abc

from odradek.client.errors import KafkaError

__all__ = ["AsyncLifetime", "task_group"]


@asynccontextmanager
async def task_group(
    wind_down: Callable[[anyio.abc.TaskGroup], None],
) -> AsyncIterator[anyio.abc.TaskGroup]:
    """A face's task group, for ``_running`` to enter with ``async with``: when the body ends
    (normally or not), ``wind_down(tg)`` tells the tasks to finish (or cancels them), then the
    group waits for them. An exception of the body comes out as itself, not in an
    ``ExceptionGroup`` (the tasks' own failures still come out grouped)."""
    body_error: Exception | None = None
    async with anyio.create_task_group() as tg:
        try:
            yield tg
        except Exception as exc:
            body_error = exc
        finally:
            wind_down(tg)
    if body_error is not None:
        raise body_error


class AsyncLifetime:
    _lifetime: AsyncExitStack | None = None  # open while the face runs

    def _running(self) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError

    async def start(self) -> None:
        """Connect and start the face's tasks, as ``async with`` does; :meth:`stop` must then
        be called from the same task. Raises ``KafkaConnectionError`` if no bootstrap server
        answers, :class:`KafkaError` if already started."""
        if self._lifetime is not None:
            raise KafkaError(f"{type(self).__name__} already started")
        lifetime = AsyncExitStack()
        await lifetime.enter_async_context(self._running())
        self._lifetime = lifetime

    async def stop(self) -> None:
        """Wind the face down and close its connection (nothing if it is not running)."""
        await self.__aexit__(None, None, None)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        lifetime, self._lifetime = self._lifetime, None
        if lifetime is not None:
            await lifetime.__aexit__(*exc)
