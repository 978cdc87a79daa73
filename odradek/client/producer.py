"""The blocking face of :class:`~odradek.client.producer_core.ProducerCore`: thread-safe
``send()`` and a sender thread. Its threads and locks:

- ``send()`` (any thread) returns a :class:`~odradek.client.futures.RecordFuture`. A null-key
  record without headers or timestamp for the default (sticky) partitioner takes no lock (the
  lock-free tail: :mod:`odradek.client.accumulator`); other records take ``_append_lock``.
- ``_lock`` (with its condition ``_wake``) guards the sender's state, ``_append_lock`` the
  accumulator; a thread that needs both takes ``_lock`` first.
- The sender thread runs ``ProducerCore._sender_round`` under both locks, then sends the
  request outside them, pipelined on the connection; it closes the connection when a request
  waits longer than ``request_timeout_ms``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, wait
from contextlib import contextmanager
from typing import Any

from odradek.client import column_send
from odradek.client.accumulator import Batch
from odradek.client.blocking_client import Client
from odradek.client.blocking_connection import BlockingConnection
from odradek.client.drivers import Closing, blocking_face
from odradek.client.errors import KafkaError, KafkaTimeoutError
from odradek.client.futures import FailedFuture, RecordFuture, record_future
from odradek.client.ops import Op
from odradek.client.producer_core import Placed, ProducerCore

__all__ = ["Producer"]

_monotonic = time.monotonic
_LOGGER = logging.getLogger("odradek.client.producer")


@blocking_face
class Producer(Closing, ProducerCore):
    """The blocking producer. Parameters and errors: :class:`~.producer_core.ProducerCore`.

    Thread-safety: ``send``, ``flush`` and ``partitions_for`` may be called from any thread
    at once; ``send`` blocks only while it waits for a topic's first metadata or for buffer
    memory (up to ``max_block_ms``, then :class:`KafkaTimeoutError`). Delivery futures
    complete on the connection's reader thread (a response) or on the sender thread (acks=0,
    a failed send, an expired batch): their callbacks run there and must not block (nor
    ``send`` into a full ``buffer_memory``: nothing would be sent meanwhile).
    """

    _client_type = Client
    _delivery_type = RecordFuture

    def _init_face(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        # guards the accumulator's batches and byte count; taken alone by send() (per record)
        # and after _lock by the other threads (lock order: _lock, then _append_lock)
        self._append_lock = threading.Lock()
        self._completing = threading.local()  # .active: in _complete (delivery callbacks)
        self._sender = threading.Thread(target=self._run_sender, name="odradek-sender", daemon=True)
        self._sender.start()

    # -- send --------------------------------------------------------------------------------
    def _queue(self, place: Op[Placed | KafkaError], tail: bool) -> Future[Any]:
        placed = self._client.run(place)
        if isinstance(placed, KafkaError):
            return FailedFuture(placed)
        while True:
            with self._appending():
                added = self._add(placed, tail, _monotonic())
            if added is not None:
                break
            time.sleep(0)  # another thread holds the tail for a moment: let it finish
        batch, index, fresh = added
        if fresh:  # its linger deadline may be the sender's next wake-up
            with self._lock:
                self._wake.notify()
        return record_future(batch, index)

    @contextmanager
    def _appending(self) -> Iterator[None]:
        """Wait while ``buffer_memory`` is full (up to ``max_block_ms``), then hold the
        append lock; raises :class:`KafkaError` once the producer is closing."""
        cfg = self.config
        if self._acc.buffered_bytes >= cfg.buffer_memory:
            with self._lock:
                deadline = _monotonic() + cfg.max_block_ms / 1000
                while self._acc.buffered_bytes >= cfg.buffer_memory:
                    remaining = deadline - _monotonic()
                    if remaining <= 0:
                        raise self._memory_timeout()
                    self._wake.notify()
                    self._wake.wait(remaining)
        with self._append_lock:
            if self._closing:
                raise KafkaError("producer is closed")
            yield

    send_columns = column_send.send_columns

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock, self._append_lock:
            yield
            self._wake.notify_all()

    # -- sender thread -----------------------------------------------------------------------
    def _run_sender(self) -> None:
        while True:
            with self._lock:
                while True:
                    now = _monotonic()
                    stale = self._stale_connection(now)
                    if stale is not None:
                        break
                    with self._append_lock:
                        decision = self._sender_round(now)
                    if decision is None:
                        return
                    seq, batches, refresh, wakeup, expired = decision
                    if batches or expired:
                        break
                    if self._in_flight:
                        wakeup = min(wakeup or 0.05, 0.05)  # watch request timeouts
                    self._wake.wait(wakeup)
            if stale is not None:  # fails its requests: their batches are retried
                stale.close()
                continue
            self._fail_expired(expired)
            if batches:
                self._send_batches(seq, batches)
            if refresh is not None:
                self._client.run(refresh)

    def _send_batches(self, seq: int, batches: list[Batch]) -> None:
        request, raw = self._produce_request(batches)
        try:
            future = self._client.connection().submit(request, raw)
        except KafkaError as exc:
            self._complete(seq, None, exc)
            return
        if future is None:  # acks=0: no response; offsets unknown
            self._complete(seq, None, None)
            return
        with self._lock:  # on the wire: request_timeout_ms counts from now
            if seq in self._in_flight:  # (not if close() gave up on it meanwhile)
                self._in_flight[seq] = (_monotonic(), batches)
        future.add_done_callback(lambda f: self._complete(seq, *_outcome(f)))

    @contextmanager
    def _delivering(self) -> Iterator[None]:
        """This thread runs delivery callbacks meanwhile (see flush and close)."""
        self._completing.active = True
        try:
            yield
        finally:
            self._completing.active = False

    def _complete(self, seq: int, response: Any, error: BaseException | None) -> None:
        with self._delivering():
            super()._complete(seq, response, error)

    def _fail_expired(self, batches: list[Batch]) -> None:
        with self._delivering():
            super()._fail_expired(batches)

    def _stale_connection(self, now: float) -> BlockingConnection | None:
        """The connection, if a request on it waited longer than request_timeout_ms."""
        limit_s = self.config.request_timeout_ms / 1000
        if any(sent is not None and now - sent > limit_s for sent, _ in self._in_flight.values()):
            return self._client.open_connection()
        return None

    # -- flush / close -----------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> None:
        """Send every record queued so far and wait until each is acknowledged or failed.
        Raises :class:`KafkaTimeoutError` if ``timeout`` (seconds) passes first, and
        :class:`KafkaError` if called from a delivery callback (as Kafka's: the thread running
        it is the one that would complete the records it would wait for)."""
        if getattr(self._completing, "active", False):
            raise KafkaError("flush() called from a delivery callback would wait for itself")
        with self._flush_pending() as pending:
            # each batch's first record's future: concurrent.futures.wait makes them real ones
            if wait([record_future(batch, 0) for batch in pending], timeout).not_done:
                raise KafkaTimeoutError(f"flush did not complete in {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout`` seconds), then stop. Records still
        undelivered after the timeout fail with :class:`KafkaTimeoutError`. Called from a
        delivery callback, it waits for nothing (``timeout`` 0, as Kafka's): the thread
        running the callback is the one that would complete the records."""
        if self._closed:
            return
        if getattr(self._completing, "active", False):
            _LOGGER.warning("close() called from a delivery callback: timeout %s -> 0", timeout)
            timeout = 0
        with self._locked():
            self._closing = True
            self._appender.closed = True
        in_sender = threading.current_thread() is self._sender  # (acks=0 completes there)
        if not in_sender:
            self._sender.join(timeout)
        self._closed = True
        if self._sender.is_alive():
            with self._locked():
                stranded = self._pending()
                self._acc.drain()
                self._in_flight.clear()
            for batch in stranded:
                batch.complete(error=KafkaTimeoutError("producer closed before delivery"))
            if not in_sender:
                self._sender.join(5)
        self._client.close()


def _outcome(future: Future[Any]) -> tuple[Any, BaseException | None]:
    """A finished request's ``(response, None)``, or ``(None, error)``."""
    error = future.exception()
    return (None, error) if error is not None else (future.result()[0], None)
