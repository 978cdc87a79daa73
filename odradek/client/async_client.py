"""The low-level async client (anyio: asyncio, asyncio+uvloop, trio), same API as
:class:`odradek.client.sync_client.Client` with ``async`` methods.

No background task is needed (so no task group to own): the tasks waiting for responses take
turns reading. :class:`AsyncConnection` invariant: at most one waiting task is *the reader*;
it receives bytes, feeds the sans-I/O :class:`~odradek.client.core.ProtocolCore` and completes every
response that arrives (setting each waiter's event), until its own response is complete; then
it hands the reader role to another waiter (sets its event) and returns. Cancellation of the
reader (a timeout) hands the role over the same way. A lost connection fails every waiter
with :class:`~odradek.client.errors.KafkaConnectionError`.

Retries and timeouts follow the blocking client (see :mod:`odradek.client.sync_client`).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from odradek.client import ops
from odradek.client.core import ClientCore, ProtocolCore, ProtocolViolation
from odradek.client.drivers import drive_async
from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError
from odradek.client.types import (
    ClusterMetadata,
    FetchedPartition,
    OffsetAndTimestamp,
    TopicPartition,
)
from odradek.protocol import messages as m
from odradek.protocol.frames import NATIVE_PREFACE, Buffer

__all__ = ["AsyncClient", "AsyncConnection"]

_EMPTY = memoryview(b"")
_RECV_BYTES = 4 * 1024 * 1024


class _Slot:
    __slots__ = ("done", "error", "event", "result")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.done = False
        self.result: tuple[m.Response, memoryview] | None = None
        self.error: BaseException | None = None


class AsyncConnection:
    def __init__(self, stream: anyio.abc.SocketStream, address: tuple[str, int]) -> None:
        self._stream = stream
        self.address = address
        self._core = ProtocolCore()
        self._send_lock = anyio.Lock()
        self._slots: dict[int, _Slot] = {}
        self._reader: _Slot | None = None
        self._error: KafkaConnectionError | None = None

    @classmethod
    async def connect(cls, host: str, port: int, timeout_s: float) -> AsyncConnection:
        try:
            with anyio.fail_after(timeout_s):
                stream = await anyio.connect_tcp(host, port)
                # the native protocol, not Kafka's, on this connection (protocol.frames)
                await stream.send(NATIVE_PREFACE)
        except (OSError, TimeoutError, anyio.BrokenResourceError) as exc:
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {exc}") from None
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(stream, (host, port))

    @property
    def closed(self) -> bool:
        return self._error is not None

    async def request(
        self, request: m.Request, raw: Buffer | Sequence[Buffer] = b""
    ) -> tuple[m.Response, memoryview] | None:
        """Send ``request`` and wait for its response (``None`` for acks=0)."""
        if self._error is not None:
            raise self._error
        slot = _Slot()
        cid, parts = self._core.send(request, raw, slot)
        expects = m.expects_response(request)
        if expects:
            self._slots[cid] = slot
        try:
            async with self._send_lock:
                for part in parts:
                    await self._stream.send(part)  # type: ignore[arg-type]
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._fail(KafkaConnectionError(f"send to {self._peer()} failed: {exc!r}"))
        if not expects:
            if self._error is not None:
                raise self._error
            return None
        try:
            return await self._wait(slot)
        finally:
            self._slots.pop(cid, None)

    def _peer(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    async def _wait(self, slot: _Slot) -> tuple[m.Response, memoryview]:
        while not slot.done:
            if self._reader is None:
                self._reader = slot
                try:
                    await self._read_until(slot)
                finally:
                    self._reader = None
                    self._hand_over()
            else:
                await slot.event.wait()
                if not slot.done:
                    slot.event = anyio.Event()  # woken to become the reader
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    async def _read_until(self, slot: _Slot) -> None:
        core = self._core
        while not slot.done:
            try:
                data = await self._stream.receive(_RECV_BYTES)
                done = core.receive(data)
            except anyio.EndOfStream:
                self._fail(KafkaConnectionError(f"connection to {self._peer()} closed by broker"))
                return
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                self._fail(KafkaConnectionError(f"connection to {self._peer()} lost: {exc!r}"))
                return
            except ProtocolViolation as exc:
                self._fail(KafkaConnectionError(f"{self._peer()}: {exc}"))
                return
            for waiter, response, tail in done:
                waiter.result = (response, tail)
                waiter.done = True
                waiter.event.set()

    def _hand_over(self) -> None:
        for other in self._slots.values():
            if not other.done:
                other.event.set()
                return

    def _fail(self, error: KafkaConnectionError) -> None:
        if self._error is None:
            self._error = error
        for waiter in self._core.fail_all():
            if waiter is not None and not waiter.done:
                waiter.error = error
                waiter.done = True
                waiter.event.set()

    async def aclose(self) -> None:
        self._fail(KafkaConnectionError(f"connection to {self._peer()} closed by the client"))
        await self._stream.aclose()


class AsyncClient(ClientCore):
    """The low-level async client. Parameters and errors: :class:`~.core.ClientCore`.

    Use it in one event loop (asyncio, uvloop or trio); any number of its tasks may call it at
    once (their requests are pipelined). Cancelling a call that waits for its response drops
    that response when it arrives; the other calls go on.
    """

    def _init_face(self) -> None:
        self._conn: AsyncConnection | None = None
        self._conn_lock: anyio.Lock | None = None  # made in the event loop, by connection()

    async def connection(self) -> AsyncConnection:
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._conn_lock is None:
            self._conn_lock = anyio.Lock()
        async with self._conn_lock:
            if self._closed:
                raise KafkaConnectionError("client is closed")
            conn = self._conn
            if conn is None or conn.closed:
                if conn is not None:
                    await conn.aclose()
                self._conn = conn = await self._bootstrap()
            return conn

    async def _bootstrap(self) -> AsyncConnection:
        errors = []
        timeout_s = self.request_timeout_ms / 1000
        for host, port in self.bootstrap_servers:
            try:
                conn = await AsyncConnection.connect(host, port, timeout_s)
            except KafkaConnectionError as exc:
                errors.append(str(exc))
                continue
            try:
                with anyio.fail_after(timeout_s):
                    broker = await self._drive(ops.handshake_op(self.client_id), conn)
            except (KafkaConnectionError, TimeoutError) as exc:
                await conn.aclose()
                errors.append(str(exc))
                continue
            if broker is not None and (broker.host, broker.port) != (host, port):
                try:
                    advertised = await AsyncConnection.connect(broker.host, broker.port, timeout_s)
                except KafkaConnectionError:
                    return conn
                await conn.aclose()
                return advertised
            return conn
        raise KafkaConnectionError("no bootstrap server answered: " + "; ".join(errors))

    @staticmethod
    async def _drive(op: ops.Op[Any], conn: AsyncConnection) -> Any:
        """Run an operation on one connection, without retries (the handshake)."""
        return await drive_async(op, lambda call: conn.request(call.request, call.raw))

    async def call(
        self, request: m.Request, raw: Buffer | Sequence[Buffer] = b""
    ) -> tuple[m.Response | None, memoryview]:
        """Send any request and wait for its response; ``(None, empty)`` for acks=0."""
        timeout_ms = self._timeout_ms(request)
        deadline = time.monotonic() + timeout_ms / 1000
        attempt = 0
        while True:
            try:
                conn = await self.connection()
                try:
                    with anyio.fail_after(max(0.0, deadline - time.monotonic())):
                        result = await conn.request(request, raw)
                except TimeoutError:
                    raise KafkaTimeoutError(
                        f"{type(request).__name__} got no response in {timeout_ms} ms"
                    ) from None
                return (None, _EMPTY) if result is None else result
            except KafkaConnectionError:
                delay_s = self._reconnect_delay_s(attempt, time.monotonic(), deadline)
                if delay_s is None:
                    raise
                await anyio.sleep(delay_s)  # backoff between reconnection attempts
                attempt += 1

    async def run(self, op: ops.Op[Any]) -> Any:
        """Execute a sans-I/O operation (see :mod:`odradek.client.ops`) with :meth:`call`."""
        return await drive_async(op, lambda call: self.call(call.request, call.raw))

    async def metadata(
        self, topics: list[str] | None = None, *, allow_auto_create: bool = False
    ) -> ClusterMetadata:
        return await self.run(ops.metadata_op(topics, allow_auto_create))

    async def list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return await self.run(ops.list_offsets_op(timestamps))

    async def fetch_raw(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 52428800,
        partition_max_bytes: int = 1048576,
    ) -> dict[TopicPartition, FetchedPartition]:
        return await self.run(
            ops.fetch_op(
                offsets,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                partition_max_bytes=partition_max_bytes,
            )
        )

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
