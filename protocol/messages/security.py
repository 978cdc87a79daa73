"""Messages of the SASL exchange on the native protocol: SaslHandshake, then SaslAuthenticate
until the mechanism is done (Kafka's v1 exchange, the same tokens: :mod:`odradek.protocol.sasl`).

On a SASL listener a connection may send only ApiVersions and these until it has
authenticated; a failure is answered ``SASL_AUTHENTICATION_FAILED`` and the connection closed.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from odradek.protocol.messages.base import Request, Response, Str

__all__ = [
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
]

# a SCRAM message or a PLAIN token: short; bounded so a hostile peer cannot make it large
Token = Annotated[bytes, Meta(max_length=64 * 1024)]


class SaslHandshakeRequest(Request, tag=17, kw_only=True):
    mechanism: Str


class SaslHandshakeResponse(Response, tag=17, kw_only=True):
    mechanisms: list[Str] = []  # what the listener enables


class SaslAuthenticateRequest(Request, tag=36, kw_only=True):
    auth_bytes: Token


class SaslAuthenticateResponse(Response, tag=36, kw_only=True):
    auth_bytes: bytes = b""
