"""The sans-I/O core shared by the blocking and async faces (the h11 model): no sockets here.

:class:`ProtocolCore` is one connection's protocol state:

1. :meth:`ProtocolCore.send` assigns the next correlation id to a request, remembers which
   caller token waits for it (unless the request expects no response: a Produce with
   ``acks=0``) and returns the frame as parts for one vectored write.
2. :meth:`ProtocolCore.receive` takes bytes read from the socket, splits them into frames
   (:class:`odradek.protocol.frames.FrameDecoder`), decodes each response and returns
   ``(token, response, raw_tail)`` for every complete one. Responses may arrive in any order;
   they are matched by correlation id. A response nobody waits for, or of another API than
   the request it answers, is a protocol violation: :class:`ProtocolViolation` (the caller
   closes the connection and fails every pending token).

Invariant: every token handed to ``send`` for a request that expects a response comes back
exactly once, from ``receive`` or from :meth:`ProtocolCore.fail_all`.

Also here: bootstrap-address parsing, the exponential backoff schedule used by retries, and
:class:`ClientCore`, what the blocking and async clients share (their constructor, timeouts and
the reconnection decision).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from odradek.protocol import messages as m
from odradek.protocol.frames import MAX_FRAME_BYTES_LIMIT, Buffer, FrameDecoder, FrameError

__all__ = ["ClientCore", "ProtocolCore", "ProtocolViolation", "backoff_ms", "parse_bootstrap"]

_MAX_CORRELATION_ID = 2**31 - 1


class ProtocolViolation(Exception):
    """The broker sent bytes that break the protocol; the connection must be closed."""


class ProtocolCore:
    __slots__ = ("_decoder", "_next_cid", "_pending")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES_LIMIT) -> None:
        self._decoder = FrameDecoder(max_frame_bytes)
        self._next_cid = 1
        self._pending: dict[int, tuple[Any, m.ApiKey]] = {}

    @property
    def in_flight(self) -> int:
        """Requests sent whose response has not arrived."""
        return len(self._pending)

    def send(
        self, request: m.Request, raw: Buffer | Sequence[Buffer] = b"", token: Any = None
    ) -> tuple[int, list[Buffer]]:
        """Assign a correlation id; returns it and the frame's parts (header first)."""
        cid = self._next_cid
        self._next_cid = cid + 1 if cid < _MAX_CORRELATION_ID else 1
        request.correlation_id = cid
        parts = m.encode_request(request, raw)
        if m.expects_response(request):
            self._pending[cid] = (token, m.api_key_of(request))
        return cid, parts

    def forget(self, cid: int) -> Any:
        """Stop waiting for ``cid`` (its send failed); returns its token or ``None``."""
        entry = self._pending.pop(cid, None)
        return entry[0] if entry else None

    def receive(self, data: Buffer) -> list[tuple[Any, m.Response, memoryview]]:
        """Feed bytes from the socket; returns every response completed by them."""
        try:
            self._decoder.feed(data)
            out = []
            for body in self._decoder:
                response, tail = m.decode_response(body)
                entry = self._pending.pop(response.correlation_id, None)
                if entry is None:
                    raise ProtocolViolation(
                        f"response with unknown correlation id {response.correlation_id}"
                    )
                token, api_key = entry
                if m.api_key_of(response) != api_key:
                    raise ProtocolViolation(
                        f"correlation id {response.correlation_id} answered a "
                        f"{api_key.name} request with {type(response).__name__}"
                    )
                out.append((token, response, tail))
            return out
        except FrameError as exc:
            raise ProtocolViolation(f"malformed response from the broker: {exc}") from exc

    def fail_all(self) -> list[Any]:
        """The connection is gone: returns every pending token and forgets them."""
        tokens = [token for token, _ in self._pending.values()]
        self._pending.clear()
        return tokens


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h:p"``, ``"h1:p1,h2:p2"`` or a list of those -> ``[(host, port), ...]``.

    IPv6 literals go in brackets (``"[::1]:9092"``); a missing port means 9092."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for raw_item in items:
        item = raw_item.strip()
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else "9092"
        elif item.count(":") == 1:
            host, port = item.split(":")
        else:
            host, port = item, "9092"
        try:
            out.append((host, int(port)))
        except ValueError:
            raise ValueError(f"bad bootstrap server {item!r}: port is not a number") from None
    if not out:
        raise ValueError(f"no bootstrap servers in {servers!r}")
    return out


def backoff_ms(attempt: int, base_ms: int, max_ms: int) -> int:
    """Delay before retry number ``attempt`` (0-based): ``base * 2**attempt`` capped at max."""
    return min(base_ms * (1 << min(attempt, 30)), max_ms)


class ClientCore:
    """A connection to one broker, made lazily and remade after a loss, over which any
    request can be sent (pipelined): the base of :class:`odradek.client.sync_client.Client`
    and :class:`odradek.client.async_client.AsyncClient`, which add the I/O.

    Args:
      bootstrap_servers: ``"host:port"``, ``"h1:p1,h2:p2"`` or a list of those, tried in
        order; an address the broker advertises is preferred when it is reachable.
      client_id: sent with every request.
      request_timeout_ms: how long a request may go unanswered (a Fetch: plus its
        ``max_wait_ms``), reconnection attempts included.
      retry_backoff_ms, retry_backoff_max_ms: the wait between reconnection attempts,
        doubling from the one to the other.

    Raises:
      ValueError: a malformed bootstrap address.

    A call raises :class:`~odradek.client.errors.KafkaConnectionError` when no connection
    could be made (or kept) in time and :class:`~odradek.client.errors.KafkaTimeoutError` when
    the broker did not answer in time; error codes in responses are the operations' to raise.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "odradek-python",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
    ) -> None:
        self.bootstrap_servers = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._closed = False
        self._init_face()

    def _init_face(self) -> None:
        """The face's connection state (set up last)."""

    def _timeout_ms(self, request: m.Request) -> int:
        """How long ``request`` may take: a Fetch long-polls ``max_wait_ms`` more."""
        if isinstance(request, m.FetchRequest):
            return self.request_timeout_ms + request.max_wait_ms
        return self.request_timeout_ms

    def _reconnect_delay_s(self, attempt: int, now_s: float, deadline_s: float) -> float | None:
        """The backoff before reconnection attempt ``attempt + 1``, or ``None`` if the call
        must give up (the client is closed, or the backoff would end past its deadline)."""
        delay_s = backoff_ms(attempt, self.retry_backoff_ms, self.retry_backoff_max_ms) / 1000
        if self._closed or now_s + delay_s >= deadline_s:
            return None
        return delay_s
