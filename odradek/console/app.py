"""The console's HTTP side: a Starlette app with one HTML page per view and a JSON API.

Pages (``static/<page>.html``, each with its own small script, no inline code)::

    /                 topics (and "create topic")     /groups   consumer groups
    /topic?name=T     partitions, offsets, configs    /group?id=G   members, lag, reset
    /partition?topic=T&partition=P    offsets, size, log dir, segments (what is visible)
    /messages?topic=T&partition=P[&offset=N|&timestamp_ms=MS][&format=text|json|hex]
    /rates            produce / consume rates chart

The pages fetch ``/api/...`` (same names and parameters) and put every value into the DOM
with ``textContent``; nothing from the broker is ever parsed as HTML. Every response carries a
strict Content-Security-Policy (scripts, styles and fetches from this origin only; no inline
script, handler or style, no frames, no plugins), so markup that an escaping mistake let
into a page still could not run a script.

Writes (``POST /api/topics``, ``POST /api/group/reset``) take a JSON body with ``execute``:
``false`` is the preview the confirmation step shows, ``true`` does it. They require
``Content-Type: application/json`` and, when the browser sends one, an ``Origin`` equal to the
page's: a form on another site cannot post to them. Served on a loopback address, the
console answers only requests whose ``Host`` is a loopback name (no DNS rebinding). There is
no authentication: bind to loopback (the default) or put an authenticating proxy in front
(docs/console.md).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from odradek.client import AsyncAdmin, AsyncClient, TopicPartition
from odradek.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from odradek.console import views
from odradek.console.rates import RateSampler
from odradek.console.records import FORMATS

STATIC_DIR = Path(str(files("odradek.console") / "static"))
PAGES = ("topics", "topic", "partition", "messages", "groups", "group", "rates")
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
REQUEST_TIMEOUT_MS = 10_000  # per broker request, reconnection attempts included
MAX_BODY_BYTES = 64 * 1024  # of a write's JSON body
T = TypeVar("T")


class ConsoleState:
    """What the handlers share: the admin client, the fetch client, the rate sampler."""

    def __init__(
        self, bootstrap: str, rate_interval_ms: int, client_options: Mapping[str, Any]
    ) -> None:
        options = {
            "client_id": "odradek-console",
            "request_timeout_ms": REQUEST_TIMEOUT_MS,
            **client_options,
        }
        self.admin = AsyncAdmin(bootstrap, **options)
        self.client = AsyncClient(bootstrap, **options)
        self.sampler = RateSampler(self.admin, interval_ms=rate_interval_ms)


def json_response(body: Any, status_code: int = 200) -> Response:
    """JSON with ``ensure_ascii``: record text may hold lone surrogates from JSON escapes."""
    return Response(json.dumps(body), status_code, media_type="application/json")


def _handler(
    body: Callable[[ConsoleState, Request], Awaitable[Any]],
) -> Callable[[Request], Awaitable[Response]]:
    """An API endpoint: the view's dict as JSON; bad input is 400, broker errors name the
    Kafka error (400, or 502 when the broker cannot be reached)."""

    async def endpoint(request: Request) -> Response:
        try:
            return json_response(await body(request.app.state.console, request))
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            return json_response({"error": f"broker unreachable: {exc}"}, 502)
        except KafkaError as exc:
            return json_response({"error": str(exc)}, 400)
        except ValueError as exc:
            return json_response({"error": f"bad request: {exc}"}, 400)

    return endpoint


def _int(request: Request, name: str, default: int | None = None) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        if default is None:
            raise ValueError(f"missing parameter {name!r}")
        return default
    return int(text)


def _str(request: Request, name: str) -> str:
    text = request.query_params.get(name)
    if not text:
        raise ValueError(f"missing parameter {name!r}")
    return text


async def _json_body(request: Request) -> dict[str, Any]:
    """A write's body, refusing what a cross-site form or script could send."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise ValueError("writes need Content-Type: application/json")
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        raise ValueError("cross-origin write refused")
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ValueError("request body too large")
    body = json.loads(raw)
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body


def _field(body: dict[str, Any], name: str, kind: type[T]) -> T:
    """``body[name]`` as a ``kind`` (``int`` also from a numeric string); ValueError if not."""
    value = body.get(name)
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{name!r} must be a {kind.__name__}")
    return value


async def _topics(state: ConsoleState, request: Request) -> Any:
    return await views.topics_overview(state.admin)


async def _topic(state: ConsoleState, request: Request) -> Any:
    return await views.topic_detail(state.admin, _str(request, "name"))


async def _partition(state: ConsoleState, request: Request) -> Any:
    topic, partition = _str(request, "topic"), _int(request, "partition")
    return await views.partition_detail(state.admin, topic, partition)


async def _messages(state: ConsoleState, request: Request) -> Any:
    value_format = request.query_params.get("format") or "text"
    if value_format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    timestamp = request.query_params.get("timestamp_ms")
    offset = request.query_params.get("offset")
    return await views.read_messages(
        state.admin,
        state.client,
        TopicPartition(_str(request, "topic"), _int(request, "partition")),
        offset=int(offset) if offset else None,
        timestamp_ms=int(timestamp) if timestamp else None,
        limit=_int(request, "limit", 20),
        value_format=value_format,
        shown_bytes=min(_int(request, "shown_bytes", 2048), 65536),
    )


async def _create_topic(state: ConsoleState, request: Request) -> Any:
    body = await _json_body(request)
    configs = body.get("configs") or {}
    if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
        raise ValueError("configs must map names to string values")
    return await views.create_topic(
        state.admin,
        _field(body, "name", str),
        _field(body, "partitions", int),
        configs,
        execute=body.get("execute") is True,
    )


async def _groups(state: ConsoleState, request: Request) -> Any:
    return await views.groups_overview(state.admin)


async def _group(state: ConsoleState, request: Request) -> Any:
    return await views.group_detail(state.admin, _str(request, "id"))


async def _reset(state: ConsoleState, request: Request) -> Any:
    body = await _json_body(request)
    value = body.get("value")
    if value is not None and value != "" and not isinstance(value, (int, str)):
        raise ValueError("value must be a number")
    return await views.reset_group_offsets(
        state.admin,
        _field(body, "group_id", str),
        _field(body, "topic", str),
        _field(body, "target", str),
        None if value is None or value == "" else int(value),
        execute=body.get("execute") is True,
    )


async def _rates(state: ConsoleState, request: Request) -> Any:
    return state.sampler.series()


def _page(name: str) -> Callable[[Request], Awaitable[Response]]:
    async def page(request: Request) -> Response:
        return FileResponse(STATIC_DIR / f"{name}.html", media_type="text/html")

    return page


def create_app(
    bootstrap: str,
    *,
    rate_interval_ms: int = 2000,
    allowed_hosts: Iterable[str] | None = None,
    client_options: Mapping[str, Any] | None = None,
) -> Starlette:
    """The console for the broker at ``bootstrap`` (``host:port[,host:port...]``). Its
    lifespan opens the clients and runs the rate sampler; nothing connects before that.
    ``allowed_hosts``: the names a request's ``Host`` may carry (``None``: any);
    ``client_options``: the clients' (TLS, SASL)."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state = ConsoleState(bootstrap, rate_interval_ms, client_options or {})
        app.state.console = state
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(state.sampler.run)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()  # the sampler; the closes below run uncancelled
        finally:
            await state.admin.close()
            await state.client.close()

    routes = [
        Route("/", _page("topics")),
        *(Route(f"/{name}", _page(name)) for name in PAGES if name != "topics"),
        Route("/api/topics", _handler(_topics)),
        Route("/api/topics", _handler(_create_topic), methods=["POST"]),
        Route("/api/topic", _handler(_topic)),
        Route("/api/partition", _handler(_partition)),
        Route("/api/messages", _handler(_messages)),
        Route("/api/groups", _handler(_groups)),
        Route("/api/group", _handler(_group)),
        Route("/api/group/reset", _handler(_reset), methods=["POST"]),
        Route("/api/rates", _handler(_rates)),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(
        _Guard, allowed_hosts=None if allowed_hosts is None else frozenset(allowed_hosts)
    )
    return app


class _Guard:
    """ASGI middleware: refuses a ``Host`` not in ``allowed_hosts`` (``None``: any), which
    stops DNS rebinding (a page elsewhere whose name resolves to 127.0.0.1), and adds
    :data:`SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: Any, allowed_hosts: frozenset[str] | None) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if self.allowed_hosts is not None and host_name(host) not in self.allowed_hosts:
            refused = json_response({"error": f"host {host!r} refused"}, 400)
            await refused(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without the port: ``[::1]:8080`` -> ``::1``."""
    if host_header.startswith("["):
        return host_header[1:].partition("]")[0]
    return host_header.rpartition(":")[0] if ":" in host_header else host_header
