"""Connecting securely: TLS and SASL for every client, with the option names of Kafka's Python
clients (kafka-python, aiokafka), and Kafka's client properties mapped onto them.

Options (fields of :class:`~odradek.client.config.ClientConfig`)::

    security_protocol     PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL (the listener's protocol)
    ssl_context           an ssl.SSLContext used as it is (the ssl_* files below are then unused)
    ssl_cafile            PEM CA certificates that sign the broker's (None: the system's)
    ssl_certfile          PEM certificate chain of the client, for mutual TLS
    ssl_keyfile           its PEM private key (None: in ssl_certfile)
    ssl_password          the key's password, if it is encrypted
    ssl_check_hostname    the broker's certificate must name the host connected to (True)
    sasl_mechanism        PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl_plain_username, sasl_plain_password   (the names kafka-python uses for every mechanism)

A new connection, in order: TCP; the TLS handshake (``SSL``, ``SASL_SSL``: TLS 1.2 or later,
the broker's certificate verified); the native protocol's preface; SASL (``SASL_*``):
SaslHandshake with the mechanism, then SaslAuthenticate with each token of
:func:`odradek.protocol.sasl.client_tokens` until the mechanism is done; then the usual
ApiVersions and Metadata. The TLS context is built once, when the config is made, so a
missing or unreadable file is a ``ValueError`` naming the option at construction.

Failures are final, not retried as a lost connection is: a certificate the client does not
trust (or that does not name the host) raises
:class:`~odradek.client.errors.SslAuthenticationError`; a refused mechanism
``UnsupportedSaslMechanismError``; wrong credentials ``SaslAuthenticationFailedError``. No
password is kept in the config's ``repr`` or put in an error message.
"""

from __future__ import annotations

import re
import secrets
import ssl
from collections.abc import Collection, Generator, Mapping
from typing import Any, NamedTuple

from odradek.client.drivers import Call
from odradek.client.errors import (
    KafkaConnectionError,
    KafkaError,
    SslAuthenticationError,
    for_code,
)
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.sasl import SaslFailure, client_tokens

__all__ = [
    "SECURITY_PROTOCOLS",
    "SaslAnswer",
    "authenticate_op",
    "check_choice",
    "check_security",
    "connect_failure",
    "options_from_properties",
    "sasl_exchange",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def uses_sasl(config: Any) -> bool:
    return config.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def check_choice(option: str, value: Any, choices: Collection[Any]) -> None:
    """Raise ``ValueError`` naming ``option`` if ``value`` is not one of ``choices`` (every
    option of a fixed set of values, here and in :mod:`odradek.client.config`)."""
    if value not in choices:
        raise ValueError(f"{option} must be one of {', '.join(map(repr, choices))}, not {value!r}")


def check_security(config: Any) -> ssl.SSLContext | None:
    """Validate the security options of ``config`` (a ClientConfig being made) and return its
    TLS context (``None`` without TLS). Raises ``ValueError`` naming the option."""
    protocol = config.security_protocol
    check_choice("security_protocol", protocol, SECURITY_PROTOCOLS)
    if uses_sasl(config):
        check_choice("sasl_mechanism", config.sasl_mechanism, SASL_MECHANISMS)
        if not config.sasl_plain_username or config.sasl_plain_password is None:
            raise ValueError(
                f"security_protocol {protocol} needs sasl_plain_username and sasl_plain_password"
            )
    if protocol not in ("SSL", "SASL_SSL"):
        return None
    if config.ssl_context is not None:
        if not isinstance(config.ssl_context, ssl.SSLContext):
            raise ValueError(f"ssl_context must be an ssl.SSLContext, not {config.ssl_context!r}")
        return config.ssl_context  # type: ignore[no-any-return]
    return _tls_context(config)


def _tls_context(config: Any) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=config.ssl_cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ssl_cafile {config.ssl_cafile!r}: {_reason(exc)}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = bool(config.ssl_check_hostname)
    if config.ssl_certfile:
        try:
            context.load_cert_chain(
                config.ssl_certfile, config.ssl_keyfile, password=config.ssl_password
            )
        except (OSError, ssl.SSLError) as exc:
            # the key's password is never in the message: the files are named, not their content
            raise ValueError(
                f"ssl_certfile {config.ssl_certfile!r} / ssl_keyfile {config.ssl_keyfile!r}: "
                f"{_reason(exc)}"
            ) from None
    elif config.ssl_keyfile:
        raise ValueError("ssl_keyfile needs ssl_certfile (the client's certificate)")
    return context


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)


def connect_failure(host: str, port: int, exc: BaseException) -> KafkaError:
    """The error for a connection that could not be made: a TLS handshake the client refused
    (or the broker did) is final (:class:`SslAuthenticationError`); anything else is a
    retriable ``KafkaConnectionError``."""
    cause = exc.__cause__ if isinstance(exc.__cause__, ssl.SSLError) else exc
    if isinstance(cause, ssl.SSLError):
        return SslAuthenticationError(f"TLS handshake with {host}:{port} failed: {_reason(cause)}")
    return KafkaConnectionError(f"cannot connect to {host}:{port}: {str(exc) or repr(exc)}")


class SaslAnswer(NamedTuple):
    """The broker's answer to one SASL request, whichever protocol carried it."""

    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""


def sasl_exchange(config: Any) -> Generator[tuple[int, Any], SaslAnswer, None]:
    """The client's SASL exchange, for any wire protocol: yields ``(api_key, argument)`` —
    SaslHandshake (17) with the mechanism, then SaslAuthenticate (36) with each token — and is
    sent each :class:`SaslAnswer`; returns when the mechanism is done. Raises the error the
    broker's code names (``UnsupportedSaslMechanismError``, ``SaslAuthenticationFailedError``)
    or ``SaslAuthenticationFailedError`` when the broker does not prove it knows the
    credential."""
    mechanism = config.sasl_mechanism
    answer = yield m.ApiKey.SASL_HANDSHAKE, mechanism
    if answer.error_code:
        raise for_code(answer.error_code, answer.error_message)
    tokens = client_tokens(
        mechanism, config.sasl_plain_username, config.sasl_plain_password, secrets.token_urlsafe(18)
    )
    try:
        token = next(tokens)
        while True:
            answer = yield m.ApiKey.SASL_AUTHENTICATE, token
            if answer.error_code:
                raise for_code(answer.error_code, answer.error_message)
            token = tokens.send(answer.auth_bytes)
    except StopIteration:
        return
    except SaslFailure as exc:  # the broker did not prove it knows the credential
        raise for_code(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None


def authenticate_op(config: Any) -> Generator[Call, Any, None]:
    """SASL on a new connection over the native protocol (nothing without ``SASL_*``): the
    :func:`sasl_exchange` as native SaslHandshake and SaslAuthenticate calls, to that
    connection only."""
    if not uses_sasl(config):
        return
    exchange = sasl_exchange(config)
    try:
        api_key, argument = next(exchange)
        while True:
            if api_key == m.ApiKey.SASL_HANDSHAKE:
                resp, _ = yield Call(m.SaslHandshakeRequest(correlation_id=0, mechanism=argument))
                enabled = ", ".join(resp.mechanisms) or "none"
                message = f"the broker refused SASL mechanism {argument} (enabled: {enabled})"
                answer = SaslAnswer(resp.error_code, message)
            else:
                request = m.SaslAuthenticateRequest(correlation_id=0, auth_bytes=argument)
                resp, _ = yield Call(request)
                answer = SaslAnswer(resp.error_code, resp.error_message, bytes(resp.auth_bytes))
            api_key, argument = exchange.send(answer)
    except StopIteration:
        return


# -- Kafka's client properties ----------------------------------------------------------------
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_PEM_ONLY = ("ssl.truststore.type", "ssl.keystore.type")
# Kafka (Java) and librdkafka property -> option
_PROPERTIES = {
    "security.protocol": "security_protocol",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.ca.location": "ssl_cafile",
    "ssl.keystore.location": "ssl_certfile",  # PEM: the key and the chain in one file
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.keystore.password": "ssl_password",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
}
# accepted and without effect here (Java's store passwords guard JKS files, not PEM)
_IGNORED = frozenset(("ssl.truststore.password", "ssl.enabled.protocols", "ssl.protocol"))


def options_from_properties(properties: Mapping[str, str]) -> dict[str, Any]:
    """Kafka client properties (``security.protocol=SASL_SSL``, ``ssl.truststore.location``,
    ``sasl.jaas.config``, librdkafka's ``ssl.ca.location`` / ``sasl.username``, ...) as this
    client's options. Raises ``ValueError`` naming a property it does not know (a typo must
    not silently connect without TLS) or a store type other than PEM."""
    options: dict[str, Any] = {}
    for key, value in properties.items():
        if key in _PROPERTIES:
            name = _PROPERTIES[key]
            options[name] = int(value) if name.endswith("_ms") else value
        elif key == "ssl.endpoint.identification.algorithm":
            options["ssl_check_hostname"] = value.strip().lower() == "https"
        elif key == "sasl.jaas.config":
            fields = dict(_JAAS_FIELD.findall(value))
            options.setdefault("sasl_plain_username", fields.get("username"))
            options.setdefault("sasl_plain_password", fields.get("password"))
        elif key in _PEM_ONLY:
            if value.upper() != "PEM":
                raise ValueError(f"{key}={value}: only PEM files are supported")
        elif key not in _IGNORED:
            raise ValueError(f"unknown client property {key!r}")
    for name in ("security_protocol", "sasl_mechanism"):
        if name in options:
            options[name] = options[name].upper()
    return options
