"""The low-level blocking client: any request over one pipelined connection to the broker.

:class:`~odradek.client.core.ClientCore` holds the logic (bootstrap, reconnection, retries,
the operations); this face carries out its effects with plain sockets
(:class:`~odradek.client.blocking_connection.BlockingConnection`) and ``time.sleep``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from odradek.client.blocking_connection import BlockingConnection
from odradek.client.core import ClientCore
from odradek.client.drivers import Closing, blocking_face, drive

__all__ = ["Client"]


@blocking_face
class Client(Closing, ClientCore):
    """The low-level blocking client. Parameters and errors: :class:`~.core.ClientCore`.

    Thread-safety: every method may be called from several threads at once; their requests
    are pipelined on the one connection.
    """

    def _init_face(self) -> None:
        self._conn_lock = threading.Lock()

    def connection(self, deadline_s: float | None = None) -> BlockingConnection:
        """The live connection, bootstrapping a new one if there is none (by ``deadline_s``,
        a ``time.monotonic()`` time; ``None``: within ``request_timeout_ms``)."""
        conn = self.open_connection()
        if conn is not None:
            return conn  # type: ignore[no-any-return]
        with self._conn_lock:
            return drive(self._connection_op(deadline_s), self)

    # -- effects (odradek.client.drivers) ---------------------------------------------------
    sleep = staticmethod(time.sleep)

    @staticmethod
    def notify(callback: Callable[[set[Any]], Any], partitions: set[Any]) -> Any:
        return callback(set(partitions))

    def _open(self, host: str, port: int, timeout_s: float) -> BlockingConnection:
        return BlockingConnection(
            host, port, connect_timeout_s=timeout_s, ssl_context=self.config.ssl_context
        )

    @staticmethod
    def _discard(conn: BlockingConnection) -> None:
        conn.close()

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection; later calls raise ``KafkaConnectionError``."""
        with self._conn_lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
