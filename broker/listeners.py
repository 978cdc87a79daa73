"""Listeners as Kafka names them: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``.

``listeners=PLAINTEXT://127.0.0.1:9092,SSL://0.0.0.0:9093`` is a comma-separated list of
``NAME://host:port``. A name is one of Kafka's security protocols (``PLAINTEXT``, ``SSL``,
``SASL_PLAINTEXT``, ``SASL_SSL``) or a name of the operator's (``INTERNAL``, ``EXTERNAL``)
that ``listener.security.protocol.map`` (``INTERNAL:SSL,EXTERNAL:SASL_SSL``) maps to one.
Names and ports are unique (port 0, an ephemeral port, may repeat). ``advertised.listeners``
names, per listener name, what the Metadata response tells clients to connect to; a listener
it does not name advertises its own address, and an advertised port 0 advertises the port
that was bound.

Every connection knows the listener it came in on: its security protocol decides whether it
speaks TLS and whether it must authenticate with SASL before anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "SECURITY_PROTOCOLS",
    "ListenError",
    "Listener",
    "parse_listeners",
    "parse_protocol_map",
    "resolve_listeners",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# NAME://host:port; a host may be empty (every address) or an IPv6 address in brackets.
# (Not urlsplit: "_" is not allowed in a URL scheme, and SASL_SSL has one.)
_LISTENER = re.compile(
    r"(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[0-9A-Fa-f:.]*\]|[^:/\[\]]*):(?P<port>\d+)/?"
)
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)


class ListenError(Exception):
    """A listener's address cannot be bound (taken by another process, not this host's, a port
    below 1024 without the right): the broker does not start. The message names the listener
    and the system's reason."""


@dataclass(frozen=True)
class Listener:
    """One address the broker listens on (or advertises), with its name and protocol."""

    host: str
    port: int
    name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def with_port(self, port: int) -> Listener:
        return Listener(self.host, port, self.name, self.security_protocol)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_listeners(text: str) -> tuple[Listener, ...]:
    """``NAME://host:port,...`` as written; protocols are resolved later
    (:func:`resolve_listeners`), once ``listener.security.protocol.map`` is known."""
    listeners = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _LISTENER.fullmatch(item)
        if match is None or int(match["port"]) > 65535:
            raise ValueError(f"expected NAME://host:port, got {item!r}")
        host = match["host"].strip("[]") or "0.0.0.0"
        listeners.append(Listener(host, int(match["port"]), match["name"].upper(), ""))
    if not listeners:
        raise ValueError("names no listener")
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ValueError(f"each listener name may appear once, got {names}")
    ports = [listener.port for listener in listeners if listener.port != 0]
    if len(set(ports)) != len(ports):
        raise ValueError(f"each port may appear once, got {ports}")
    return tuple(listeners)


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` (Kafka's ``listener.security.protocol.map``)."""
    mapping = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ValueError(f"expected NAME:PROTOCOL, got {item!r}")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"{protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        mapping[name] = protocol
    return mapping


def resolve_listeners(
    listeners: tuple[Listener, ...], protocol_map: dict[str, str], key: str
) -> tuple[Listener, ...]:
    """``listeners`` with each one's security protocol from ``protocol_map``; a name the map
    does not know is a ``ValueError`` naming it and ``key`` (the config key it came from)."""
    resolved = []
    for listener in listeners:
        protocol = protocol_map.get(listener.name)
        if protocol is None:
            raise ValueError(
                f"{key}: listener name {listener.name!r} is not in "
                f"listener.security.protocol.map ({', '.join(protocol_map)})"
            )
        resolved.append(Listener(listener.host, listener.port, listener.name, protocol))
    return tuple(resolved)
