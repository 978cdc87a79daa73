"""Group commit: one fsync round makes every ``acks=all`` append that arrived meanwhile durable.

A produce with ``acks=all`` appends (on the event loop, to the page cache), then waits here
until the partition's recovery point passes its last offset. One flusher task runs rounds:

1. wait until at least one waiter is queued;
2. take every queued waiter, and fsync each of their logs once, in a worker thread (the event
   loop keeps appending meanwhile; those appends queue for the next round);
3. wake each waiter with its log's outcome (durable, or the ``OSError`` the fsync raised).

So under load each round's fsync covers many requests, and an idle broker pays one fsync per
request: latency is one fsync, throughput is bounded by bandwidth, not by fsync count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import anyio
import anyio.to_thread

from odradek.storage.log import Log

__all__ = ["GroupCommit"]


class _Waiter:
    __slots__ = ("error", "event", "log", "offset")

    def __init__(self, log: Log, offset: int) -> None:
        self.log = log
        self.offset = offset
        self.event = anyio.Event()
        self.error: OSError | None = None


class GroupCommit:
    """Batches fsyncs across concurrent ``acks=all`` produce requests."""

    def __init__(
        self,
        on_error: Callable[[Log, OSError], None],
        on_round: Callable[[float], None] | None = None,
    ) -> None:
        self._queue: list[_Waiter] = []
        self._wakeup = anyio.Event()
        self._on_error = on_error
        self._on_round = on_round  # each round's duration in seconds (metrics)
        self.rounds = 0  # fsync rounds run (observability, tests)
        self.waiting_requests = 0  # acks=all requests in wait_durable now (metrics)

    async def wait_durable(self, log: Log, last_offset: int) -> None:
        """Return once every offset ≤ ``last_offset`` of ``log`` is fsynced; raise OSError if
        the fsync failed."""
        if log.recovery_point > last_offset:
            return
        waiter = _Waiter(log, last_offset)
        self._queue.append(waiter)
        self._wakeup.set()
        self.waiting_requests += 1
        try:
            await waiter.event.wait()
        finally:
            self.waiting_requests -= 1
        if waiter.error is not None:
            raise waiter.error

    def flush_soon(self, log: Log) -> None:
        """Queue a flush of ``log`` in the next round without waiting for it (after a roll,
        and for ``flush.ms``)."""
        self._queue.append(_Waiter(log, log.next_offset - 1))
        self._wakeup.set()

    async def run(self) -> None:
        """The flusher loop; runs until cancelled (then wakes nobody: the server is stopping)."""
        while True:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
            waiters, self._queue = self._queue, []
            if not waiters:
                continue
            logs = {id(w.log): w.log for w in waiters}.values()
            started_s = time.perf_counter()
            errors = await anyio.to_thread.run_sync(_flush_each, list(logs))
            if self._on_round is not None:
                self._on_round(time.perf_counter() - started_s)
            self.rounds += 1
            for log, error in errors.items():
                self._on_error(log, error)
            for waiter in waiters:
                waiter.error = errors.get(waiter.log)
                waiter.event.set()


def _flush_each(logs: Iterable[Log]) -> dict[Log, OSError]:
    errors: dict[Log, OSError] = {}
    for log in logs:
        try:
            log.flush()
        except OSError as exc:
            errors[log] = exc
    return errors
