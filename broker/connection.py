"""One client connection: read frames, dispatch requests, write responses.

Reading and dispatch happen in one task, in arrival order: every append of this connection is
applied by that task, in the order its requests arrived (per-partition order), before any task
is started for the request. Requests that wait — Produce with ``acks=all`` (the fsync) and
Fetch (the long poll) — are answered by a task of their own,
so a client may pipeline many; responses carry the correlation id and may leave out of order.
A send lock keeps frames whole; at most ``max_in_flight`` waiting requests exist per connection
(the reader stops reading beyond that), so a client that never reads its responses only fills
its own socket buffer.

Per request, the hot path takes no timer and no checkpoint: the locks are acquired without a
checkpoint (``fast_acquire``), the reader tries ``recv_into`` before it waits, and when it read
without waiting it yields once per chunk (so a client that keeps its socket full cannot
starve the other connections). The idle timeout is not a timer per read either: the server
sweeps its connections (:meth:`Connection.close_if_idle`) against ``last_active_s``.

What closes the connection, with a logged reason and without touching any log: a frame above
``socket.request.max.bytes`` (refused before it is buffered), a malformed frame or header, an
unknown api, an idle timeout, the peer closing. An unsupported version is answered with
``UNSUPPORTED_VERSION`` and the connection stays open (its frame boundaries are intact).
When the peer closes (EOF or a reset), its waiting requests (long-poll fetches, ``acks=all``
waits, JoinGroup/SyncGroup) are cancelled at once and the socket is closed: a client that hangs
up never keeps a ``max.connections`` slot or a CLOSE-WAIT socket until its waits end. (Appends
it made stay appended: only their answers are dropped.)

Read buffer: it starts at ``_MIN_READ_BUFFER_BYTES`` (an idle connection costs a few KiB, not a
large buffer), doubles whenever a ``recv_into`` fills it (a stream of large produce requests
reaches ``_MAX_READ_BUFFER_BYTES`` within a few reads and then reads in large chunks with no
allocation per read), and drops back to the minimum when the socket has no more to read and no
frame is half-received, so a connection that sent one large request and went quiet returns
the memory.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from odradek.broker.admin import AdminApi
from odradek.broker.context import BrokerContext
from odradek.broker.data import DataApi, Reply
from odradek.broker.net import close_socket, recv_into, send_buffers, send_now, sendfile_all
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import FrameDecoder, FrameError

__all__ = ["Connection"]

_MIN_READ_BUFFER_BYTES = 4 * 1024  # what an idle connection holds
_MAX_READ_BUFFER_BYTES = 256 * 1024  # what a busy one reads into (one recv per 256 KiB)
_CONNECTION_ERRORS = (
    OSError,
    EOFError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)


async def _raise(exc: BaseException) -> Any:
    raise exc


class Connection:
    def __init__(
        self,
        ctx: BrokerContext,
        sock: socket.socket,
        peer: str,
        *,
        admin: AdminApi,
        data: DataApi,
        max_frame_bytes: int,
        idle_timeout_s: float,
        max_in_flight: int = 256,
    ) -> None:
        self.ctx = ctx
        self.sock = sock
        self.peer = peer
        self.log = ctx.log.bind(peer=peer)
        self.admin = admin
        self.data = data
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s
        self._send_lock = anyio.Lock(fast_acquire=True)
        self._max_in_flight = max_in_flight
        self._in_flight = anyio.Semaphore(max_in_flight, fast_acquire=True)
        self._reader_scope = anyio.CancelScope()
        self.last_active_s = time.monotonic()  # the last read or send (the idle sweep)
        self._idle_closed = False
        # why a waiting request's task closed the connection (it cancels the whole group,
        # the reader included, wherever the reader was: in recv, a send or a dispatch)
        self._send_failure: str | None = None
        self._task_group: anyio.abc.TaskGroup
        self._handlers: dict[type, Any] = {
            m.ApiVersionsRequest: admin.api_versions,
            m.MetadataRequest: admin.metadata,
            m.CreateTopicsRequest: admin.create_topics,
            m.DeleteTopicsRequest: admin.delete_topics,
            m.CreatePartitionsRequest: admin.create_partitions,
            m.DescribeConfigsRequest: admin.describe_configs,
            m.AlterConfigsRequest: admin.alter_configs,
            m.DescribeLogDirsRequest: admin.describe_log_dirs,
            m.ListOffsetsRequest: data.list_offsets,
            m.DeleteRecordsRequest: data.delete_records,
        }
        # Requests answered by a task of their own (they wait: a rebalance, an fsync).
        self._waiting: dict[type, Any] = {}
        if (groups := ctx.groups) is not None:
            self._handlers.update(
                {
                    m.HeartbeatRequest: groups.heartbeat,
                    m.LeaveGroupRequest: groups.leave_group,
                    m.OffsetFetchRequest: groups.offset_fetch,
                    m.ListGroupsRequest: groups.list_groups,
                    m.DescribeGroupsRequest: groups.describe_groups,
                }
            )
            self._waiting = {
                m.JoinGroupRequest: lambda req: groups.join_group(req, peer),
                m.SyncGroupRequest: groups.sync_group,
                m.OffsetCommitRequest: groups.offset_commit,
                m.DeleteGroupsRequest: groups.delete_groups,
            }

    def stop_reading(self) -> None:
        """Graceful shutdown: read no more requests; those in flight still get answers."""
        self._reader_scope.cancel()

    def close_if_idle(self, now_s: float) -> bool:
        """Close the connection if nothing was read or sent for ``idle_timeout_s`` and no
        request is in flight (a long poll is not cut short); ``time.monotonic()`` seconds."""
        if now_s - self.last_active_s < self.idle_timeout_s:
            return False
        if self._in_flight.value != self._max_in_flight:
            return False
        self.log.info("closing idle connection", idle_s=self.idle_timeout_s)
        self._idle_closed = True
        self._reader_scope.cancel()
        return True

    async def serve(self) -> None:
        """Serve until the peer leaves, a malformed frame, an idle timeout or shutdown."""
        decoder = FrameDecoder(self.max_frame_bytes)
        reason: str | None = None  # None: the reader was cancelled by a failed send
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                with self._reader_scope:
                    try:
                        reason = await self._read_loop(decoder, tg)
                    except (FrameError, m.MalformedMessage) as exc:
                        reason = f"malformed request: {exc}"
                        self.log.warning("closing connection", reason=reason)
                        tg.cancel_scope.cancel()
                    except _CONNECTION_ERRORS as exc:
                        reason = f"connection error: {exc!r}"
                        tg.cancel_scope.cancel()
                    else:  # the peer closed: nobody will read what its waiting requests answer
                        tg.cancel_scope.cancel()
                if self._reader_scope.cancelled_caught:
                    reason = "idle timeout" if self._idle_closed else "broker shutting down"
        finally:
            close_socket(self.sock)
        self.log.debug("connection closed", reason=reason or self._send_failure)

    async def _read_loop(self, decoder: FrameDecoder, tg: anyio.abc.TaskGroup) -> str:
        sock = self.sock
        buffer = memoryview(bytearray(_MIN_READ_BUFFER_BYTES))
        while True:
            try:
                received = sock.recv_into(buffer)
            except BlockingIOError:
                if len(buffer) > _MIN_READ_BUFFER_BYTES and not decoder.mid_frame:
                    buffer = memoryview(bytearray(_MIN_READ_BUFFER_BYTES))  # quiet: shrink
                received = await recv_into(sock, buffer)
            else:  # read without waiting: let the other tasks run once per chunk
                await anyio.lowlevel.checkpoint()
            self.last_active_s = time.monotonic()
            if received == 0:
                decoder.end_of_stream()
                return "peer closed the connection"
            decoder.feed(buffer[:received])  # copies: the buffer may be replaced below
            if received == len(buffer) and received < _MAX_READ_BUFFER_BYTES:
                buffer = memoryview(bytearray(2 * received))  # more is coming: grow
            # (not a for loop: its variable would keep the last frame, maybe megabytes,
            # alive while the reader waits for the next)
            while (body := decoder.next_frame()) is not None:
                await self._dispatch(body, tg)

    async def _dispatch(self, body: bytes, tg: anyio.abc.TaskGroup) -> None:
        try:
            request, raw = m.decode_request(body)
        except m.UnsupportedVersion as exc:
            if exc.api_key is None or exc.correlation_id is None:
                raise
            # The frame boundaries are intact: answer and keep the connection
            # (docs/protocol.md §6); ApiVersions also lists what we speak, so the client
            # can downgrade.
            self.log.info("unsupported request version", reason=exc.reason)
            reply = m.error_response(exc.api_key, exc.correlation_id, exc.error_code, exc.reason)
            if isinstance(reply, m.ApiVersionsResponse):
                reply.api_keys = m.supported_api_versions()
            await self._send(reply)
            return
        if isinstance(request, m.ProduceRequest):
            if request.acks == m.ACKS_ALL:
                await self._in_flight.acquire()
            try:
                work = await self.data.produce(request, raw)  # appends now, in arrival order
            except Exception as exc:
                work = _raise(exc)  # answered by _answer, as a handler's failure
            if request.acks == m.ACKS_ALL:
                tg.start_soon(self._answer_waiting, work, request)  # waits for the fsync
            else:
                await self._answer(work, request)
        elif isinstance(request, m.FetchRequest):
            await self._in_flight.acquire()
            tg.start_soon(self._answer_waiting, self.data.fetch(request), request)
        elif (waiting := self._waiting.get(type(request))) is not None:
            await self._in_flight.acquire()
            tg.start_soon(self._answer_waiting, waiting(request), request)
        elif (handler := self._handlers.get(type(request))) is not None:
            await self._answer(handler(request), request)
        else:  # a known api this broker has no handler for: say so, keep the connection
            name = type(request).__name__
            self.log.warning("request not served", api=name)
            await self._send(
                m.error_response(
                    m.api_key_of(request),
                    request.correlation_id,
                    ErrorCode.INVALID_REQUEST,
                    f"{name} is not served by this broker",
                )
            )

    async def _answer_waiting(self, work: Any, request: m.Request) -> None:
        try:
            await self._answer(work, request)
        except _CONNECTION_ERRORS as exc:  # the peer is gone: so is the connection
            self.log.debug("cannot send response", error=repr(exc))
            self._send_failure = f"cannot send a response: {exc!r}"
            self._task_group.cancel_scope.cancel()
        finally:
            self._in_flight.release()

    async def _answer(self, work: Any, request: m.Request) -> None:
        """Await the handler and send its reply; a handler bug answers UNKNOWN_SERVER_ERROR."""
        try:
            reply = await work
        except Exception as exc:
            self.log.exception("request failed", api=type(request).__name__)
            reply = m.error_response(
                m.api_key_of(request),
                request.correlation_id,
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"{type(exc).__name__}: {exc}",
            )
        if reply is None:
            return
        try:
            await self._send(reply)
        finally:
            if isinstance(reply, Reply):
                reply.release()  # the regions' segment files may close now

    async def _send(self, reply: Reply | m.Response) -> None:
        self.last_active_s = time.monotonic()
        if isinstance(reply, m.Response) and not self._send_lock.locked():
            # nobody is mid-frame: write it now; only what the socket does not take waits,
            # under the lock (taken without yielding: nothing can interleave before it)
            rest = send_now(self.sock, m.encode_response(reply))
            if rest:
                async with self._send_lock:
                    await send_buffers(self.sock, rest)
            return
        async with self._send_lock:
            if isinstance(reply, m.Response):
                await send_buffers(self.sock, m.encode_response(reply))
                return
            head = m.encode_head(reply.response, reply.raw_bytes)
            await send_buffers(self.sock, [head, *reply.buffers])
            for region in reply.regions:  # held by the reply: open even if deleted meanwhile
                fd = region.file.held_fileno()
                await sendfile_all(self.sock, fd, region.position, region.length)
