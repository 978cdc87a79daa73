"""The metrics endpoint: ``GET /metrics`` over HTTP/1.1, for a Prometheus server to scrape.

A task of the server's task group (``metrics.listener``, e.g. ``http://127.0.0.1:9644``; empty
turns it off). HTTP is h11's (sans-I/O, as the broker's own protocols); this module only moves
bytes between a socket and h11 and answers:

- ``GET /metrics`` (or ``HEAD``): 200 and the registry's text, in the format the ``Accept``
  header asks for (prometheus_client's negotiation: text 0.0.4 by default, OpenMetrics);
- any other path: 404; any other method: 405; a request h11 cannot parse: 400, then close.

Each connection is served by a task of its own and closed after ``_IDLE_TIMEOUT_S`` without a
request, after an error, or when the client asks; a request head larger than h11's limit
(16 KiB) is refused by h11. The scrape itself (``generate_latest``) runs on the event loop: it
reads the broker's state without locks (:mod:`odradek.broker.metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import anyio.abc
import h11
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from odradek.broker.config import Listener
from odradek.broker.listeners import ListenError

__all__ = ["serve_metrics"]

_IDLE_TIMEOUT_S = 30.0
_READ_BYTES = 16 * 1024


async def serve_metrics(
    listener: Listener,
    registry: CollectorRegistry,
    log: Any,
    *,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; ``task_status.started`` gets the bound port."""
    try:
        server = await anyio.create_tcp_listener(local_host=listener.host, local_port=listener.port)
    except OSError as exc:
        where = f"{listener.host}:{listener.port}"
        raise ListenError(
            f"cannot listen on metrics.listener {where}: {exc.strerror or exc}"
        ) from None
    async with server:
        port = server.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started(port)
        await server.serve(lambda stream: _serve_connection(stream, registry, log))


async def _serve_connection(
    stream: anyio.abc.SocketStream, registry: CollectorRegistry, log: Any
) -> None:
    conn = h11.Connection(h11.SERVER)
    async with stream:
        try:
            while True:
                event = await _next_event(conn, stream)
                if event is None:
                    return
                if isinstance(event, h11.Request):
                    await _respond(conn, stream, event, registry)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                await _send(conn, stream, 400, b"bad request\n", close=True)
            log.info("metrics request refused", reason=str(exc))
        except (anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            return


async def _next_event(conn: h11.Connection, stream: anyio.abc.SocketStream) -> h11.Event | None:
    """The next request event, reading as needed; None at EOF or after the idle timeout."""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            with anyio.move_on_after(_IDLE_TIMEOUT_S):
                try:
                    data = await stream.receive(_READ_BYTES)
                except anyio.EndOfStream:
                    data = b""
                conn.receive_data(data)
                continue
            return None
        if isinstance(event, h11.ConnectionClosed):
            return None
        if isinstance(event, h11.Request | h11.EndOfMessage):
            return event
        # Data (a body we ignore) and PAUSED: keep reading


async def _respond(
    conn: h11.Connection,
    stream: anyio.abc.SocketStream,
    request: h11.Request,
    registry: CollectorRegistry,
) -> None:
    path = request.target.split(b"?", 1)[0]
    if request.method not in (b"GET", b"HEAD"):
        await _send(conn, stream, 405, b"only GET\n", extra=[(b"allow", b"GET, HEAD")])
    elif path != b"/metrics":
        await _send(conn, stream, 404, b"the metrics are at /metrics\n")
    else:
        accept = b", ".join(v for k, v in request.headers if k == b"accept").decode("latin-1")
        encode, content_type = choose_encoder(accept)  # the format the scraper asks for
        body = encode(registry)
        await _send(
            conn,
            stream,
            200,
            b"" if request.method == b"HEAD" else body,
            content_type=content_type.encode(),
            length=len(body),
        )


async def _send(
    conn: h11.Connection,
    stream: anyio.abc.SocketStream,
    status: int,
    body: bytes,
    *,
    content_type: bytes = b"text/plain; charset=utf-8",
    length: int | None = None,
    extra: Sequence[tuple[bytes, bytes]] = (),
    close: bool = False,
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body) if length is None else length).encode()),
        *extra,
    ]
    if close:
        headers.append((b"connection", b"close"))
    data = conn.send(h11.Response(status_code=status, headers=headers))
    if body:
        data += conn.send(h11.Data(data=body))
    data += conn.send(h11.EndOfMessage())
    await stream.send(data)
