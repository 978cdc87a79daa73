"""The low-level client written once (sans-I/O, the h11 model: no sockets here):
:class:`ClientCore`, its constructor, bootstrap, reconnection and retries as operations that
the blocking and async clients drive (:mod:`odradek.client.drivers`), over connections that
each drive a :class:`~odradek.client.protocol_core.ProtocolCore`.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from odradek.client.config import ClientConfig, options_of, parse_bootstrap
from odradek.client.drivers import Sleep, operation
from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError
from odradek.client.ops import (
    Op,
    fetch_op,
    handshake_op,
    list_offsets_op,
    metadata_op,
)
from odradek.client.security import authenticate_op
from odradek.client.types import (
    ClusterMetadata,
    FetchedPartition,
    OffsetAndTimestamp,
    TopicPartition,
)
from odradek.protocol import messages as m
from odradek.protocol.frames import Buffer

T = TypeVar("T")

__all__ = ["ClientCore", "parse_bootstrap"]


class _Open(NamedTuple):
    host: str
    port: int
    timeout_s: float
    verb = "_open"  # the face: a new connection, or KafkaConnectionError


class _Exchange(NamedTuple):
    conn: Any
    request: m.Request
    raw: Buffer | Sequence[Buffer]
    timeout_s: float
    verb = "_exchange"  # the face: conn.exchange(request, raw, timeout_s)


class _Discard(NamedTuple):
    conn: Any
    verb = "_discard"  # the face: close conn


class _Connection(NamedTuple):
    deadline_s: float | None  # by when (time.monotonic()) a new one must be made
    verb = "connection"  # the face: its live connection, bootstrapping one if needed


class ClientCore:
    """A connection to one broker, made lazily and remade after a loss, over which any
    request can be sent (pipelined): the base of :class:`odradek.client.blocking_client.Client`
    and :class:`odradek.client.async_client.AsyncClient`, which carry out its effects.

    Args:
      bootstrap_servers: ``"host:port"``, ``"h1:p1,h2:p2"`` or a list of those, tried in
        order; an address the broker advertises is preferred when it is reachable.
      client_id: sent with every request.
      request_timeout_ms: how long a request may go unanswered (a Fetch: plus its
        ``max_wait_ms``; a JoinGroup: plus its rebalance timeout), reconnection attempts
        included.
      retry_backoff_ms, retry_backoff_max_ms: the wait between reconnection attempts,
        doubling from the one to the other.
      security_protocol, ssl_*, sasl_*: TLS and SASL (:mod:`odradek.client.security`).

    Raises:
      ValueError: a malformed bootstrap address or a bad option.

    A call raises :class:`~odradek.client.errors.KafkaConnectionError` when no connection
    could be made (or kept) in time and :class:`~odradek.client.errors.KafkaTimeoutError` when
    the broker did not answer in time; error codes in responses are the operations' to raise.
    A failed TLS handshake (``SslAuthenticationError``) or SASL exchange
    (``SaslAuthenticationFailedError``, ``UnsupportedSaslMechanismError``) is raised at once.

    Bootstrap: try each ``bootstrap_servers`` address in order; on the first that accepts
    (TLS and SASL first, when configured: on every new connection), send ApiVersions then
    Metadata; if the broker advertises another address, connect there
    (and keep the bootstrap connection if that fails). All of it within the call's timeout:
    each address gets an equal share of the time left, so silent ones delay the call by no
    more than that timeout and cannot starve the addresses after them. Retries: a call
    retries connection failures and losses with exponential backoff until its timeout has
    passed since it began. Error codes in responses are not retried here; the operations and
    the producer decide.
    """

    @options_of(ClientConfig)
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        config: ClientConfig | None = None,
        **options: Any,
    ) -> None:
        """``config``: a config of this or another client kind (the producer and consumer pass
        theirs), instead of ``bootstrap_servers`` and the options."""
        if config is None:
            config = ClientConfig(bootstrap_servers=bootstrap_servers, **options)
        self.config = config
        self._conn: Any = None
        self._closed = False
        self._init_face()

    def _init_face(self) -> None:
        """The face's connection lock (set up last)."""

    @property
    def _io(self) -> ClientCore:
        return self  # the client carries out its own operations' effects

    @staticmethod
    def _exchange(conn: Any, request: m.Request, raw: Any, timeout_s: float) -> Any:
        """The effect of :class:`_Exchange`: ``conn.exchange(...)`` (async: its coroutine,
        which the driver awaits)."""
        return conn.exchange(request, raw, timeout_s)

    def open_connection(self) -> Any:
        """The connection if one is open, without connecting (``None`` otherwise)."""
        conn = self._conn
        return conn if conn is not None and not conn.closed else None

    # -- operations (each face's methods: drivers.operation) -----------------------------------
    @operation
    def metadata(
        self, topics: list[str] | None = None, *, allow_auto_create: bool = False
    ) -> Op[ClusterMetadata]:
        """The cluster's brokers and ``topics``' metadata (every topic's for ``None``)."""
        return metadata_op(topics, allow_auto_create)

    @operation
    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> Op[dict[TopicPartition, OffsetAndTimestamp | None]]:
        """ListOffsets: each partition's offset for its timestamp: -2 earliest, -1 latest, -3
        the first record with the largest timestamp (KIP-734), else the first offset whose
        timestamp is at least the one given (``None`` if none). Raises the first
        per-partition error, in request order."""
        return list_offsets_op(timestamps)

    @operation
    def fetch_raw(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 52428800,
        partition_max_bytes: int = 1048576,
    ) -> Op[dict[TopicPartition, FetchedPartition]]:
        """One Fetch from ``offsets``: each partition's record bytes, undecoded."""
        return fetch_op(
            offsets,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            partition_max_bytes=partition_max_bytes,
        )

    @operation
    def run(self, op: Op[T]) -> Op[T]:
        """Execute a sans-I/O operation (see :mod:`odradek.client.ops`) on the calling thread
        (blocking) or in the calling task (async)."""
        return op

    # -- the client's own operations: their effects are the face's connection methods --------
    @operation
    def call(
        self, request: m.Request, raw: Buffer | Sequence[Buffer] = b""
    ) -> Op[tuple[m.Response | None, memoryview]]:
        """Send any request and wait for its response: ``(response, raw_tail)``. A Produce with
        ``acks=0`` gets no response: returns ``(None, empty)`` once written. A lost connection
        is remade, with backoff, until the request's timeout has passed. A request the broker
        could not decode is not sent: :func:`~odradek.client.ops.check_decodable` raises
        (from :meth:`~odradek.client.protocol_core.ProtocolCore.send`)."""
        timeout_ms = self._timeout_ms(request)
        deadline_s = time.monotonic() + timeout_ms / 1000
        attempt = 0
        while True:
            try:
                conn = yield _Connection(deadline_s)
                remaining_s = max(0.0, deadline_s - time.monotonic())
                return (yield _Exchange(conn, request, raw, remaining_s))
            except KafkaTimeoutError:
                raise KafkaTimeoutError(
                    f"{type(request).__name__} got no response in {timeout_ms} ms"
                ) from None
            except KafkaConnectionError:
                delay_s = self.config.backoff_s(attempt)
                if self._closed or time.monotonic() + delay_s >= deadline_s:
                    raise
                yield Sleep(delay_s)  # backoff between reconnection attempts
                attempt += 1

    def _connection_op(self, deadline_s: float | None = None) -> Generator[Any, Any, Any]:
        """The live connection, bootstrapping a new one by ``deadline_s`` (``None``: within
        ``request_timeout_ms``) if there is none (the face runs it under its connection
        lock)."""
        if self._closed:
            raise KafkaConnectionError("client is closed")
        conn = self._conn
        if conn is None or conn.closed:
            if conn is not None:
                yield _Discard(conn)
            if deadline_s is None:
                deadline_s = time.monotonic() + self.config.request_timeout_ms / 1000
            self._conn = conn = yield from self._bootstrap_op(deadline_s)
        return conn

    def _bootstrap_op(self, deadline_s: float) -> Generator[Any, Any, Any]:
        errors = []
        servers = self.config.bootstrap_servers
        for index, (host, port) in enumerate(servers):
            left_s = deadline_s - time.monotonic()
            if left_s <= 0:
                errors.append(f"{host}:{port} not tried: no time left")
                continue
            until_s = time.monotonic() + left_s / (len(servers) - index)  # this one's share
            try:
                conn = yield from self._open_op(host, port, until_s)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:  # try the next one
                errors.append(str(exc))
                continue
            try:
                broker = yield from _on(conn, handshake_op(self.config.client_id), until_s)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:  # try the next one
                errors.append(f"{host}:{port}: {exc}")
                continue
            if broker is None or (broker.host, broker.port) == (host, port):
                return conn
            try:
                advertised = yield from self._open_op(broker.host, broker.port, until_s)
            except (KafkaConnectionError, KafkaTimeoutError):
                return conn  # the advertised address is unreachable from here
            except Exception:
                yield _Discard(conn)
                raise
            yield _Discard(conn)
            return advertised
        raise KafkaConnectionError("no bootstrap server answered: " + "; ".join(errors))

    def _open_op(self, host: str, port: int, until_s: float) -> Generator[Any, Any, Any]:
        """A new connection by ``until_s`` (TLS if configured: the face's ``_open``),
        authenticated if the config says so (:func:`~odradek.client.security.authenticate_op`);
        a failed authentication closes it and raises."""
        conn = yield _Open(host, port, max(0.0, until_s - time.monotonic()))
        yield from _on(conn, authenticate_op(self.config), until_s)
        return conn

    def _timeout_ms(self, request: m.Request) -> int:
        """How long ``request`` may take: a Fetch long-polls ``max_wait_ms`` more, a
        JoinGroup waits for the generation to form (its rebalance timeout) more."""
        if isinstance(request, m.FetchRequest):
            return self.config.request_timeout_ms + request.max_wait_ms
        if isinstance(request, m.JoinGroupRequest):
            return self.config.request_timeout_ms + request.rebalance_timeout_ms
        return self.config.request_timeout_ms


def _on(conn: Any, op: Generator[Any, Any, T], until_s: float) -> Generator[Any, Any, T]:
    """Run ``op``'s calls on ``conn`` alone, without retries, each answered by ``until_s``
    (``time.monotonic()``): a new connection's setup. If ``op`` fails (a lost connection, or
    an answer it refuses), ``conn`` is closed before the error is raised."""
    try:
        call = next(op)
        while True:
            timeout_s = max(0.0, until_s - time.monotonic())
            call = op.send((yield _Exchange(conn, call.request, call.raw, timeout_s)))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    except Exception:
        yield _Discard(conn)
        raise
