"""SASL authentication on a connection, for both protocols: which mechanism, the exchange,
who it proved to be, and how failures are slowed down.

A connection on a ``SASL_PLAINTEXT`` or ``SASL_SSL`` listener gets a :class:`SaslExchange`.
Until it succeeds, the sessions let through only ApiVersions and the exchange itself
(Kafka: SaslHandshake v1 then SaslAuthenticate); any other request closes the connection
before it reaches a handler. Mechanisms (``sasl.enabled.mechanisms``):

- ``PLAIN``: one message, ``\\0user\\0password``; the password is checked against the user's
  stored SCRAM credential (PBKDF2 in a worker thread: it takes milliseconds).
- ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``: two round trips (:mod:`odradek.protocol.sasl`). An
  unknown user gets a decoy salt (the same for the same name while the broker runs) and fails
  at the end like a wrong password.

A failure is answered with Kafka's ``SASL_AUTHENTICATION_FAILED`` and a message that names
no secret, then the connection is closed. The answer is delayed (:class:`FailureDelays`):
``connection.failed.authentication.delay.ms`` for a peer host's first failure, doubled for
each further failure within ten minutes, up to 5 s — a password guesser gets one try per
delay per connection, and opening more connections is bounded by ``max.connections``.
Logs name the mechanism, the user tried and the peer, never a password.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from odradek.broker.security.principal import user
from odradek.protocol.errors import ErrorCode
from odradek.protocol.sasl import (
    SCRAM_MECHANISMS,
    SaslFailure,
    ScramServer,
    parse_plain,
    verify_password,
)
from odradek.storage.credentials import CredentialStore

if TYPE_CHECKING:
    from odradek.broker.connection import Connection

__all__ = ["FailureDelays", "SaslExchange", "SaslFailure", "SaslState", "authenticate", "handshake"]

_MAX_DELAY_S = 5.0
_FORGET_AFTER_S = 600.0


class FailureDelays:
    """How long to hold a failed authentication's answer, per peer host."""

    def __init__(self, base_ms: int) -> None:
        self.base_s = base_ms / 1000
        self._failures: dict[str, tuple[int, float]] = {}  # host -> (count, last failure)

    def failed(self, host: str, now_s: float | None = None) -> float:
        """Record a failure from ``host``; the delay its answer gets, in seconds."""
        now_s = time.monotonic() if now_s is None else now_s
        count, last_s = self._failures.get(host, (0, now_s))
        if now_s - last_s > _FORGET_AFTER_S:
            count = 0
        self._failures[host] = (count + 1, now_s)
        if len(self._failures) > 10_000:  # keep the table small: drop the stalest half
            stale = sorted(self._failures, key=lambda h: self._failures[h][1])
            for old in stale[: len(stale) // 2]:
                del self._failures[old]
        return min(self.base_s * 2**count, _MAX_DELAY_S)

    def succeeded(self, host: str) -> None:
        self._failures.pop(host, None)


class SaslExchange:
    """One connection's authentication: :meth:`choose`, then :meth:`step` until
    :attr:`principal` is set (or :class:`SaslFailure`)."""

    _decoy_key = secrets.token_bytes(32)  # per process: decoy salts stay the same per name

    def __init__(self, enabled: tuple[str, ...], credentials: CredentialStore) -> None:
        self.enabled = enabled
        self.credentials = credentials
        self.mechanism: str | None = None
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.user = ""  # the user name tried (for logs)
        self._scram: ScramServer | None = None

    @property
    def done(self) -> bool:
        return self.principal is not None

    def choose(self, mechanism: str) -> bool:
        """Pick the mechanism (SaslHandshake); False if it is not enabled."""
        if mechanism not in self.enabled or self.done:
            return False
        self.mechanism = mechanism
        if mechanism in SCRAM_MECHANISMS:
            self._scram = ScramServer(mechanism, secrets.token_urlsafe(18))
        return True

    async def step(self, token: bytes) -> bytes:
        """The answer to one client token; sets :attr:`principal` when the exchange ends."""
        if self.mechanism is None or self.done:
            raise SaslFailure("unexpected SASL token: no mechanism chosen, or already done")
        if self.mechanism == "PLAIN":
            self.user, password = parse_plain(token)
            credential = self.credentials.any_credential(self.user)
            ok = credential is not None and await anyio.to_thread.run_sync(
                verify_password, credential, password
            )
            if not ok:
                raise SaslFailure("Authentication failed: invalid credentials")
            self.principal = user(self.user)
            return b""
        scram = self._scram
        assert scram is not None
        if not self.user:
            self.user = scram.parse_first(token)
            decoy = hmac.digest(self._decoy_key, self.user.encode(), hashlib.sha256)[:16]
            return scram.first(self.credentials.lookup(self.user, self.mechanism), decoy)
        answer = scram.final(token)
        self.principal = user(self.user)
        return answer

    def log_fields(self, peer: str) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "user": self.user, "peer": peer}


class SaslState:
    """What every connection's exchange shares: the credentials and the failure delays."""

    def __init__(self, credentials: CredentialStore, failure_delay_ms: int) -> None:
        self.credentials = credentials
        self.delays = FailureDelays(failure_delay_ms)


# -- the two requests, as both protocols answer them ---------------------------------------


def handshake(conn: Connection, mechanism: str) -> ErrorCode:
    """SaslHandshake: choose ``mechanism``; a refusal closes the connection after the answer."""
    sasl = conn.sasl
    if sasl is None or sasl.done or sasl.mechanism is not None:
        code = ErrorCode.ILLEGAL_SASL_STATE
    elif not sasl.choose(mechanism):
        code = ErrorCode.UNSUPPORTED_SASL_MECHANISM
    else:
        return ErrorCode.NONE
    conn.close_after_answer(f"SaslHandshake refused: {code.name}")
    return code


async def authenticate(conn: Connection, token: bytes) -> tuple[ErrorCode, str | None, bytes]:
    """SaslAuthenticate: one step of the exchange; (error, message, answer bytes). On success
    of the last step the connection's principal is set; a failure is delayed, logged and
    answered, then the connection closes."""
    sasl = conn.sasl
    if sasl is None or sasl.mechanism is None or sasl.done:
        conn.close_after_answer("SaslAuthenticate out of turn")
        message = "SaslAuthenticate before SaslHandshake, or after authentication"
        return ErrorCode.ILLEGAL_SASL_STATE, message, b""
    state = conn.ctx.security
    assert state is not None
    try:
        answer = await sasl.step(token)
    except SaslFailure as exc:
        delay_s = state.delays.failed(conn.host)
        conn.log.warning(
            "authentication failed",
            **sasl.log_fields(conn.peer),
            reason=str(exc),
            delay_ms=round(delay_s * 1000),
        )
        await anyio.sleep(delay_s)
        conn.close_after_answer("authentication failed")
        return ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b""
    if sasl.principal is not None:
        conn.principal = sasl.principal
        state.delays.succeeded(conn.host)
        conn.log.info("authenticated", principal=sasl.principal, mechanism=sasl.mechanism)
    return ErrorCode.NONE, None, answer
