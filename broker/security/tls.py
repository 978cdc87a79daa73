"""TLS for the ``SSL`` and ``SASL_SSL`` listeners: the server context built from the
``ssl.*`` keys, the non-blocking handshake, and a transport with the plain one's interface
(:class:`odradek.broker.net.PlainTransport`).

The context: TLS 1.2 and/or 1.3 only (``ssl.enabled.protocols``), no TLS compression, no
renegotiation; the key and certificate chain from ``ssl.keystore.location`` (PEM, the key
decrypted with ``ssl.key.password``); client certificates per ``ssl.client.auth`` checked
against ``ssl.truststore.location``. A file that cannot be read or does not hold what it must
is a :class:`~odradek.broker.config.ConfigError` at start-up naming the key and the file,
never the password.

Zero copy stops at TLS: ``os.sendfile`` would send the file's bytes unencrypted, so a fetch's
record bytes are read (``os.pread``, from the page cache as a rule) and encrypted in chunks of
``_CHUNK_BYTES``; ``bench/security.py`` measures what that costs. Python's ``SSLSocket`` has no
vectored write: a response's buffers are joined once and written in chunks. After
``SSLWantWriteError`` the same chunk is written again (OpenSSL's rule for a retried write).
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Sequence

import anyio
from cryptography import x509

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.net import close_socket
from odradek.broker.security.principal import ANONYMOUS, map_principal, parse_mapping_rules
from odradek.protocol.frames import Buffer

__all__ = ["TlsTransport", "server_context"]

_CHUNK_BYTES = 256 * 1024
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_context(config: BrokerConfig) -> ssl.SSLContext:
    """The context every TLS listener shares; :class:`ConfigError` if it cannot be built."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in config["ssl.enabled.protocols"])  # type: ignore[attr-defined]
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    keystore = str(config["ssl.keystore.location"] or "")
    if not keystore:
        raise ConfigError("a TLS listener needs ssl.keystore.location (a PEM key and chain)")
    password = config["ssl.key.password"]
    try:
        context.load_cert_chain(keystore, password=password)  # type: ignore[arg-type]
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"cannot load ssl.keystore.location={keystore}: {_reason(exc)} (it must hold the "
            "private key, decrypted by ssl.key.password if encrypted, and the certificate chain)"
        ) from None
    client_auth = str(config["ssl.client.auth"])
    context.verify_mode = _CLIENT_AUTH[client_auth]
    truststore = str(config["ssl.truststore.location"] or "")
    if truststore:
        try:
            context.load_verify_locations(cafile=truststore)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load ssl.truststore.location={truststore}: {_reason(exc)}"
            ) from None
    elif client_auth != "none":
        raise ConfigError(
            f"ssl.client.auth={client_auth} needs ssl.truststore.location (the CAs that sign "
            "client certificates)"
        )
    return context


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)


class TlsTransport:
    """A TLS connection over a non-blocking socket, waited on with anyio like the plain one."""

    def __init__(self, context: ssl.SSLContext, sock: socket.socket, mapping_rules: str) -> None:
        self.sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        self._rules = parse_mapping_rules(mapping_rules)
        self.principal = ANONYMOUS  # until a client certificate says otherwise

    async def start(self) -> None:
        """The handshake; raises ``ssl.SSLError`` (a bad certificate, a client that does not
        speak TLS) or ``ValueError`` (no mapping rule for the client's certificate)."""
        while True:
            try:
                self.sock.do_handshake()
                break
            except ssl.SSLWantReadError:
                await anyio.wait_readable(self.sock)
            except ssl.SSLWantWriteError:
                await anyio.wait_writable(self.sock)
        der = self.sock.getpeercert(binary_form=True)
        if der:
            subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
            self.principal = map_principal(subject, self._rules)

    def recv_now(self, buffer: bytearray | memoryview) -> int:
        """What is readable now (0: the peer closed); ``BlockingIOError`` if nothing is."""
        try:
            return self.sock.recv_into(buffer)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError from None
        except ssl.SSLZeroReturnError:
            return 0

    async def recv(self, buffer: bytearray | memoryview) -> int:
        while True:
            try:
                return self.recv_now(buffer)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)

    def send_now(self, buffers: Sequence[Buffer]) -> list[memoryview]:
        data = memoryview(b"".join(buffers) if len(buffers) != 1 else buffers[0]).cast("B")
        while data:
            try:
                sent = self.sock.send(data[:_CHUNK_BYTES])
            except ssl.SSLWantWriteError:
                break
            data = data[sent:]
        return [data] if data else []

    async def send_buffers(self, buffers: Sequence[Buffer]) -> None:
        rest = self.send_now(buffers)
        while rest:
            await anyio.wait_writable(self.sock)
            rest = self.send_now(rest)

    async def send_file(self, fd: int, position: int, length: int) -> None:
        """``length`` bytes of ``fd`` from ``position``, read and encrypted chunk by chunk."""
        while length > 0:
            chunk = os.pread(fd, min(length, _CHUNK_BYTES), position)
            if not chunk:
                raise EOFError(f"file ended {length} bytes before the region's end")
            await self.send_buffers([chunk])
            position += len(chunk)
            length -= len(chunk)

    def close(self) -> None:
        close_socket(self.sock)
