"""The security keys of ``server.properties``, Kafka's names and meanings.

TLS (listeners whose protocol is ``SSL`` or ``SASL_SSL``)::

    ssl.keystore.type=PEM                 only PEM (JKS and PKCS12 are Java's stores)
    ssl.keystore.location=server.pem      the private key and the certificate chain, PEM
    ssl.key.password=...                  the private key's password, if it is encrypted
    ssl.truststore.type=PEM
    ssl.truststore.location=ca.pem        the CAs client certificates are checked against
    ssl.client.auth=none                  none | requested | required (mutual TLS)
    ssl.enabled.protocols=TLSv1.2,TLSv1.3 nothing older is accepted
    ssl.principal.mapping.rules=DEFAULT   a client certificate's subject -> principal name

SASL (listeners whose protocol is ``SASL_PLAINTEXT`` or ``SASL_SSL``)::

    sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512   and/or PLAIN
    connection.failed.authentication.delay.ms=100         the least a failure is delayed

ACLs (broker/security/authorizer.py)::

    authorizer.class.name=kafka.security.authorizer.AclAuthorizer   empty: no ACLs (default)
    allow.everyone.if.no.acl.found=false   a resource no ACL names: allowed to all, or to none
    super.users=User:admin;User:ops        may do anything

``ssl.keystore.password`` and ``ssl.truststore.password`` are accepted (a configuration
copied from a Kafka broker has them) and unused: PEM files are not password-protected as a
whole. Values of :data:`SECRET_KEYS` never appear in a log line or an error message.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SASL_MECHANISMS", "SECRET_KEYS", "SECURITY_KEYS"]

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECRET_KEYS = frozenset({"ssl.key.password", "ssl.keystore.password", "ssl.truststore.password"})
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        if value.lower() not in (a.lower() for a in allowed):
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return next(a for a in allowed if a.lower() == value.lower())

    return parse


def _names(allowed: tuple[str, ...], what: str) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise ValueError(
                f"{what} {', '.join(unknown)} not supported (supported: {', '.join(allowed)})"
            )
        return names

    return parse


def _principals(text: str) -> frozenset[str]:
    """``User:alice;User:bob`` (Kafka's separator is ``;``: a name may hold a comma)."""
    principals = [p.strip() for p in text.split(";") if p.strip()]
    for principal in principals:
        kind, sep, name = principal.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected TYPE:name (User:alice), got {principal!r}")
    return frozenset(principals)


def _path_or_empty(text: str) -> str:
    return text.strip()


def _authorizer(text: str) -> str:
    from odradek.broker.security.authorizer import KNOWN_AUTHORIZERS

    name = text.strip()
    if name and name not in KNOWN_AUTHORIZERS:
        raise ValueError(
            f"must be empty (no ACLs) or one of {', '.join(sorted(KNOWN_AUTHORIZERS))}"
        )
    return name


def _bool(text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise ValueError("must be true or false")
    return text.strip().lower() == "true"


def _delay_ms(text: str) -> int:
    value = int(text.strip())
    if not 0 <= value <= 60_000:
        raise ValueError("must be in [0, 60000]")
    return value


def _mapping_rules(text: str) -> str:
    from odradek.broker.security.principal import parse_mapping_rules

    parse_mapping_rules(text)  # raises ValueError naming the bad rule
    return text.strip()


# name -> (parser, default as text), merged into the broker's key table
SECURITY_KEYS: dict[str, tuple[Callable[[str], object], str | None]] = {
    "ssl.keystore.type": (_choice("PEM"), "PEM"),
    "ssl.keystore.location": (_path_or_empty, ""),
    "ssl.keystore.password": (str, None),
    "ssl.key.password": (str, None),
    "ssl.truststore.type": (_choice("PEM"), "PEM"),
    "ssl.truststore.location": (_path_or_empty, ""),
    "ssl.truststore.password": (str, None),
    "ssl.client.auth": (_choice("none", "requested", "required"), "none"),
    "ssl.enabled.protocols": (_names(TLS_VERSIONS, "TLS versions"), ",".join(TLS_VERSIONS)),
    "ssl.principal.mapping.rules": (_mapping_rules, "DEFAULT"),
    "sasl.enabled.mechanisms": (
        _names(SASL_MECHANISMS, "SASL mechanisms"),
        "SCRAM-SHA-256,SCRAM-SHA-512",
    ),
    "connection.failed.authentication.delay.ms": (_delay_ms, "100"),
    "super.users": (_principals, ""),
    "authorizer.class.name": (_authorizer, ""),
    "allow.everyone.if.no.acl.found": (_bool, "false"),
}
