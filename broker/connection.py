"""One client connection: tell the protocol, read frames, hand them to the protocol's session,
write responses.

Protocol: the first four bytes decide, once (protocol.frames): :data:`NATIVE_PREFACE` means
the native protocol (:mod:`odradek.broker.native_session`), anything else is the first frame's
size prefix of Apache Kafka's protocol (:mod:`odradek.broker.kafka.session`). Both use the same
framing (a 4-byte big-endian size, then the body), the same limits and the same handlers.

Security (docs/security.md): the bytes come through a transport, plain (zero-copy
``sendfile``) or TLS (:mod:`odradek.broker.security.tls`: the handshake runs first, bounded
like any silence by ``connections.max.idle.ms``, and a failed one closes the connection with
its reason). A connection on a SASL listener holds a :class:`SaslExchange`; until it is done
both sessions let through only ApiVersions and the SASL requests. ``principal`` is who the
connection proved to be (``User:ANONYMOUS`` until then); the connection puts itself in
:data:`~odradek.broker.security.authorizer.CALLER`, where the shared handlers' ACL checks
find it.

Reading and dispatch happen in one task, in arrival order: every append of this connection is
applied by that task, in the order its requests arrived (per-partition order), before any task
is started for the request. Requests that wait — Produce with ``acks=all`` (the fsync) and
Fetch (the long poll), group joins — are answered by a task of their own
(:meth:`Connection.start_reserved`), so a client may pipeline many; the session decides the
order of the answers (native: any order; Kafka: the order of the requests).
A send lock keeps frames whole; at most ``max_in_flight`` waiting requests exist per connection
(the reader stops reading beyond that), so a client that never reads its responses only fills
its own socket buffer.

Per request, the hot path takes no timer and no checkpoint: the locks are acquired without a
checkpoint (``fast_acquire``), the reader tries ``recv_into`` before it waits, and when it read
without waiting it yields once per chunk (so a client that keeps its socket full cannot
starve the other connections). The idle timeout is not a timer per read either: the server
sweeps its connections (:meth:`Connection.close_if_idle`) against ``last_active_s``.

What closes the connection, with a logged reason and without touching any log: a frame above
``socket.request.max.bytes`` (refused before it is buffered), a malformed frame or header, an
unknown api, an idle timeout, the peer closing. (An unsupported version is the session's to
answer: the frame boundaries are intact.)
When the peer closes (EOF or a reset), its waiting requests (long-poll fetches, ``acks=all``
waits, JoinGroup/SyncGroup) are cancelled at once and the socket is closed: a client that hangs
up never keeps a ``max.connections`` slot or a CLOSE-WAIT socket until its waits end. (Appends
it made stay appended: only their answers are dropped.)

Read buffer: it starts at ``_MIN_READ_BUFFER_BYTES`` (an idle connection costs a few KiB, not a
large buffer), doubles whenever a ``recv_into`` fills it (a stream of large produce requests
reaches ``_MAX_READ_BUFFER_BYTES`` within a few reads and then reads in large chunks with no
allocation per read), and drops back to the minimum when the socket has no more to read and no
frame is half-received, so a connection that sent one large request and went quiet returns
the memory.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel

from odradek.broker.admin import AdminApi
from odradek.broker.context import BrokerContext
from odradek.broker.data import DataApi
from odradek.broker.groups.api import GroupApi
from odradek.broker.listeners import Listener
from odradek.broker.net import PlainTransport
from odradek.broker.security.authorizer import CALLER
from odradek.broker.security.sasl import SaslExchange
from odradek.protocol import messages as m
from odradek.protocol.frames import (
    FRAME_PREFIX_BYTES,
    NATIVE_PREFACE,
    Buffer,
    FrameDecoder,
    FrameError,
)
from odradek.storage.segment_file import FileRegion

__all__ = ["Apis", "Connection", "Session"]

_MIN_READ_BUFFER_BYTES = 4 * 1024  # what an idle connection holds
_MAX_READ_BUFFER_BYTES = 256 * 1024  # what a busy one reads into (one recv per 256 KiB)
_CONNECTION_ERRORS = (
    OSError,
    EOFError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)


@dataclass(frozen=True)
class Apis:
    """The broker's handlers, shared by every connection and both protocols."""

    admin: AdminApi
    data: DataApi
    groups: GroupApi | None


class Session(Protocol):
    """One protocol on one connection: serves each frame body the reader cuts."""

    async def dispatch(self, body: bytes) -> None: ...


class Transport(Protocol):
    """The byte stream under a connection: plain (:class:`odradek.broker.net.PlainTransport`)
    or TLS (:class:`odradek.broker.security.tls.TlsTransport`)."""

    principal: str  # who the transport says the peer is (a TLS client certificate)

    async def start(self) -> None: ...
    def recv_now(self, buffer: bytearray | memoryview) -> int: ...
    async def recv(self, buffer: bytearray | memoryview) -> int: ...
    def send_now(self, buffers: Sequence[Buffer]) -> list[memoryview]: ...
    async def send_buffers(self, buffers: Sequence[Buffer]) -> None: ...
    async def send_file(self, fd: int, position: int, length: int) -> None: ...
    def close(self) -> None: ...


def _kafka_session(conn: Connection) -> Session:
    from odradek.broker.kafka.session import KafkaSession  # the Kafka codec loads on first use

    return KafkaSession(conn)


class Connection:
    def __init__(
        self,
        ctx: BrokerContext,
        transport: Transport | socket.socket,
        peer: str,
        *,
        apis: Apis,
        listener: Listener | None = None,
        max_frame_bytes: int,
        idle_timeout_s: float,
        max_in_flight: int = 256,
    ) -> None:
        self.ctx = ctx
        if isinstance(transport, socket.socket):
            transport = PlainTransport(transport)
        self.transport: Transport = transport
        self.peer = peer
        # the listener it came in on (its security protocol), as clients are told to reach it
        self.listener = listener if listener is not None else ctx.advertised_listener
        self.principal = transport.principal  # SASL may change it before any request
        self.host = peer.rpartition(":")[0]  # what ACLs name (an address)
        self.authorizer = ctx.authorizer  # read through CALLER by the shared handlers
        # a SASL listener's exchange: until it is done, only ApiVersions and SASL requests
        self.sasl: SaslExchange | None = None
        if self.listener.sasl and ctx.security is not None:
            mechanisms = tuple(ctx.config["sasl.enabled.mechanisms"])  # type: ignore[call-overload]
            self.sasl = SaslExchange(mechanisms, ctx.security.credentials)
        self.close_reason: str | None = None  # set: close once the current answer is sent
        self.log = ctx.log.bind(peer=peer)
        self.apis = apis
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s
        self.protocol = ""  # "native" or "kafka", once the first four bytes are in
        self._send_lock = anyio.Lock(fast_acquire=True)
        self._max_in_flight = max_in_flight
        self._in_flight = anyio.Semaphore(max_in_flight, fast_acquire=True)
        self._reader_scope = anyio.CancelScope()
        self.last_active_s = time.monotonic()  # the last read or send (the idle sweep)
        self._idle_closed = False
        # why a waiting request's task closed the connection (it cancels the whole group,
        # the reader included, wherever the reader was: in recv, a send or a dispatch)
        self._send_failure: str | None = None
        self._task_group: anyio.abc.TaskGroup

    def stop_reading(self) -> None:
        """Graceful shutdown: read no more requests; those in flight still get answers."""
        self._reader_scope.cancel()

    def close_if_idle(self, now_s: float) -> bool:
        """Close the connection if nothing was read or sent for ``idle_timeout_s`` and no
        request is in flight (a long poll is not cut short); ``time.monotonic()`` seconds."""
        if now_s - self.last_active_s < self.idle_timeout_s:
            return False
        if self._in_flight.value != self._max_in_flight:
            return False
        self.log.info("closing idle connection", idle_s=self.idle_timeout_s)
        self._idle_closed = True
        self._reader_scope.cancel()
        return True

    def close_after_answer(self, reason: str) -> None:
        """Close the connection once the answer being built is sent (a refused SASL step:
        the client must read why before the connection goes)."""
        self.close_reason = reason

    def close(self, reason: str) -> None:
        """Close the connection from a session (a protocol-level refusal), with a logged
        reason: the reader stops and every waiting request is cancelled."""
        self.log.warning("closing connection", reason=reason)
        self._send_failure = reason
        self._task_group.cancel_scope.cancel()

    async def serve(self) -> None:
        """Serve until the peer leaves, a malformed frame, an idle timeout or shutdown."""
        decoder = FrameDecoder(self.max_frame_bytes)
        CALLER.set(self)  # every task of this connection starts from this context
        reason: str | None = None  # None: the reader was cancelled by a failed send
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                with self._reader_scope:
                    try:
                        reason = await self._read_loop(decoder)
                    except (FrameError, m.MalformedMessage) as exc:
                        reason = f"malformed request: {exc}"
                        self.log.warning("closing connection", reason=reason)
                        tg.cancel_scope.cancel()
                    except _CONNECTION_ERRORS as exc:
                        reason = f"connection error: {exc!r}"
                        tg.cancel_scope.cancel()
                    else:  # the peer closed: nobody will read what its waiting requests answer
                        tg.cancel_scope.cancel()
                if self._reader_scope.cancelled_caught:
                    reason = "idle timeout" if self._idle_closed else "broker shutting down"
        finally:
            self.transport.close()
        self.log.debug("connection closed", reason=reason or self._send_failure)

    async def _read_loop(self, decoder: FrameDecoder) -> str:
        transport = self.transport
        try:
            await transport.start()
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            reason = f"TLS handshake failed: {exc}"
            self.log.info("closing connection", reason=reason)
            return reason
        self.principal = transport.principal
        buffer = memoryview(bytearray(_MIN_READ_BUFFER_BYTES))
        head = bytearray()  # the first bytes, until they tell the protocol
        session: Session | None = None
        while True:
            try:
                received = transport.recv_now(buffer)
            except BlockingIOError:
                received = -1  # (waited for below, outside the handler: the exception's
                # traceback holds recv_now's frame, and with it the buffer being replaced)
            if received < 0:
                if len(buffer) > _MIN_READ_BUFFER_BYTES and not decoder.mid_frame:
                    buffer = memoryview(bytearray(_MIN_READ_BUFFER_BYTES))  # quiet: shrink
                received = await transport.recv(buffer)
            else:  # read without waiting: let the other tasks run once per chunk
                await anyio.lowlevel.checkpoint()
            self.last_active_s = time.monotonic()
            if received == 0:
                decoder.end_of_stream()
                return "peer closed the connection"
            if session is None:
                head += buffer[:received]
                if len(head) < FRAME_PREFIX_BYTES:
                    continue
                session, start = self._choose_session(head)
                decoder.feed(memoryview(head)[start:])
                head = bytearray()
            else:
                decoder.feed(buffer[:received])  # copies: the buffer may be replaced below
            if received == len(buffer) and received < _MAX_READ_BUFFER_BYTES:
                buffer = memoryview(bytearray(2 * received))  # more is coming: grow
            # (not a for loop: its variable would keep the last frame, maybe megabytes,
            # alive while the reader waits for the next)
            while (body := decoder.next_frame()) is not None:
                await session.dispatch(body)

    def _choose_session(self, head: bytearray) -> tuple[Session, int]:
        """The session for the protocol the first four bytes name, and where frames start."""
        if head.startswith(NATIVE_PREFACE):
            from odradek.broker.native_session import NativeSession

            self.protocol = "native"
            return NativeSession(self), len(NATIVE_PREFACE)
        self.protocol = "kafka"
        return _kafka_session(self), 0

    # -- what sessions use -------------------------------------------------------------------

    async def reserve(self) -> None:
        """Wait for a free in-flight slot (at most ``max_in_flight`` waiting requests); each
        reservation is handed to exactly one :meth:`start_reserved`."""
        await self._in_flight.acquire()

    def start_reserved(self, answer: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run ``answer(*args)`` as a task of this connection, releasing the slot
        :meth:`reserve` took when it ends; a failed send closes the connection."""
        self._task_group.start_soon(self._run_reserved, answer, args)

    async def _run_reserved(self, answer: Callable[..., Awaitable[None]], args: tuple) -> None:
        try:
            await answer(*args)
        except _CONNECTION_ERRORS as exc:  # the peer is gone: so is the connection
            self.log.debug("cannot send response", error=repr(exc))
            self._send_failure = f"cannot send a response: {exc!r}"
            self._task_group.cancel_scope.cancel()
        finally:
            self._in_flight.release()

    async def send(self, parts: Sequence[Buffer | FileRegion]) -> None:
        """Write one whole response: ``parts`` in order, buffers with vectored writes and each
        region's bytes with sendfile (the caller holds the regions' files until this returns).
        Responses never interleave."""
        self.last_active_s = time.monotonic()
        if not self._send_lock.locked() and not any(isinstance(p, FileRegion) for p in parts):
            # nobody is mid-frame: write it now; only what the socket does not take waits,
            # under the lock (taken without yielding: nothing can interleave before it)
            rest = self.transport.send_now(parts)  # type: ignore[arg-type]
            if rest:
                async with self._send_lock:
                    await self.transport.send_buffers(rest)
            return
        async with self._send_lock:
            buffers: list[Buffer] = []
            for part in parts:
                if not isinstance(part, FileRegion):
                    buffers.append(part)
                    continue
                if buffers:
                    await self.transport.send_buffers(buffers)
                    buffers = []
                # held by the reply: open even if deleted meanwhile
                fd = part.file.held_fileno()
                await self.transport.send_file(fd, part.position, part.length)
            if buffers:
                await self.transport.send_buffers(buffers)
