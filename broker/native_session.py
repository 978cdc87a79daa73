"""The native protocol on one connection: decode a frame body, call its handler, encode the
reply (docs/protocol.md, "The native protocol").

Responses carry the request's correlation id and may leave out of order: a request that waits
(Produce with ``acks=all``, Fetch, JoinGroup, SyncGroup, OffsetCommit, DeleteGroups) is
answered by a task of its own while the reader goes on. Appends still happen in the reader, in
arrival order (:meth:`odradek.broker.produce.ProduceApi.produce`).

An unsupported version is answered ``UNSUPPORTED_VERSION`` and the connection stays open (its
frame boundaries are intact); a request for a known api this broker does not serve is
answered ``INVALID_REQUEST``.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

from odradek.broker.fetch import Reply
from odradek.broker.metrics import Histogram
from odradek.broker.security import sasl
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.connection import Connection

__all__ = ["NativeSession"]

# what a connection that has not authenticated yet may send (SASL listeners)
_BEFORE_AUTHENTICATION = frozenset(
    {m.ApiVersionsRequest, m.SaslHandshakeRequest, m.SaslAuthenticateRequest}
)


async def _raise(exc: BaseException) -> Any:
    raise exc


class NativeSession:
    """What the native protocol adds to a :class:`~odradek.broker.connection.Connection`."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._metrics = conn.ctx.metrics  # None: nothing is timed
        self._latency: dict[type, Histogram] = {}  # by request type, when timed
        admin, data, groups = conn.apis.admin, conn.apis.data, conn.apis.groups
        self.data = data
        self._handlers: dict[type, Any] = {
            m.ApiVersionsRequest: admin.api_versions,
            m.MetadataRequest: functools.partial(admin.metadata, listener=conn.listener),
            m.CreateTopicsRequest: admin.create_topics,
            m.DeleteTopicsRequest: admin.delete_topics,
            m.CreatePartitionsRequest: admin.create_partitions,
            m.DescribeConfigsRequest: admin.describe_configs,
            m.AlterConfigsRequest: admin.alter_configs,
            m.DescribeLogDirsRequest: admin.describe_log_dirs,
            m.ListOffsetsRequest: data.list_offsets,
            m.DeleteRecordsRequest: data.delete_records,
            m.SaslHandshakeRequest: self._sasl_handshake,
        }
        # Requests answered by a task of their own (they wait: a rebalance, an fsync).
        self._waiting: dict[type, Any] = {
            m.SaslAuthenticateRequest: self._sasl_authenticate,  # a failure waits
        }
        if groups is not None:
            self._handlers.update(
                {
                    m.HeartbeatRequest: groups.membership.heartbeat,
                    m.LeaveGroupRequest: groups.membership.leave_group,
                    m.OffsetFetchRequest: groups.offsets.offset_fetch,
                    m.ListGroupsRequest: groups.admin.list_groups,
                    m.DescribeGroupsRequest: groups.admin.describe_groups,
                }
            )
            peer = conn.peer
            self._waiting |= {
                m.JoinGroupRequest: lambda req: groups.membership.join_group(req, peer),
                m.SyncGroupRequest: groups.membership.sync_group,
                m.OffsetCommitRequest: groups.offsets.offset_commit,
                m.DeleteGroupsRequest: groups.admin.delete_groups,
                m.OffsetDeleteRequest: groups.offsets.offset_delete,
            }

    async def dispatch(self, body: bytes) -> None:
        """Serve one frame body. Raises ``MalformedMessage`` (the connection closes)."""
        conn = self.conn
        started_s = time.perf_counter() if self._metrics is not None else 0.0
        try:
            request, raw = m.decode_request(body)
        except m.UnsupportedVersion as exc:
            if exc.api_key is None or exc.correlation_id is None:
                raise
            # ApiVersions also lists what we speak, so the client can downgrade.
            conn.log.info("unsupported request version", reason=exc.reason)
            reply = m.error_response(exc.api_key, exc.correlation_id, exc.error_code, exc.reason)
            if isinstance(reply, m.ApiVersionsResponse):
                reply.api_keys = m.supported_api_versions()
            await self._send(reply)
            return
        sasl = conn.sasl
        if sasl is not None and not sasl.done and type(request) not in _BEFORE_AUTHENTICATION:
            raise m.MalformedMessage(f"{type(request).__name__} before SASL authentication")
        if isinstance(request, m.ProduceRequest):
            acks_all = request.acks == m.ACKS_ALL
            if acks_all:
                await conn.reserve()
            try:
                work = await self.data.produce_api.produce(
                    request, raw
                )  # appends now, in arrival order
            except Exception as exc:
                work = _raise(exc)  # answered by _answer, as a handler's failure
            if acks_all:
                conn.start_reserved(self._answer, work, request, started_s)  # waits for the fsync
            else:
                await self._answer(work, request, started_s)
        elif isinstance(request, m.FetchRequest):
            await conn.reserve()
            conn.start_reserved(
                self._answer, self.data.fetch_api.fetch(request), request, started_s
            )
        elif (waiting := self._waiting.get(type(request))) is not None:
            await conn.reserve()
            conn.start_reserved(self._answer, waiting(request), request, started_s)
        elif (handler := self._handlers.get(type(request))) is not None:
            await self._answer(handler(request), request, started_s)
        else:  # a known api this broker has no handler for: say so, keep the connection
            name = type(request).__name__
            conn.log.warning("request not served", api=name)
            await self._send(
                m.error_response(
                    m.api_key_of(request),
                    request.correlation_id,
                    ErrorCode.INVALID_REQUEST,
                    f"{name} is not served by this broker",
                )
            )

    async def _sasl_handshake(self, req: m.SaslHandshakeRequest) -> m.SaslHandshakeResponse:
        code = sasl.handshake(self.conn, req.mechanism)
        enabled = list(self.conn.ctx.config["sasl.enabled.mechanisms"])  # type: ignore[call-overload]
        return m.SaslHandshakeResponse(
            correlation_id=req.correlation_id, error_code=code, mechanisms=enabled
        )

    async def _sasl_authenticate(
        self, req: m.SaslAuthenticateRequest
    ) -> m.SaslAuthenticateResponse:
        code, message, answer = await sasl.authenticate(self.conn, req.auth_bytes)
        return m.SaslAuthenticateResponse(
            correlation_id=req.correlation_id,
            error_code=code,
            error_message=message,
            auth_bytes=answer,
        )

    async def _answer(self, work: Any, request: m.Request, started_s: float) -> None:
        """Await the handler and send its reply; a handler bug answers UNKNOWN_SERVER_ERROR."""
        try:
            reply = await work
        except Exception as exc:
            self.conn.log.exception("request failed", api=type(request).__name__)
            reply = m.error_response(
                m.api_key_of(request),
                request.correlation_id,
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"{type(exc).__name__}: {exc}",
            )
        if reply is not None:
            try:
                await self._send(reply)
            finally:
                if isinstance(reply, Reply):
                    reply.release()  # the regions' segment files may close now
        if self._metrics is not None:  # acks=0 too: handled, with no answer
            histogram = self._latency.get(type(request))
            if histogram is None:
                api = type(request).__name__.removesuffix("Request")
                histogram = self._latency[type(request)] = self._metrics.latency("native", api)
            histogram.observe(time.perf_counter() - started_s)

    async def _send(self, reply: Reply | m.Response) -> None:
        if isinstance(reply, m.Response):
            await self.conn.send(m.encode_response(reply))  # a list of buffers
        else:
            head = m.encode_head(reply.response, reply.raw_bytes)
            await self.conn.send([head, *reply.buffers, *reply.regions])
        if self.conn.close_reason is not None:  # a refused SASL step: closed once answered
            self.conn.close(self.conn.close_reason)
