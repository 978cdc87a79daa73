"""One connection's protocol state, sans-I/O (the h11 model): no sockets here. Both
connections (:class:`~odradek.client.blocking_connection.BlockingConnection`,
:class:`~odradek.client.async_connection.AsyncConnection`) drive a :class:`ProtocolCore`.

1. :meth:`ProtocolCore.send` gives a copy of a request the next correlation id (the caller's
   request is not mutated: it may be sent again), remembers which
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

Both connections keep one contract: ``exchange(request, raw, timeout_s)`` sends ``request``
and waits up to ``timeout_s`` for ``(response, raw_tail)`` (:data:`NO_RESPONSE` for acks=0);
it raises :class:`~odradek.client.errors.KafkaTimeoutError` when the time runs out (the
response is dropped when it arrives) and ``KafkaConnectionError`` once the connection has
failed. EOF, an I/O error or a protocol violation fails the connection and every request
waiting on it with the one error :func:`connection_error` words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec.structs import replace

from odradek.client.errors import KafkaConnectionError
from odradek.client.ops import check_decodable
from odradek.protocol import messages as m
from odradek.protocol.frames import MAX_FRAME_BYTES_LIMIT, Buffer, FrameDecoder, FrameError

__all__ = ["NO_RESPONSE", "ProtocolCore", "ProtocolViolation", "connection_error"]

_MAX_CORRELATION_ID = 2**31 - 1
NO_RESPONSE: tuple[None, memoryview] = (None, memoryview(b""))  # an exchange's acks=0 answer


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
        """Assign a correlation id; returns it and the frame's parts (header first). Raises
        ``TypeError``/``ValueError`` for a request the broker could not decode
        (:func:`~odradek.client.ops.check_decodable`), before anything is sent."""
        cid = self._next_cid
        self._next_cid = cid + 1 if cid < _MAX_CORRELATION_ID else 1
        parts = m.encode_request(replace(request, correlation_id=cid), raw)
        check_decodable(request, parts[0])  # what the broker could not decode is not sent
        if m.expects_response(request):
            self._pending[cid] = (token, m.api_key_of(request))
        return cid, parts

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


def connection_error(address: tuple[str, int], cause: str | BaseException) -> KafkaConnectionError:
    """The error that fails the connection to ``address``: ``cause`` says what happened
    (``"closed by the broker"``, ``"closed by the client"``) or is what was raised (a
    :class:`ProtocolViolation` closes it, an I/O error means it was lost)."""
    peer = f"{address[0]}:{address[1]}"
    if isinstance(cause, str):
        return KafkaConnectionError(f"connection to {peer} {cause}")
    what = "closed" if isinstance(cause, ProtocolViolation) else "lost"
    return KafkaConnectionError(f"connection to {peer} {what}: {str(cause) or repr(cause)}")
