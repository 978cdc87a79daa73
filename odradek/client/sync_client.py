"""The low-level blocking client: any request over one pipelined connection to the broker.

Bootstrap: try each ``bootstrap_servers`` address in order; on the first that accepts, send
ApiVersions then Metadata; if the broker advertises another address, connect there (and keep
the bootstrap connection if that fails). The connection is made lazily and remade after a loss.

Retries: :meth:`Client.call` retries connection failures and losses with exponential backoff
(``retry_backoff_ms`` doubling up to ``retry_backoff_max_ms``) until ``request_timeout_ms`` has
passed since the call began (for a Fetch, plus its ``max_wait_ms``), then raises
:class:`KafkaConnectionError` or :class:`KafkaTimeoutError`. Error codes in responses are not
retried here; the operations and the producer decide.

Thread safety: every method may be called from several threads; their requests are
pipelined on the one connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from odradek.client import ops
from odradek.client.connection import BlockingConnection
from odradek.client.core import ClientCore
from odradek.client.drivers import drive
from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError
from odradek.client.types import (
    ClusterMetadata,
    FetchedPartition,
    OffsetAndTimestamp,
    TopicPartition,
)
from odradek.protocol import messages as m
from odradek.protocol.frames import Buffer

__all__ = ["Client"]

_EMPTY = memoryview(b"")


class Client(ClientCore):
    """The low-level blocking client. Parameters and errors: :class:`~.core.ClientCore`.

    Thread-safety: every method may be called from several threads at once; their requests
    are pipelined on the one connection.
    """

    def _init_face(self) -> None:
        self._conn: BlockingConnection | None = None
        self._conn_lock = threading.Lock()

    # -- connection ----------------------------------------------------------------------------
    def connection(self) -> BlockingConnection:
        """The live connection, bootstrapping a new one if there is none."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        with self._conn_lock:
            if self._closed:
                raise KafkaConnectionError("client is closed")
            conn = self._conn
            if conn is None or conn.closed:
                if conn is not None:
                    conn.close()
                self._conn = conn = self._bootstrap()
            return conn

    def open_connection(self) -> BlockingConnection | None:
        """The connection if one is open, without connecting (``None`` otherwise)."""
        conn = self._conn
        return conn if conn is not None and not conn.closed else None

    def _bootstrap(self) -> BlockingConnection:
        errors = []
        timeout_s = self.request_timeout_ms / 1000
        for host, port in self.bootstrap_servers:
            try:
                conn = BlockingConnection(host, port, connect_timeout_s=timeout_s)
            except KafkaConnectionError as exc:
                errors.append(str(exc))
                continue
            try:
                broker = self._drive(ops.handshake_op(self.client_id), conn)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:  # try the next one
                conn.close()
                errors.append(str(exc))
                continue
            if broker is not None and (broker.host, broker.port) != (host, port):
                try:
                    advertised = BlockingConnection(
                        broker.host, broker.port, connect_timeout_s=timeout_s
                    )
                except KafkaConnectionError:
                    return conn  # the advertised address is unreachable from here
                conn.close()
                return advertised
            return conn
        raise KafkaConnectionError("no bootstrap server answered: " + "; ".join(errors))

    def _drive(self, op: ops.Op[Any], conn: BlockingConnection) -> Any:
        """Run an operation on one connection, without retries (the handshake)."""

        def call_once(call: ops.Call) -> tuple[m.Response, memoryview]:
            future = conn.submit(call.request, call.raw)
            assert future is not None
            try:
                return future.result(self.request_timeout_ms / 1000)
            except FutureTimeout:
                raise KafkaTimeoutError("handshake timed out") from None

        return drive(op, call_once)

    # -- requests ------------------------------------------------------------------------------
    def call(
        self, request: m.Request, raw: Buffer | Sequence[Buffer] = b""
    ) -> tuple[m.Response | None, memoryview]:
        """Send any request and wait for its response: ``(response, raw_tail)``.

        A Produce with ``acks=0`` gets no response: returns ``(None, empty)`` once written."""
        timeout_ms = self._timeout_ms(request)
        deadline = time.monotonic() + timeout_ms / 1000
        attempt = 0
        while True:
            try:
                future = self.connection().submit(request, raw)
                if future is None:
                    return None, _EMPTY
                try:
                    return future.result(max(0.0, deadline - time.monotonic()))
                except FutureTimeout:
                    raise KafkaTimeoutError(
                        f"{type(request).__name__} got no response in {timeout_ms} ms"
                    ) from None
            except KafkaConnectionError:
                delay_s = self._reconnect_delay_s(attempt, time.monotonic(), deadline)
                if delay_s is None:
                    raise
                time.sleep(delay_s)  # backoff between reconnection attempts
                attempt += 1

    def run(self, op: ops.Op[Any]) -> Any:
        """Execute a sans-I/O operation (see :mod:`odradek.client.ops`) with :meth:`call`."""
        return drive(op, self._call)

    def _call(self, call: ops.Call) -> tuple[m.Response | None, memoryview]:
        return self.call(call.request, call.raw)

    def metadata(
        self, topics: list[str] | None = None, *, allow_auto_create: bool = False
    ) -> ClusterMetadata:
        return self.run(ops.metadata_op(topics, allow_auto_create))

    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self.run(ops.list_offsets_op(timestamps))

    def fetch_raw(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 52428800,
        partition_max_bytes: int = 1048576,
    ) -> dict[TopicPartition, FetchedPartition]:
        return self.run(
            ops.fetch_op(
                offsets,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                partition_max_bytes=partition_max_bytes,
            )
        )

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        with self._conn_lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
