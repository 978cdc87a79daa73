"""The low-level async client (anyio: asyncio, asyncio+uvloop, trio), the API of
:class:`odradek.client.blocking_client.Client` with ``async`` methods.

:class:`~odradek.client.core.ClientCore` holds the logic (bootstrap, reconnection, retries,
the operations); this face carries out its effects with anyio
(:class:`~odradek.client.async_connection.AsyncConnection`) and ``anyio.sleep``. No
background task is needed, so there is no task group to own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import anyio

from odradek.client.async_connection import AsyncConnection
from odradek.client.core import ClientCore
from odradek.client.drivers import AsyncClosing, async_face, drive_async

__all__ = ["AsyncClient"]


@async_face
class AsyncClient(AsyncClosing, ClientCore):
    """The low-level async client. Parameters and errors: :class:`~.core.ClientCore`.

    Use it in one event loop (asyncio, uvloop or trio); any number of its tasks may call it at
    once (their requests are pipelined). Cancelling a call that waits for its response drops
    that response when it arrives; the other calls go on.
    """

    def _init_face(self) -> None:
        self._conn_lock: anyio.Lock | None = None  # made in the event loop, by connection()

    async def connection(self, deadline_s: float | None = None) -> AsyncConnection:
        """The live connection, bootstrapping a new one if there is none (by ``deadline_s``,
        a ``time.monotonic()`` time; ``None``: within ``request_timeout_ms``)."""
        conn = self.open_connection()
        if conn is not None:
            return conn  # type: ignore[no-any-return]
        if self._conn_lock is None:
            self._conn_lock = anyio.Lock()
        async with self._conn_lock:
            return await drive_async(self._connection_op(deadline_s), self)

    # -- effects (odradek.client.drivers) ---------------------------------------------------
    sleep = staticmethod(anyio.sleep)

    @staticmethod
    async def notify(callback: Callable[[set[Any]], Any], partitions: set[Any]) -> Any:
        result = callback(set(partitions))
        return (await result) if inspect.isawaitable(result) else result

    async def _open(self, host: str, port: int, timeout_s: float) -> AsyncConnection:
        return await AsyncConnection.connect(host, port, timeout_s, self.config.ssl_context)

    @staticmethod
    async def _discard(conn: AsyncConnection) -> None:
        await conn.aclose()

    # -- lifetime ------------------------------------------------------------------------------
    async def close(self) -> None:
        """Close the connection; later calls raise ``KafkaConnectionError``."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.aclose()
