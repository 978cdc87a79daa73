"""Run the console: bind the listen address, print the URL, serve with uvicorn until
SIGINT/SIGTERM (uvicorn's graceful shutdown, then the app's lifespan closes the clients;
uvicorn then re-raises the signal, so the process ends as killed by it).

Bound to a loopback address, the console answers only ``Host: 127.0.0.1 | localhost |
[::1]`` (:class:`odradek.console.app._Guard`); bound elsewhere, any host name.

The socket is bound and listening before the URL is printed, so a caller that reads the
line (a test, a script) can connect at once: early connections wait in the backlog until
uvicorn accepts them. Port 0 binds an ephemeral port; the printed URL names the real one.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import Mapping
from typing import Any

LISTEN_BACKLOG = 128
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` into ``(host, port)``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv4 or IPv6)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def serve(
    bootstrap: str,
    listen: str,
    *,
    rate_interval_ms: int = 2000,
    client_options: Mapping[str, Any] | None = None,
) -> None:
    """Serve the console for the broker at ``bootstrap`` on ``listen`` until interrupted;
    ``client_options``: the clients' (TLS, SASL: :mod:`odradek.client.security`)."""
    import uvicorn

    from odradek.console.app import create_app

    host, port = parse_listen(listen)
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    loopback = ipaddress.ip_address(sock.getsockname()[0]).is_loopback
    app = create_app(
        bootstrap,
        rate_interval_ms=rate_interval_ms,
        allowed_hosts=LOOPBACK_NAMES if loopback else None,
        client_options=client_options,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    print(
        f"odradek console: http://{shown_host}:{bound_port}/ (broker {bootstrap})",
        file=sys.stdout,
        flush=True,
    )
    uvicorn.Server(config).run(sockets=[sock])
