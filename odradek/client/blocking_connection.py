"""The blocking connection: one TCP socket, a reader thread, pipelined thread-safe requests.

- Writes: :meth:`BlockingConnection.submit` registers the request with the sans-I/O
  :class:`~odradek.client.protocol_core.ProtocolCore` (under ``_core_lock``, no I/O) and
  writes the frame's parts with vectored ``sendmsg`` under ``_send_lock`` (frames never
  interleave). The core lock is never held across I/O, so the reader can always drain
  responses while a writer blocks on a full socket buffer (no deadlock with a broker that is
  itself blocked writing to us).
- Reads: a daemon thread ``recv``\\ s, feeds the core and completes each request's
  ``concurrent.futures.Future`` with ``(response, raw_tail)``; responses may arrive in any order.
- TLS (an ``ssl_context``): the handshake runs in the constructor; then the writes and the
  reads go through one :class:`~odradek.client.tls_channel.TlsChannel` (thread-safe, no
  ``sendmsg``: each frame's parts are encrypted into one write).
- Failure: EOF, a socket error or a protocol violation closes the socket and fails every
  pending future with :class:`~odradek.client.errors.KafkaConnectionError`; later submits raise it.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError
from odradek.client.protocol_core import (
    NO_RESPONSE,
    ProtocolCore,
    ProtocolViolation,
    connection_error,
)
from odradek.client.security import connect_failure
from odradek.client.tls_channel import TlsChannel
from odradek.protocol import messages as m
from odradek.protocol.frames import NATIVE_PREFACE, Buffer, byte_views, drop_sent

__all__ = ["BlockingConnection", "sendmsg_all"]

_RECV_BYTES = 4 << 20  # one reused receive buffer per connection (frames are copied out)
# Socket buffers that hold a whole Produce request or a large part of a Fetch response: each
# blocking sendmsg/recv that returns must take the GIL back, and while another thread runs
# Python that waits up to the switch interval (5 ms), so fewer, larger calls (the kernel
# doubles these values; autotuning would start at 16 KiB / 128 KiB)
_SOCKET_BUFFER_BYTES = 4 << 20
_IOV_MAX = 512


def sendmsg_all(sock: socket.socket, parts: Sequence[Buffer]) -> None:
    """Write every part with as few ``sendmsg`` calls as the kernel allows."""
    views = byte_views(parts)
    while views:
        drop_sent(views, sock.sendmsg(views[:_IOV_MAX]))


class BlockingConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        connect_timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """Connect (and with ``ssl_context``, run the TLS handshake) within
        ``connect_timeout_s``. Raises ``KafkaConnectionError``, or ``SslAuthenticationError``
        when the handshake fails."""
        self.address = (host, port)
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        except OSError as exc:
            raise connect_failure(host, port, exc) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER_BYTES)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER_BYTES)
            if ssl_context is None:
                self._send_parts = functools.partial(sendmsg_all, sock)
                self._recv_into = sock.recv_into
            else:
                tls = TlsChannel(sock, ssl_context, host)
                self._send_parts, self._recv_into = tls.send_parts, tls.recv_into
            # the native protocol, not Kafka's, on this connection (protocol.frames)
            self._send_parts((NATIVE_PREFACE,))
            sock.settimeout(None)
        except OSError as exc:  # ssl.SSLError is an OSError
            sock.close()
            raise connect_failure(host, port, exc) from None
        self._sock = sock
        self._core = ProtocolCore()
        self._core_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._error: KafkaConnectionError | None = None
        self._reader = threading.Thread(
            target=self._read_loop, name=f"odradek-reader-{host}:{port}", daemon=True
        )
        self._reader.start()

    @property
    def closed(self) -> bool:
        return self._error is not None

    @property
    def in_flight(self) -> int:
        return self._core.in_flight

    def submit(
        self, request: m.Request, raw: Buffer | Sequence[Buffer] = b""
    ) -> Future[tuple[m.Response, memoryview]] | None:
        """Send ``request``; returns the future of its response (``None`` for acks=0)."""
        future: Future[tuple[m.Response, memoryview]] | None = (
            Future() if m.expects_response(request) else None
        )
        with self._core_lock:
            if self._error is not None:
                raise self._error
            _, parts = self._core.send(request, raw, future)
        try:
            with self._send_lock:
                self._send_parts(parts)
        except OSError as exc:
            raise self._fail(exc) from None  # which fails ``future`` with the others
        return future

    def exchange(
        self, request: m.Request, raw: Buffer | Sequence[Buffer], timeout_s: float
    ) -> tuple[m.Response | None, memoryview]:
        """The connections' exchange (:mod:`odradek.client.protocol_core`): submit, then wait."""
        future = self.submit(request, raw)
        if future is None:
            return NO_RESPONSE
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            raise KafkaTimeoutError(f"{type(request).__name__} got no response in time") from None

    def _read_loop(self) -> None:
        recv_into = self._recv_into
        core = self._core
        # recv(n) would allocate n bytes per call (~25 µs for 4 MiB, small answers included);
        # the frame decoder copies each frame out, so one buffer serves every read
        buffer = bytearray(_RECV_BYTES)
        view = memoryview(buffer)
        try:
            while received := recv_into(buffer):
                with self._core_lock:
                    done = core.receive(view[:received])
                for future, response, tail in done:
                    if future is not None and not future.done():
                        future.set_result((response, tail))
        except (OSError, ProtocolViolation) as exc:
            self._fail(exc)
        else:
            self._fail("closed by the broker")

    def _fail(self, cause: str | BaseException) -> KafkaConnectionError:
        """Fail the connection and every pending request; returns the error they got."""
        error = connection_error(self.address, cause)
        with self._core_lock:
            if self._error is None:
                self._error = error
            pending = self._core.fail_all()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        for future in pending:
            if future is not None and not future.done():
                future.set_exception(error)
        return error

    def close(self) -> None:
        self._fail("closed by the client")
        if threading.current_thread() is not self._reader:
            self._reader.join(5)
        self._sock.close()
