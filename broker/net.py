"""Raw non-blocking sockets driven by anyio's readiness waits, with ``os.sendfile``.

Why not anyio's ``SocketStream``: on the asyncio backends a stream owns its socket through an
asyncio transport, and a probe that called ``os.sendfile`` on the stream's raw socket hung on
asyncio and uvloop (docs/architecture.md §3). Sockets that no transport owns, waited on with
``anyio.wait_readable`` / ``anyio.wait_writable``, serve sendfile on asyncio, uvloop and trio.
Every call tries the syscall first and waits only on ``BlockingIOError``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

import anyio

from odradek.protocol.frames import Buffer, byte_views, drop_sent

__all__ = [
    "PlainTransport",
    "close_socket",
    "listen",
    "recv_into",
    "send_buffers",
    "send_now",
    "sendfile_all",
]


def listen(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A non-blocking listening TCP socket (SO_REUSEADDR, so a restart can rebind at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def recv_into(sock: socket.socket, buffer: bytearray | memoryview) -> int:
    """Receive into ``buffer``; 0 means the peer closed its side."""
    while True:
        try:
            return sock.recv_into(buffer)
        except BlockingIOError:
            await anyio.wait_readable(sock)
        except InterruptedError:
            continue


def send_now(sock: socket.socket, buffers: Sequence[Buffer]) -> list[memoryview]:
    """Write what the socket takes now, in order, with vectored ``sendmsg`` calls; returns
    the views still to send (empty when everything went out)."""
    views = byte_views(buffers)
    while views:
        try:
            sent = sock.sendmsg(views[:512])  # IOV_MAX is 1024 on Linux
        except BlockingIOError:
            break
        except InterruptedError:
            continue
        drop_sent(views, sent)
    return views


async def send_buffers(sock: socket.socket, buffers: Sequence[Buffer]) -> None:
    """Write every buffer, in order, waiting for the socket as needed."""
    views = send_now(sock, buffers)
    while views:
        await anyio.wait_writable(sock)
        views = send_now(sock, views)


async def sendfile_all(sock: socket.socket, fd: int, position: int, length: int) -> None:
    """Send ``length`` bytes of ``fd`` from ``position`` with zero-copy ``os.sendfile``.

    Raises ``EOFError`` if the file ends first (it never should: regions are computed from
    data already written).
    """
    out = sock.fileno()
    while length > 0:
        try:
            sent = os.sendfile(out, fd, position, length)
        except BlockingIOError:
            await anyio.wait_writable(sock)
            continue
        except InterruptedError:
            continue
        if sent == 0:
            raise EOFError(f"file ended {length} bytes before the region's end")
        position += sent
        length -= sent


def close_socket(sock: socket.socket) -> None:
    """Wake every task waiting on ``sock`` (they get ClosedResourceError), then close it."""
    if sock.fileno() >= 0:
        anyio.notify_closing(sock)
        sock.close()


class PlainTransport:
    """A connection's socket as it is (PLAINTEXT and SASL_PLAINTEXT listeners): vectored
    writes and zero-copy ``sendfile``. :class:`odradek.broker.security.tls.TlsTransport` has
    the same methods."""

    principal = "User:ANONYMOUS"  # no certificate: who it is, only SASL can say

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    async def start(self) -> None:
        """Nothing to negotiate."""

    def recv_now(self, buffer: bytearray | memoryview) -> int:
        """What is readable now (0: the peer closed); ``BlockingIOError`` if nothing is."""
        return self.sock.recv_into(buffer)

    async def recv(self, buffer: bytearray | memoryview) -> int:
        return await recv_into(self.sock, buffer)

    def send_now(self, buffers: Sequence[Buffer]) -> list[memoryview]:
        return send_now(self.sock, buffers)

    async def send_buffers(self, buffers: Sequence[Buffer]) -> None:
        await send_buffers(self.sock, buffers)

    async def send_file(self, fd: int, position: int, length: int) -> None:
        await sendfile_all(self.sock, fd, position, length)

    def close(self) -> None:
        close_socket(self.sock)
