"""TLS for the blocking connection: one ``ssl.SSLObject`` over memory BIOs, safe for a reader
thread and writer threads at once.

Why not ``ssl.SSLSocket``: the connection reads on its reader thread while other threads
write, and OpenSSL forbids using one SSL object from two threads at the same time (an
``SSLSocket`` has no lock, and no ``sendmsg``). Here the SSL object and its two BIOs are touched
only under ``_lock``, and the socket's I/O happens outside it:

- :meth:`TlsChannel.send_parts` (its caller holds the connection's send lock, so records leave
  in the order they were made): under the lock, encrypt every part and take the outgoing
  bytes; then write them to the socket.
- :meth:`TlsChannel.recv_into`: under the lock, decrypt what the incoming BIO holds; if it
  holds no whole record, ``recv`` from the socket outside the lock, feed the bytes in, repeat.
- Bytes the SSL object makes while reading (a TLS 1.3 KeyUpdate answer) stay in the outgoing
  BIO and leave with the next send, ahead of its records, never out of order.

The handshake runs in the constructor, bounded by the socket's timeout.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Sequence

from odradek.protocol.frames import Buffer

__all__ = ["TlsChannel"]

_RAW_BYTES = 256 * 1024  # one reused buffer for the socket's encrypted bytes


class TlsChannel:
    """TLS over a connected socket. Raises ``ssl.SSLError`` if the handshake fails, ``OSError``
    if the socket does."""

    def __init__(self, sock: object, context: ssl.SSLContext, server_hostname: str) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming, self._outgoing, server_hostname=server_hostname
        )
        self._lock = threading.Lock()
        self._raw = memoryview(bytearray(_RAW_BYTES))
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:  # send what it made, then feed it the broker's answer
                self._flush()
                if not self._fill():
                    raise ConnectionError(
                        "the broker closed the connection in the TLS handshake"
                    ) from None
        self._flush()

    def _flush(self) -> None:
        data = self._outgoing.read()
        if data:
            self._sock.sendall(data)  # type: ignore[attr-defined]

    def _fill(self) -> int:
        received: int = self._sock.recv_into(self._raw)  # type: ignore[attr-defined]
        with self._lock:
            if received:
                self._incoming.write(self._raw[:received])
            else:
                self._incoming.write_eof()
        return received

    def send_parts(self, parts: Sequence[Buffer]) -> None:
        """Encrypt ``parts`` and write them. The caller serializes calls (the send lock)."""
        with self._lock:
            for part in parts:
                self._tls.write(part)
            data = self._outgoing.read()
        self._sock.sendall(data)  # type: ignore[attr-defined]

    def recv_into(self, buffer: bytearray) -> int:
        """Decrypted bytes into ``buffer``, waiting for the socket if none are ready: their
        count, 0 when the broker closed the connection."""
        view = memoryview(buffer)
        while True:
            with self._lock:
                filled = self._decrypt(view)
            if filled is not None:
                return filled
            self._fill()

    def _decrypt(self, view: memoryview) -> int | None:
        """What the incoming BIO holds, decrypted into ``view``: the count, 0 at the end of the
        stream, ``None`` if no whole record is there yet."""
        filled = 0
        try:
            while filled < len(view):
                count = self._tls.read(len(view) - filled, view[filled:])
                if not count:  # the broker's close_notify
                    return filled
                filled += count
        except ssl.SSLWantReadError:
            return filled or None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # closed without close_notify
            return filled
        return filled
