"""Apache Kafka's protocol on one connection: decode, call the shared handlers through the
adapters, answer in request order (docs/protocol.md, "Kafka's protocol").

Rules (Kafka's, as its clients rely on them):

1. **Responses leave in request order.** Each request that will be answered takes a place in
   a chain: its answer is sent only once the previous one has been, whatever finished first
   (aiokafka and kafka-python match responses by position and raise on a mismatch). A request
   whose previous answer is still waiting (a long-poll Fetch, an ``acks=all`` Produce) is
   answered by a task of its own, so the reader keeps reading and appending in arrival order.
2. **Produce with ``acks=0`` gets no response**; if any of its partitions failed, the
   connection is closed (Kafka's way of telling a client that reads nothing).
3. **Versions.** An ApiVersions request of a version not spoken here gets the v0-layout
   ``UNSUPPORTED_VERSION`` reply listing what is (header v0; every client parses it). Any other
   api or version outside the advertised ranges, or a body that breaks the wire rules, closes
   the connection with a logged reason, as Kafka's broker does. Produce v0-2 are advertised
   (old librdkafka needs v0 in the range to compress) and answered ``UNSUPPORTED_VERSION`` per
   partition in the request's own version.
4. A handler that fails unexpectedly (a bug) closes the connection with the error logged:
   Kafka's protocol has no version-independent error response.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import anyio

from odradek.broker.kafka.adapters import KafkaReply, build_routes
from odradek.broker.metrics import Histogram
from odradek.protocol import kafka
from odradek.protocol import messages as m
from odradek.protocol.frames import frame_prefix
from odradek.protocol.kafka.headers import API_VERSIONS_KEY, RequestHeader

if TYPE_CHECKING:
    from odradek.broker.connection import Connection

__all__ = ["KafkaSession"]

PRODUCE_KEY = 0
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36
# what a connection that has not authenticated yet may send (SASL listeners)
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})


class KafkaSession:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.routes = build_routes(conn)
        self._previous_sent: anyio.Event | None = None  # set once the last answer is out
        self._metrics = conn.ctx.metrics  # None: nothing is timed
        self._latency: dict[int, Histogram] = {}  # by api key, when timed

    def _done(self, api_key: int, started_s: float) -> None:
        """Time one request, from its read to its answer (metrics on only)."""
        histogram = self._latency.get(api_key)
        if histogram is None:
            histogram = self._latency[api_key] = self._metrics.latency(  # type: ignore[union-attr]
                "kafka", kafka.APIS[api_key].name
            )
        histogram.observe(time.perf_counter() - started_s)

    async def dispatch(self, body: bytes) -> None:
        """Serve one frame body. Raises ``MalformedMessage`` (the connection closes)."""
        started_s = time.perf_counter() if self._metrics is not None else 0.0
        try:
            header, fields = kafka.decode_request(body)
        except kafka.KafkaUnsupported as exc:
            if exc.api_key != API_VERSIONS_KEY or exc.correlation_id is None:
                raise
            self.conn.log.info("unsupported request version", reason=exc.reason)
            answer = kafka.unsupported_version_response(
                exc.api_key, exc.correlation_id, self.routes.advertised
            )
            await self._answer_in_order(_ready(answer), None, started_s, waits=False)
            return
        sasl = self.conn.sasl
        if sasl is not None and not sasl.done and header.api_key not in _BEFORE_AUTHENTICATION:
            name = kafka.APIS[header.api_key].name
            raise kafka.KafkaMalformed(f"{name} before SASL authentication")
        route = self.routes.by_key.get(header.api_key)
        if route is None:  # decodable, but not served by this broker (no coordinator)
            raise kafka.KafkaMalformed(f"{kafka.APIS[header.api_key].name} is not served here")
        if header.api_key == PRODUCE_KEY:
            # appends now, in arrival order; the awaitable waits for the fsync (acks=all)
            work = await route.handler(header, fields)
            acks = fields["acks"]
            if acks == 0:
                await self._check_acks0(work)  # resolves at once: nothing to wait for
                if self._metrics is not None:
                    self._done(PRODUCE_KEY, started_s)
                return
            await self._answer_in_order(work, header, started_s, waits=acks == -1)
        else:
            work = route.handler(header, fields)
            await self._answer_in_order(work, header, started_s, waits=route.waits)

    async def _answer_in_order(
        self, work: Awaitable[Any], header: RequestHeader | None, started_s: float, *, waits: bool
    ) -> None:
        """Rule 1. Nothing unanswered before it and no wait ahead: answer now, in the reader
        (no event, no task: the common case costs nothing). Otherwise a task answers once
        the previous answer is out, and the reader goes on."""
        previous = self._previous_sent
        if waits or (previous is not None and not previous.is_set()):
            sent = self._previous_sent = anyio.Event()
            await self.conn.reserve()
            self.conn.start_reserved(self._answer_later, work, header, started_s, previous, sent)
            return
        self._previous_sent = None  # everything before it is out: the chain starts again
        try:
            answer = await work
        except Exception:
            self._failed(header)
            return
        await self._send(answer, header, started_s)

    async def _answer_later(
        self,
        work: Awaitable[Any],
        header: RequestHeader | None,
        started_s: float,
        previous: anyio.Event | None,
        sent: anyio.Event,
    ) -> None:
        try:
            try:
                answer = await work
            except Exception:
                self._failed(header)
                return
            if previous is not None and not previous.is_set():
                await previous.wait()
            await self._send(answer, header, started_s)
        finally:
            sent.set()

    def _failed(self, header: RequestHeader | None) -> None:
        """Rule 4: a handler failed unexpectedly (called from its ``except`` block)."""
        name = kafka.APIS[header.api_key].name if header else "ApiVersions"
        self.conn.log.exception("request failed", api=name)
        self.conn.close(f"internal error serving {name}")

    async def _check_acks0(self, work: Awaitable[m.ProduceResponse]) -> None:
        answer = await work
        failed = [
            (topic.name, part.partition_index, part.error_code)
            for topic in answer.topics
            for part in topic.partitions
            if part.error_code
        ]
        if failed:  # rule 2: the client reads no response, so it learns from the close
            self.conn.close(f"acks=0 produce failed for {len(failed)} partitions: {failed[:3]}")

    async def _send(self, answer: Any, header: RequestHeader | None, started_s: float) -> None:
        await self._write(answer, header)
        if self.conn.close_reason is not None:
            self.conn.close(self.conn.close_reason)
        if self._metrics is not None:
            self._done(header.api_key if header else API_VERSIONS_KEY, started_s)

    async def _write(self, answer: Any, header: RequestHeader | None) -> None:
        if isinstance(answer, m.ProduceResponse):  # the data path's answer, written directly
            assert header is not None
            answer = kafka.encode_produce_response(
                header.api_version, header.correlation_id, answer
            )
        if isinstance(answer, bytes):  # a body (also the UNSUPPORTED_VERSION reply)
            await self.conn.send([frame_prefix(len(answer)), answer])
            return
        assert header is not None
        if not isinstance(answer, KafkaReply):  # fields only: one body, no file regions
            (body,) = kafka.encode_response_parts(
                header.api_key, header.api_version, header.correlation_id, answer
            )
            await self.conn.send([frame_prefix(len(body)), body])  # type: ignore[arg-type]
            return
        try:
            parts = kafka.encode_response_parts(
                header.api_key, header.api_version, header.correlation_id, answer.fields
            )
            size = 0
            out: list[Any] = [b""]
            for part in parts:
                if isinstance(part, kafka.RecordsSlot):
                    size += part.size
                    out.append(part.source)  # a FileRegion: sendfile
                else:
                    size += len(part)
                    out.append(part)
            out[0] = frame_prefix(size)
            await self.conn.send(out)
        finally:
            answer.release()


async def _ready(value: Any) -> Any:
    return value
