"""The async producer (anyio), aiokafka-style: ``await start()`` / ``await stop()`` or
``async with``; ``fut = await p.send(...)`` then ``md = await fut``; ``await send_and_wait``.

Batching, partitioning, retries and errors are those of :class:`odradek.client.producer.Producer`
(same :class:`~odradek.client.accumulator.Accumulator` and response handling). A sender task in the
producer's own task group closes lingering batches and sends Produce requests, each in a task
of its own (up to ``max_in_flight_requests_per_connection``). ``start()`` enters that task
group and ``stop()`` leaves it, so both must be called from the same task (``async with``
does this for you).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from typing import Any

import anyio
import anyio.abc

from odradek.client import ops
from odradek.client.accumulator import BATCH_HEADER_BYTES, Accumulator, Batch
from odradek.client.async_client import AsyncClient
from odradek.client.core import backoff_ms
from odradek.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,  # type: ignore[attr-defined]
    for_code,
)
from odradek.client.partitioner import Partitioner, UserPartitioner
from odradek.client.producer_core import (
    ProducerConfig,
    TopicPartitionCounts,
    as_bytes,
    handle_produce_response,
    retry_at_s,
    topic_error,
)
from odradek.client.record_buffer import record_size
from odradek.client.types import RecordMetadata, TopicPartition

__all__ = ["AsyncProducer", "DeliveryHandle"]

_monotonic = time.monotonic
_time_ns = time.time_ns


class DeliveryHandle:
    """Awaitable result of one record: ``await handle`` -> :class:`RecordMetadata`."""

    __slots__ = ("_batch", "_error", "_index")

    def __init__(
        self, batch: Batch | None, index: int = 0, error: BaseException | None = None
    ) -> None:
        self._batch = batch
        self._index = index
        self._error = error

    def done(self) -> bool:
        return self._batch is None or self._batch.is_done

    async def _result(self) -> RecordMetadata:
        batch = self._batch
        if batch is None:
            assert self._error is not None
            raise self._error
        if not batch.is_done:
            event = anyio.Event()
            batch.add_done_callback(lambda _: event.set())
            await event.wait()
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self._result().__await__()


class AsyncProducer:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        acks: int | str = 1,
        linger_ms: int = 5,
        batch_size: int = 1_048_576,
        buffer_memory: int = 33_554_432,
        compression_type: str | None = None,
        partitioner: str | UserPartitioner = "default",
        max_request_size: int = 1_048_576,
        max_in_flight_requests_per_connection: int = 5,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int = 30_000,
        retries: int = 2_147_483_647,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        max_block_ms: int = 60_000,
        metadata_max_age_ms: int = 300_000,
        client_id: str = "odradek-python",
    ) -> None:
        self.config = cfg = ProducerConfig.make(
            acks=acks,
            linger_ms=linger_ms,
            batch_size=batch_size,
            buffer_memory=buffer_memory,
            compression_type=compression_type,
            max_request_size=max_request_size,
            max_in_flight=max_in_flight_requests_per_connection,
            delivery_timeout_ms=delivery_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            retries=retries,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
            max_block_ms=max_block_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self._client = AsyncClient(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
        )
        self._partitioner = Partitioner(partitioner)
        self._batch_size = min(cfg.batch_size, cfg.max_request_size - BATCH_HEADER_BYTES)
        self._metadata = TopicPartitionCounts(cfg.metadata_max_age_ms, _monotonic())
        self._partition_counts = self._metadata.counts
        self._acc = Accumulator(
            batch_size=cfg.batch_size,
            linger_s=cfg.linger_ms / 1000,
            delivery_timeout_s=cfg.delivery_timeout_ms / 1000,
            on_batch_closed=self._on_batch_closed,
        )
        self._acc.compression = cfg.compression
        self._in_flight: list[list[Batch]] = []
        self._flushing = 0
        self._closing = False
        self._tg: anyio.abc.TaskGroup | None = None
        self._wake: anyio.Event | None = None
        self._progress: anyio.Event | None = None

    # -- lifetime ----------------------------------------------------------------------------
    async def start(self) -> None:
        await self._client.connection()  # fail fast if no broker answers
        self._wake = anyio.Event()
        self._progress = anyio.Event()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run_sender)

    async def stop(self) -> None:
        """Deliver everything queued, then stop the sender and close the connection."""
        if self._tg is None:
            return
        self._closing = True
        self._notify()
        tg, self._tg = self._tg, None
        try:
            await tg.__aexit__(None, None, None)
        finally:
            await self._client.close()

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _on_progress(self) -> None:
        if self._progress is not None:
            self._progress.set()
            self._progress = anyio.Event()

    # -- send --------------------------------------------------------------------------------
    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> DeliveryHandle:
        if self._tg is None or self._closing:
            raise KafkaError("producer is not started (or is stopping)")
        if type(value) is not bytes and value is not None:
            value = as_bytes(value, "value")
        if type(key) is not bytes and key is not None:
            key = as_bytes(key, "key")
        count = self._partition_counts.get(topic)
        if count is None:
            try:
                count = await self._wait_for_topic(topic)
            except KafkaError as exc:
                return DeliveryHandle(None, error=exc)
        if partition is None:
            partition = self._partitioner.partition(topic, key, count)
        elif not 0 <= partition < count:
            return DeliveryHandle(
                None,
                error=UnknownTopicOrPartitionError(f"{topic} has {count} partitions"),
            )
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        size = record_size(key, value, headers)
        cfg = self.config
        if size + BATCH_HEADER_BYTES > cfg.max_request_size:
            return DeliveryHandle(None, error=for_code(10, f"record of ~{size} bytes too large"))
        acc = self._acc
        if acc.buffered_bytes >= cfg.buffer_memory:
            with anyio.fail_after(cfg.max_block_ms / 1000):
                while acc.buffered_bytes >= cfg.buffer_memory:
                    assert self._progress is not None
                    self._notify()
                    await self._progress.wait()
        tp = TopicPartition(topic, partition)
        batch = acc.open.get(tp)
        if batch is None or batch.size_bytes + size > self._batch_size:
            if batch is not None:
                acc.close(batch)
                self._notify()
            batch = acc.new_batch(tp, _monotonic())
            self._notify()  # the sender's wake-up time changed
        return DeliveryHandle(batch, acc.append(batch, key, value, timestamp_ms, headers))

    async def send_and_wait(self, topic: str, value: bytes | None = None, **kwargs: Any) -> Any:
        return await (await self.send(topic, value, **kwargs))

    def _on_batch_closed(self, tp: TopicPartition, records: int) -> None:
        self._partitioner.on_new_batch(tp.topic, tp.partition, self._partition_counts[tp.topic])

    async def _wait_for_topic(self, topic: str) -> int:
        cfg = self.config
        deadline = _monotonic() + cfg.max_block_ms / 1000
        attempt = 0
        while True:
            meta = await self._client.metadata([topic], allow_auto_create=True)
            info = meta.topics.get(topic)
            error = topic_error(topic, info)
            if error is None:
                assert info is not None
                self._partition_counts[topic] = len(info.partitions)
                return len(info.partitions)
            delay_s = backoff_ms(attempt, cfg.retry_backoff_ms, cfg.retry_backoff_max_ms) / 1000
            if not error.retriable or _monotonic() + delay_s >= deadline:
                if error.retriable:
                    error = type(error)(
                        f"topic {topic!r} not present in metadata after {cfg.max_block_ms} ms"
                    )
                raise error
            await anyio.sleep(delay_s)
            attempt += 1

    async def partitions_for(self, topic: str) -> set[int]:
        count = self._partition_counts.get(topic)
        if count is None:
            count = await self._wait_for_topic(topic)
        return set(range(count))

    # -- sender ------------------------------------------------------------------------------
    async def _run_sender(self) -> None:
        acc = self._acc
        cfg = self.config
        assert self._tg is not None
        tg = self._tg
        while True:
            now = _monotonic()
            acc.close_expired(now, force=self._flushing > 0 or self._closing)
            if len(self._in_flight) < cfg.max_in_flight:
                batches = acc.take_ready(now, cfg.max_request_size)
                if batches:
                    self._in_flight.append(batches)
                    tg.start_soon(self._send_batches, batches)
                    stale_topics = self._metadata.due(now)
                    if stale_topics is not None:
                        tg.start_soon(self._refresh_metadata, stale_topics)
                    continue
            if self._closing and not acc.unfinished() and not self._in_flight:
                return
            wakeup = acc.next_wakeup_s(now)
            self._wake = anyio.Event()
            with anyio.move_on_after(wakeup if wakeup is not None else 3600):
                await self._wake.wait()

    async def _send_batches(self, batches: list[Batch]) -> None:
        cfg = self.config
        self._acc.encode(batches)
        request, raw = ops.build_produce(
            {b.tp: b.data for b in batches},  # type: ignore[misc]
            acks=cfg.acks,
            timeout_ms=cfg.request_timeout_ms,
        )
        for batch in batches:
            batch.attempts += 1
        response: Any = None
        error: BaseException | None = None
        try:
            conn = await self._client.connection()
            try:
                with anyio.fail_after(cfg.request_timeout_ms / 1000):
                    result = await conn.request(request, raw)
            except TimeoutError:
                await conn.aclose()  # unanswered: reconnect and retry (as the blocking one)
                raise KafkaConnectionError("Produce request timed out") from None
            response = None if result is None else result[0]
        except KafkaError as exc:
            error = exc
        self._in_flight.remove(batches)
        self._complete(batches, response, error)
        self._notify()
        self._on_progress()

    def _complete(self, batches: list[Batch], response: Any, error: BaseException | None) -> None:
        retry: list[Batch] = []
        now = _monotonic()
        cfg = self.config
        for batch, outcome in handle_produce_response(batches, response, error):
            if outcome is None:
                self._acc.buffered_bytes -= batch.size_bytes
                continue
            at_s = retry_at_s(cfg, batch, outcome, now)
            if at_s is not None:
                batch.retry_at_s = at_s
                retry.append(batch)
            else:
                batch.complete(error=outcome)
                self._acc.buffered_bytes -= batch.size_bytes
        if retry:
            self._acc.requeue(retry)

    async def _refresh_metadata(self, topics: list[str]) -> None:
        try:
            meta = await self._client.metadata(topics)
        except KafkaError:
            return  # kept as it was; asked again after metadata_max_age_ms
        self._metadata.update(meta.topics)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued so far and wait for each batch to complete."""
        pending = [*self._acc.unfinished(), *(b for bs in self._in_flight for b in bs)]
        self._flushing += 1
        self._notify()
        try:
            with anyio.fail_after(timeout):
                for batch in pending:
                    if not batch.is_done:
                        event = anyio.Event()
                        batch.add_done_callback(lambda _, e=event: e.set())
                        await event.wait()
        except TimeoutError:
            raise KafkaTimeoutError(f"flush did not complete in {timeout} s") from None
        finally:
            self._flushing -= 1
