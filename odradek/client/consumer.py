"""The blocking consumer (kafka-python-like): manual assignment, seek, poll, iteration.

Pipelining: before a poll returns, it sends a Fetch for the partitions that need data
(:meth:`Consumer._prefetch`); its future completes on the connection's reader thread while the
application works. Consumer groups: :class:`odradek.client.group_driver.BlockingGroup`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from itertools import chain
from typing import Any

from odradek.client import consumer_core as core
from odradek.client import ops
from odradek.client.blocking_client import Client
from odradek.client.drivers import Closing, blocking_face
from odradek.client.errors import KafkaError
from odradek.client.group import GroupMember
from odradek.client.group_driver import BlockingGroup
from odradek.client.types import ConsumerRecord, TopicPartition

__all__ = ["Consumer"]

_monotonic = time.monotonic


@blocking_face
class Consumer(Closing, core.ConsumerCore):
    """The blocking consumer. Parameters and errors: :class:`~.consumer_core.ConsumerCore`.

    Thread-safety: one thread at a time (as kafka-python's); the group's heartbeats run on a
    daemon thread of their own. ``poll`` and iteration block the calling thread up to their
    timeout; rebalance callbacks run inside ``poll``.
    """

    _client_type = Client

    def _init_face(self) -> None:
        self._in_flight: list[tuple[dict[TopicPartition, int], Future[Any]]] = []
        self._not_before_s = 0.0  # fetch backoff after a failure
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError("consumer is closed")

    def _make_group(self, member: GroupMember) -> BlockingGroup:
        return BlockingGroup(self._client, member)

    # -- polling -------------------------------------------------------------------------------
    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records fetched for the assigned partitions, waiting up to ``timeout_ms`` for some."""
        self._check_open()
        self._rewind()
        return self._poll(timeout_ms, max_records or self.max_poll_records)

    def _poll(
        self, timeout_ms: float, max_records: int
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        fetcher = self._fetcher
        deadline = _monotonic() + timeout_ms / 1000
        with self._polling():
            while True:
                if self._group is not None:
                    self._group.step()
                self._collect(0)
                if fetcher.positions_unknown() and _monotonic() >= self._not_before_s:
                    try:
                        self._client.run(fetcher.resolve_positions_op())
                    except KafkaError as exc:  # as the async fetch task: a retriable one waits
                        self._back_off(fetcher.on_error(exc))
                fetcher.raise_errors()
                records = fetcher.drain(max_records)
                self._prefetch()
                if records:
                    return records
                remaining = deadline - _monotonic()
                if remaining <= 0:
                    return {}
                if not self._in_flight:
                    backoff_left_s = max(0.0, self._not_before_s - _monotonic())
                    time.sleep(min(remaining, backoff_left_s or remaining))
                    continue
                self._collect(remaining)

    def _prefetch(self) -> None:
        """Send a Fetch for the partitions that need data now, if any (so several may be in
        flight, each for other partitions: see :mod:`odradek.client.fetcher`)."""
        if _monotonic() < self._not_before_s:
            return
        offsets = self._fetcher.fetchable()
        if not offsets:
            return
        request = ops.build_fetch(offsets, **self._fetcher.fetch_options)
        try:
            future = self._client.connection().submit(request)
        except KafkaError as exc:
            self._back_off(self._fetcher.on_error(exc))
            return
        assert future is not None
        self._fetcher.fetch_started(offsets)
        self._in_flight.append((offsets, future))

    def _collect(self, timeout_s: float) -> None:
        """Apply the answered Fetches, waiting up to ``timeout_s`` for one."""
        if timeout_s > 0:
            wait((future for _, future in self._in_flight), timeout_s, FIRST_COMPLETED)
        for entry in [entry for entry in self._in_flight if entry[1].done()]:
            self._in_flight.remove(entry)
            offsets, future = entry
            self._fetcher.fetch_ended(offsets)
            try:
                delay_s = self._fetcher.on_fetch(offsets, ops.parse_fetch(*future.result()))
            except KafkaError as exc:
                delay_s = self._fetcher.on_error(exc)
            self._back_off(delay_s)

    def _back_off(self, delay_s: float) -> None:
        if delay_s:
            self._not_before_s = _monotonic() + delay_s

    # -- iteration -----------------------------------------------------------------------------
    # Iterating hands out the records of one drain at a time through a plain list iterator, so
    # a ``for`` loop over the consumer runs no Python code per record: ``__iter__`` chains the
    # list iterators (``itertools.chain``, in C) and Python runs once per drained chunk.
    def __iter__(self) -> Iterator[ConsumerRecord]:
        return chain.from_iterable(self._iter_chunks())

    def _iter_chunks(self) -> Iterator[Iterator[ConsumerRecord]]:
        while True:
            yield self._iter_it  # what is left of the current chunk (possibly nothing)
            if not self._next_chunk():
                return

    def __next__(self) -> ConsumerRecord:
        for record in self._iter_it:
            return record
        if not self._next_chunk():
            raise StopIteration
        return next(self._iter_it)

    def _next_chunk(self) -> bool:
        """Drain the next records for iteration (``False``: ``consumer_timeout_ms`` passed).
        ``max_poll_records`` at a time: few enough that the records alive at once rarely
        trigger a garbage-collector pass (its generation 0 holds 700 objects)."""
        timeout_ms = self.consumer_timeout_ms
        deadline = None if timeout_ms is None else _monotonic() + timeout_ms / 1000
        budget = self.max_poll_records
        while True:
            wait_ms = 1000 if deadline is None else (deadline - _monotonic()) * 1000
            batch = self._poll(max(0.0, wait_ms), budget)
            if batch:
                break
            if deadline is not None and _monotonic() >= deadline:
                return False
        self._hand_out(batch)
        return True

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Commit (with auto-commit) and leave the group, then close the connection."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._group is not None:
                self._rewind()
                self._group.close()
        finally:
            self._client.close()
