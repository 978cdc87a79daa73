"""The broker process: start-up, the accept loop, background work, graceful shutdown.

Task tree (anyio structured concurrency; nothing outlives its group)::

    run()
    ├── group commit flusher            (broker.durability)
    ├── housekeeping                    periodic flush (flush.ms) and offset checkpoints
    ├── idle sweep                      closes connections idle for connections.max.idle.ms
    ├── signal watcher                  SIGTERM / SIGINT → shutdown()
    ├── metrics endpoint                GET /metrics (metrics.listener), if configured
    └── connections group
        └── Connection.serve() per client, each with its own waiting-request tasks

Start-up: load every log dir (recovery if the last shutdown was unclean) in a worker thread,
then listen. The broker process (:func:`run_server`) then moves every object that start-up
left alive into the cyclic garbage collector's permanent generation (``gc.freeze()``): a full
collection no longer walks the modules, logs and indexes that live as long as the process
(~50,000 objects, 32-45 ms on this machine's 2-core VM, every few seconds under load), which
stalled every produce and fetch for as long. Frozen objects still free by reference counting
(a deleted partition's do); any that later end up in an unreachable reference cycle stay in
memory until the process exits. Partitions created while the broker runs are not frozen (~30
objects each: 1,000 of them bring a full collection back to 7-13 ms) until the next start;
freezing again at run time would also freeze whatever requests were in flight.

Shutdown (SIGTERM, SIGINT, or :meth:`Server.shutdown`): stop accepting, stop
reading requests, let in-flight requests finish (waiting fetches answer at once; at most
``shutdown_grace_s``), then flush every log, write checkpoints and ``.kafka_cleanshutdown``,
release the ``.lock`` files.
"""

from __future__ import annotations

import functools
import gc
import signal
import socket
import ssl
import time
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from odradek.broker.admin import AdminApi
from odradek.broker.cleanup import run_cleanup
from odradek.broker.config import BrokerConfig, Listener
from odradek.broker.connection import Apis, Connection, Transport
from odradek.broker.context import BrokerContext
from odradek.broker.data import DataApi
from odradek.broker.groups.api import GroupApi
from odradek.broker.listeners import ListenError
from odradek.broker.logs import get_logger
from odradek.broker.metrics import BrokerMetrics, registry_for
from odradek.broker.metrics_http import serve_metrics
from odradek.broker.net import PlainTransport, close_socket, listen
from odradek.broker.security.authorizer import Authorizer
from odradek.broker.security.sasl import SaslState
from odradek.broker.security.tls import TlsTransport, server_context
from odradek.storage.acls import AclStore
from odradek.storage.credentials import CredentialStore
from odradek.storage.errors import StorageError
from odradek.storage.manager import LogManager

__all__ = ["Server", "run_server"]

LONG_MAX = 0x7FFF_FFFF_FFFF_FFFF
_ACCEPT_BACKOFF_S = 0.1  # after accept() fails for lack of file descriptors or memory


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Server:
    def __init__(
        self, config: BrokerConfig, *, shutdown_grace_s: float = 30.0, freeze_gc: bool = False
    ) -> None:
        self.config = config
        self.freeze_gc = freeze_gc  # the broker process's own; never in a process that embeds it
        self.log = get_logger("odradek.broker")
        self.shutdown_grace_s = shutdown_grace_s
        self.manager = LogManager(
            config.log_dirs,
            config.log_config(),
            node_id=config.node_id,
            clock_ms=wall_clock_ms,
            max_partitions=config.int("max.broker.partitions"),
        )
        self.connections: set[Connection] = set()
        self.listener: Listener | None = None  # the bound address, once listening
        self._accept_scope: anyio.CancelScope | None = None  # created inside the event loop
        self._stop_requested = False
        self._ctx: BrokerContext | None = None
        # counted on the data path only when there is an endpoint to read them
        self.metrics = BrokerMetrics() if config.metrics_listener is not None else None
        self.metrics_port: int | None = None  # the endpoint's bound port, once listening

    @property
    def context(self) -> BrokerContext | None:
        """The running broker's shared state (None before start-up finishes)."""
        return self._ctx

    def shutdown(self) -> None:
        """Begin a graceful shutdown (idempotent; from the event loop's thread)."""
        self._stop_requested = True
        if self._accept_scope is not None:
            self._accept_scope.cancel()

    async def run(
        self,
        *,
        handle_signals: bool = False,
        task_status: anyio.abc.TaskStatus[Listener] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until :meth:`shutdown` (or SIGTERM/SIGINT, with ``handle_signals``)."""
        async with anyio.create_task_group() as signals:
            if handle_signals:  # before start-up: a signal at any time is a clean shutdown
                await signals.start(self._watch_signals)
            try:
                await self._run(task_status)
            finally:
                signals.cancel_scope.cancel()

    async def _run(self, task_status: anyio.abc.TaskStatus[Listener]) -> None:
        started = time.perf_counter()
        tls = server_context(self.config) if any(b.tls for b in self.config.listeners) else None
        await anyio.to_thread.run_sync(self.manager.startup)
        sockets: list[tuple[socket.socket, Listener]] = []
        try:
            for bind in self.config.listeners:
                try:
                    sock = listen(bind.host, bind.port)
                except OSError as exc:
                    raise ListenError(f"cannot listen on {bind}: {exc.strerror or exc}") from None
                sockets.append((sock, self._advertise(bind, sock.getsockname()[1])))
            self.listener = sockets[0][1]
            ctx = self._ctx = BrokerContext(self.config, self.manager, self.log, self.metrics)
            ctx.advertised_listener = self.listener
            if self.config["authorizer.class.name"]:
                ctx.authorizer = Authorizer(
                    AclStore(self.manager.online_dirs),
                    self.config["super.users"],  # type: ignore[arg-type]
                    bool(self.config["allow.everyone.if.no.acl.found"]),
                )
            ctx.security = SaslState(
                CredentialStore(self.manager.online_dirs),
                self.config.int("connection.failed.authentication.delay.ms"),
            )
            groups = ctx.groups = GroupApi(ctx)
            await groups.load()  # replays __consumer_offsets in a worker thread
            if self.freeze_gc:
                gc.collect()  # start-up's garbage is not frozen for good
                gc.freeze()
            async with anyio.create_task_group() as background:
                await self._start_metrics(background)
                self.log.info(
                    "broker started",
                    host=self.config.listener.host,
                    port=sockets[0][0].getsockname()[1],
                    listeners={b.name: s.getsockname()[1] for s, b in sockets},
                    advertised=[str(listener) for _, listener in sockets],
                    metrics_port=self.metrics_port,
                    log_dirs=[str(d) for d in self.manager.log_dirs],
                    offline_dirs={str(d): why for d, why in self.manager.offline_dirs.items()},
                    partitions=len(self.manager.partitions.logs),
                    startup_ms=round((time.perf_counter() - started) * 1000, 1),
                )
                task_status.started(self.listener)
                background.start_soon(ctx.group_commit.run)
                background.start_soon(self._housekeeping, ctx)
                background.start_soon(
                    self._close_idle_connections,
                    self.config.int("connections.max.idle.ms") / 1000,
                )
                background.start_soon(run_cleanup, ctx)
                background.start_soon(groups.run)
                await self._serve_connections(ctx, sockets, tls)
                background.cancel_scope.cancel()
        finally:
            for sock, _ in sockets:
                close_socket(sock)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.manager.shutdown)
            self.log.info("broker stopped")

    async def _start_metrics(self, group: anyio.abc.TaskGroup) -> None:
        """Serve ``GET /metrics`` in ``group`` if ``metrics.listener`` names an address."""
        listener = self.config.metrics_listener
        if listener is None or self.metrics is None:
            return
        registry = registry_for(self, self.metrics)
        self.metrics_port = await group.start(serve_metrics, listener, registry, self.log)

    def _advertise(self, bind: Listener, port: int) -> Listener:
        """What clients of the listener ``bind`` (bound to ``port``) are told to connect to;
        an advertised port 0, or no advertised entry, means the bound port."""
        advertised = self.config.advertised(bind)
        if advertised.port == 0 or advertised == bind:
            advertised = advertised.with_port(port)
        return advertised

    async def _serve_connections(
        self,
        ctx: BrokerContext,
        sockets: list[tuple[socket.socket, Listener]],
        tls: ssl.SSLContext | None,
    ) -> None:
        apis = Apis(AdminApi(ctx), DataApi(ctx), ctx.groups)
        self._accept_scope = anyio.CancelScope()
        if self._stop_requested:
            self._accept_scope.cancel()
        async with anyio.create_task_group() as group:
            with self._accept_scope:
                async with anyio.create_task_group() as acceptors:
                    for sock, listener in sockets:
                        acceptors.start_soon(self._accept, ctx, apis, sock, listener, tls, group)
            self.log.info("shutting down", connections=len(self.connections))
            for conn in list(self.connections):
                conn.stop_reading()
            ctx.begin_shutdown()  # long-poll fetches answer now instead of at max_wait_ms
            with anyio.move_on_after(self.shutdown_grace_s) as grace:
                while self.connections:
                    await anyio.sleep(0.01)
            if grace.cancelled_caught:
                group.cancel_scope.cancel()

    async def _accept(
        self,
        ctx: BrokerContext,
        apis: Apis,
        listening: socket.socket,
        listener: Listener,
        tls: ssl.SSLContext | None,
        group: anyio.abc.TaskGroup,
    ) -> None:
        """Accept connections on one listener until cancelled, each served in ``group``."""
        max_connections = self.config.int("max.connections")
        mapping_rules = str(self.config["ssl.principal.mapping.rules"])
        while True:
            await anyio.wait_readable(listening)
            try:
                sock, address = listening.accept()
            except (BlockingIOError, ConnectionAbortedError):
                continue
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: out of resources
                await self._accept_failed(exc)
                continue
            if len(self.connections) >= max_connections:
                self.log.warning(
                    "refusing connection: max.connections reached",
                    peer=f"{address[0]}:{address[1]}",
                    limit=max_connections,
                )
                sock.close()
                if self.metrics is not None:
                    self.metrics.connections_refused += 1
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            transport: Transport = PlainTransport(sock)
            if listener.tls and tls is not None:
                transport = TlsTransport(tls, sock, mapping_rules)
            conn = Connection(
                ctx,
                transport,
                f"{address[0]}:{address[1]}",
                apis=apis,
                listener=listener,
                max_frame_bytes=self.config.int("socket.request.max.bytes"),
                idle_timeout_s=self.config.int("connections.max.idle.ms") / 1000,
            )
            group.start_soon(self._run_connection, conn)

    async def _accept_failed(self, error: OSError) -> None:
        """Kafka's acceptor on EMFILE: say so, back off (the listener stays readable, so
        retrying at once would spin), keep serving the connections already open."""
        self.log.warning(
            "accept failed, backing off",
            error=str(error),
            connections=len(self.connections),
            backoff_ms=round(_ACCEPT_BACKOFF_S * 1000),
        )
        await anyio.sleep(_ACCEPT_BACKOFF_S)

    async def _close_idle_connections(self, idle_timeout_s: float) -> None:
        """Kafka's ``connections.max.idle.ms``: sweep the connections a few times per timeout
        (at least every 10 s) and close those idle that long (:meth:`Connection.close_if_idle`)."""
        interval_s = min(max(idle_timeout_s / 4, 0.01), 10.0)
        while True:
            await anyio.sleep(interval_s)
            now_s = time.monotonic()
            for conn in list(self.connections):
                conn.close_if_idle(now_s)

    async def _run_connection(self, conn: Connection) -> None:
        self.connections.add(conn)
        try:
            await conn.serve()
        except Exception:  # a bug in one connection must never take the broker down
            self.log.exception("connection failed", peer=conn.peer)
        finally:
            self.connections.discard(conn)

    async def _housekeeping(self, ctx: BrokerContext) -> None:
        """Kafka's periodic log flush (``flush.ms``) and offset checkpoints."""
        checkpoint_every_ms = self.config.int("log.flush.offset.checkpoint.interval.ms")
        scheduler_ms = self.config.int("log.flush.scheduler.interval.ms")
        tick_s = min(checkpoint_every_ms, scheduler_ms, 1000) / 1000
        next_checkpoint_ms = wall_clock_ms() + checkpoint_every_ms
        last_flush_ms: dict[int, int] = {}
        while True:
            await anyio.sleep(tick_s)
            now = wall_clock_ms()
            for log in list(self.manager.partitions.logs.values()):
                flushed = last_flush_ms.setdefault(id(log), now)
                if log.config.flush_ms < LONG_MAX and now - flushed >= log.config.flush_ms:
                    last_flush_ms[id(log)] = now
                    ctx.group_commit.flush_soon(log)
            if now >= next_checkpoint_ms:
                next_checkpoint_ms = now + checkpoint_every_ms
                await ctx.checkpoint()

    async def _watch_signals(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                self.log.info("signal received", signal=signal.Signals(signum).name)
                self.shutdown()


def run_server(config: BrokerConfig, *, backend: str = "asyncio") -> None:
    """Run a broker until SIGTERM/SIGINT: asyncio with uvloop (if installed) or trio."""
    server = Server(config, freeze_gc=True)
    options: dict[str, Any] = {}
    if backend == "asyncio":
        try:
            import uvloop  # noqa: F401

            options["use_uvloop"] = True
        except ImportError:
            pass
    try:
        anyio.run(
            functools.partial(server.run, handle_signals=True),
            backend=backend,
            backend_options=options,
        )
    except BaseExceptionGroup as group:  # task groups wrap a start-up failure: unwrap it
        sole = _sole_exception(group)
        if isinstance(sole, StorageError | ListenError):
            raise sole from None
        raise


def _sole_exception(group: BaseExceptionGroup) -> BaseException | None:
    """The one exception inside nested groups, or None if there are several."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves[0] if len(leaves) == 1 else None
