"""An async connection (anyio: asyncio, asyncio+uvloop, trio): one TCP stream, pipelined
requests, no background task (so no task group to own).

The tasks waiting for responses take turns reading. Invariant: at most one waiting task is
*the reader*; it receives bytes, feeds the sans-I/O
:class:`~odradek.client.protocol_core.ProtocolCore` and completes every response that arrives
(setting each waiter's event), until its own response is complete; then it hands the reader
role to another waiter (sets its event) and returns. Cancellation of the reader (a timeout)
hands the role over the same way. A lost connection fails every waiter with
:class:`~odradek.client.errors.KafkaConnectionError`.

Use it in one event loop; any number of its tasks may send at once (frames never interleave:
a send lock).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Sequence

import anyio
import anyio.abc

from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError
from odradek.client.protocol_core import (
    NO_RESPONSE,
    ProtocolCore,
    ProtocolViolation,
    connection_error,
)
from odradek.client.security import connect_failure
from odradek.protocol import messages as m
from odradek.protocol.frames import NATIVE_PREFACE, Buffer

__all__ = ["AsyncConnection"]

_RECV_BYTES = 4 * 1024 * 1024
_IO_ERRORS = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)


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
    async def connect(
        cls, host: str, port: int, timeout_s: float, ssl_context: ssl.SSLContext | None = None
    ) -> AsyncConnection:
        """Connect (and with ``ssl_context``, run the TLS handshake: anyio's ``TLSStream``)
        within ``timeout_s``. Raises ``KafkaConnectionError``, or ``SslAuthenticationError``
        when the handshake fails."""
        try:
            with anyio.fail_after(timeout_s):
                if ssl_context is None:
                    stream = await anyio.connect_tcp(host, port)
                else:
                    stream = await anyio.connect_tcp(
                        host,
                        port,
                        ssl_context=ssl_context,
                        tls_hostname=host,
                        tls_standard_compatible=False,  # EOF without close_notify: the end
                    )
                # the native protocol, not Kafka's, on this connection (protocol.frames)
                await stream.send(NATIVE_PREFACE)
        except (OSError, TimeoutError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise connect_failure(host, port, exc) from None
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(stream, (host, port))

    @property
    def closed(self) -> bool:
        return self._error is not None

    async def exchange(
        self, request: m.Request, raw: Buffer | Sequence[Buffer], timeout_s: float
    ) -> tuple[m.Response | None, memoryview]:
        """The connections' exchange (:mod:`odradek.client.protocol_core`): send, then await
        the response."""
        if self._error is not None:
            raise self._error
        slot = _Slot()
        cid, parts = self._core.send(request, raw, slot)
        expects = m.expects_response(request)
        if expects:
            self._slots[cid] = slot
        try:
            with anyio.fail_after(timeout_s):
                try:
                    async with self._send_lock:
                        for part in parts:
                            await self._stream.send(part)  # type: ignore[arg-type]
                except _IO_ERRORS as exc:
                    self._fail(exc)
                if not expects:
                    if self._error is not None:
                        raise self._error
                    return NO_RESPONSE
                return await self._wait(slot)
        except TimeoutError:
            raise KafkaTimeoutError(f"{type(request).__name__} got no response in time") from None
        finally:
            self._slots.pop(cid, None)

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
                self._fail("closed by the broker")
                return
            except (*_IO_ERRORS, ProtocolViolation) as exc:
                self._fail(exc)
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

    def _fail(self, cause: str | BaseException) -> None:
        error = connection_error(self.address, cause)
        if self._error is None:
            self._error = error
        for waiter in self._core.fail_all():
            if waiter is not None and not waiter.done:
                waiter.error = error
                waiter.done = True
                waiter.event.set()

    async def aclose(self) -> None:
        self._fail("closed by the client")
        await self._stream.aclose()
