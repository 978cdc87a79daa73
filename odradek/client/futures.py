"""What ``send`` returns: the delivery result of one record, read from its batch's (one shared
result per :class:`~odradek.client.accumulator.Batch`, as Kafka's ``FutureRecordMetadata``): a
:class:`RecordFuture` from the blocking producer, a :class:`DeliveryHandle` from the async one;
a record refused before it was queued gets a :class:`FailedFuture` or a handle holding the error.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any

import anyio

from odradek.client.accumulator import Batch
from odradek.client.types import RecordMetadata

__all__ = ["DeliveryHandle", "FailedFuture", "RecordFuture", "batch_done", "record_future"]


class RecordFuture(Future):  # type: ignore[type-arg]
    """A ``concurrent.futures.Future[RecordMetadata]`` that costs nothing until used.

    Creating a real Future per record costs ~2 µs (a Condition and an RLock); this one stores
    ``(batch, index)`` in slots. Its public methods (``done``, ``result``, ``exception``,
    ``add_done_callback``, ...) read the batch's shared result directly; it becomes a real
    Future (settled from the batch) only the first time other Future machinery
    (``concurrent.futures.wait``, ``as_completed``) reads one of its (still empty) fields.
    Create one with :func:`record_future` (no ``__init__`` call: ~100 ns cheaper)."""

    __slots__ = (
        "_batch",
        "_condition",
        "_done_callbacks",
        "_exception",
        "_index",
        "_result",
        "_state",
        "_waiters",
    )

    def __getattr__(self, name: str) -> Any:  # only called for an empty slot
        if name in _LAZY_FIELDS:
            self._materialize()
            return object.__getattribute__(self, name)
        raise AttributeError(name)

    def _materialize(self) -> None:
        with _MATERIALIZE_LOCK:
            try:
                object.__getattribute__(self, "_condition")
                return
            except AttributeError:
                Future.__init__(self)
        self._batch.add_done_callback(self._settle)

    def _settle(self, batch: Batch) -> None:
        if batch.error is not None:
            self.set_exception(batch.error)
        else:
            self.set_result(batch.result(self._index))

    # -- the Future API, straight from the batch (delivery cannot be cancelled) -------------
    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._batch.is_done

    def done(self) -> bool:
        return self._batch.is_done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        return _finished(self._batch, timeout).result(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return _finished(self._batch, timeout).error

    def add_done_callback(self, fn: Callable[[Future[Any]], object]) -> None:
        """Call ``fn(future)`` once the record is delivered or failed (at once if it is);
        an exception it raises is logged, as ``concurrent.futures`` does."""

        self._batch.add_done_callback(_logged(fn, self))


def _logged(fn: Callable[[Any], object], arg: Any) -> Callable[[Batch], None]:
    """A batch callback that calls ``fn(arg)`` and logs (not raises) what it raises."""

    def call(_: Batch) -> None:
        try:
            fn(arg)
        except Exception:
            _LOGGER.exception("exception calling callback for %r", arg)

    return call


def record_future(batch: Batch, index: int) -> RecordFuture:
    future = _new_object(RecordFuture)
    future._batch = batch
    future._index = index
    return future


def _finished(batch: Batch, timeout: float | None) -> Batch:
    """``batch`` once it has completed; ``TimeoutError`` if ``timeout`` seconds pass first."""
    if not batch.is_done:
        done = threading.Event()
        batch.add_done_callback(lambda _: done.set())
        if not done.wait(timeout):
            raise TimeoutError(f"record not delivered within {timeout} s")
    return batch


_new_object = object.__new__
_LOGGER = logging.getLogger("odradek.client.producer")
_LAZY_FIELDS = frozenset(
    ("_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks")
)
_MATERIALIZE_LOCK = threading.Lock()


class FailedFuture(Future):  # type: ignore[type-arg]
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.set_exception(error)


class DeliveryHandle:
    """Awaitable result of one record: ``await handle`` -> :class:`RecordMetadata`.

    It also has the part of ``asyncio.Future``'s API that aiokafka users call on what
    aiokafka's ``send`` returns, on every backend (trio too): :meth:`done`, :meth:`result`,
    :meth:`exception`, :meth:`add_done_callback` and :meth:`cancelled` (a delivery cannot be
    cancelled: cancelling an ``await handle`` leaves the record queued)."""

    __slots__ = ("_batch", "_error", "_index")  # _error: set only with _batch None (C: unset)

    def __init__(
        self, batch: Batch | None, index: int = 0, error: BaseException | None = None
    ) -> None:
        self._batch = batch
        self._index = index
        self._error = error

    def done(self) -> bool:
        return self._batch is None or self._batch.is_done

    def cancelled(self) -> bool:
        return False

    def result(self) -> RecordMetadata:
        """The record's metadata, or raises its delivery error; raises
        ``asyncio.InvalidStateError`` while it is not :meth:`done` (as ``asyncio.Future``)."""
        batch = self._settled()
        if batch is None:
            raise self._error  # type: ignore[misc]
        return batch.result(self._index)

    def exception(self) -> BaseException | None:
        """The record's delivery error (``None`` if it was delivered); raises
        ``asyncio.InvalidStateError`` while it is not :meth:`done`."""
        batch = self._settled()
        return self._error if batch is None else batch.error

    def add_done_callback(self, fn: Callable[[DeliveryHandle], object]) -> None:
        """Call ``fn(handle)`` once the record is delivered or failed, at once if it is.
        Unlike ``asyncio.Future`` (which schedules it on its loop), ``fn`` runs in the thread
        that completes the record's batch, as it does so: for :class:`AsyncProducer` the
        event loop's thread (on trio too), inside the producer's sender; it must not block.
        An exception it raises is logged, as ``concurrent.futures`` does."""
        call = _logged(fn, self)
        if self._batch is None:
            call(None)  # type: ignore[arg-type]
        else:
            self._batch.add_done_callback(call)

    def _settled(self) -> Batch | None:
        if not self.done():
            raise asyncio.InvalidStateError("record not delivered yet")
        return self._batch

    async def _result(self) -> RecordMetadata:
        if self._batch is not None:
            await batch_done(self._batch)
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self._result().__await__()


async def batch_done(batch: Batch) -> None:
    """Wait until ``batch`` completes (in the calling task; a cancellation leaves it be)."""
    if not batch.is_done:
        event = anyio.Event()
        batch.add_done_callback(lambda _: event.set())
        await event.wait()
