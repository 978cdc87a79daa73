"""Producer logic shared by the blocking and async producers, written once and driven by both
(no I/O here): configuration, record checks and placement, waiting for a topic's metadata and
refreshing it (sans-I/O operations each face drives), the sender's decision each round, the
retry decision, and the handling of Produce responses. Each face adds only its waiting,
locking and sending (:mod:`odradek.client.producer`, :mod:`odradek.client.async_producer`).

Rules (both faces):

- Batches: per partition, in the :class:`~odradek.client.accumulator.Accumulator`. The
  default ``batch_size`` is 1 MiB: big batches keep the per-record cost low, and the broker's
  ``message.max.bytes`` is ~1 MiB.
- A Produce request holds at most one batch per partition; up to ``max_in_flight`` are out at
  once, so a retry may reorder the records of a partition (as Kafka without idempotence).
- A retriable error or a lost connection puts a batch back ahead of the later batches of its
  partition, while :func:`~odradek.client.produce_response.retry_at_s` allows it; otherwise
  every record of the batch fails with the error.
- A batch fails with ``KafkaTimeoutError`` once ``delivery_timeout_ms`` has passed since it was
  opened, wherever it waits, ready or in flight (Kafka's ``delivery.timeout.ms``: see
  :meth:`ProducerCore._sender_round`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from odradek.client.accumulator import Accumulator, Batch
from odradek.client.config import ProducerConfig, options_of
from odradek.client.drivers import Sleep, operation
from odradek.client.errors import KafkaError, KafkaTimeoutError, for_code
from odradek.client.ops import Op, build_produce, metadata_op
from odradek.client.partitioner import Partitioner
from odradek.client.produce_response import handle_produce_response, retry_at_s
from odradek.client.producer_metadata import TopicPartitionCounts, topic_error
from odradek.client.record_buffer import TailAppender, record_size
from odradek.client.types import TopicPartition
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import HEADER_SIZE

__all__ = ["ProducerCore"]

Headers = list[tuple[str, bytes | None]] | None
#: a record ready for the accumulator: topic, partition, key, value, timestamp, headers, size
Placed = tuple[str, int, bytes | None, bytes | None, int, Headers, int]
_TAIL_RETRY_S = 0.0002


def as_bytes(data: Any, what: str) -> bytes:
    """A key or value that is not ``bytes`` (nor ``None``) as ``bytes``: a ``bytearray`` or a
    ``memoryview`` is copied. Raises ``TypeError`` for anything else (serialize it first)."""
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"{what} must be bytes or None, not {type(data).__name__} (serialize it first)")


class ProducerCore:
    """A producer of records to the broker's topics, batched per partition.

    Args:
      bootstrap_servers: ``"host:port"``, ``"h1:p1,h2:p2"`` or a list of those.
      acks: 0 (no answer), 1 (appended), -1 or ``"all"`` (appended and fsynced).
      linger_ms: how long a batch waits for more records before it is sent.
      batch_size: estimated record bytes per batch at most (capped by ``max_request_size``).
      buffer_memory: bytes buffered at most; ``send`` then waits up to ``max_block_ms``.
      compression_type: ``None``, ``"gzip"``, ``"snappy"``, ``"lz4"`` or ``"zstd"``.
      partitioner: ``"default"`` (murmur2 of the key, sticky for null keys),
        ``"round_robin"``, ``"random"``, or a callable ``(key, all_partitions, available)``.
      max_request_size: bytes per Produce request (and so per record) at most.
      max_in_flight (or Kafka's ``max_in_flight_requests_per_connection``): Produce requests
        awaiting an answer at most.
      delivery_timeout_ms: how long a record may take, retries included, before it fails:
        at least ``linger_ms + request_timeout_ms`` (Kafka's rule); ``None``: 120 s, or that
        sum if it is more.
      request_timeout_ms: how long a request may go unanswered (the connection is then
        closed and its batches retried).
      retries, retry_backoff_ms, retry_backoff_max_ms: retries of a batch after a retriable
        error, after a backoff doubling from ``retry_backoff_ms`` to ``retry_backoff_max_ms``.
      max_block_ms: how long ``send`` waits for a topic's metadata or for buffer memory.
      metadata_max_age_ms: the partition counts are asked again this often, so partitions
        added meanwhile get records.
      client_id: sent with every request.

    Raises:
      ValueError: a bad option (:class:`~.config.ProducerConfig`, the partitioner).

    What ``send`` raises, and what fails a record's delivery instead: :meth:`send`. The
    options are kept, validated, in :attr:`config` (a :class:`~.config.ProducerConfig`).
    """

    _client_type: Any  # the face's client class: Client or AsyncClient
    _delivery_type: type  # what send() returns per record: RecordFuture or DeliveryHandle
    _closed = False  # set by Producer.close(): answers arriving after it retry nothing

    @options_of(ProducerConfig)
    def __init__(self, bootstrap_servers: str | Sequence[str], **options: Any) -> None:
        if "max_in_flight_requests_per_connection" in options:  # Kafka's long name
            options["max_in_flight"] = options.pop("max_in_flight_requests_per_connection")
        self.config = cfg = ProducerConfig(bootstrap_servers=bootstrap_servers, **options)
        self._partitioner = Partitioner(cfg.partitioner)
        self._sticky = self._partitioner.kind == "default"  # null keys: one partition a batch
        self._client = self._io = self._client_type(config=cfg)
        # a batch (61-byte header + records) never exceeds max_request_size
        self._max_record_bytes = cfg.max_request_size - HEADER_SIZE
        self._metadata = TopicPartitionCounts(cfg.metadata_max_age_ms, time.monotonic())
        self._partition_counts = self._metadata.counts  # read by send() (hot path)
        self._acc = Accumulator(
            batch_size=min(cfg.batch_size, self._max_record_bytes),
            linger_s=cfg.linger_ms / 1000,
            delivery_timeout_s=cfg.delivery_timeout_ms / 1000,
            compression=cfg.compression_type,
            on_batch_closed=self._on_batch_closed,
        )
        # send()'s lock-free tail append (client.record_buffer); closed (every record takes the
        # face's _queue) while the producer does not run
        self._appender = TailAppender(self._acc.tails, self._acc.batch_size, self._delivery_type)
        self._tail_append = self._appender.append
        # the sender's state, changed under the face's _locked() (see _sender_round)
        # seq -> (when it was sent, or None while it is not on the wire, batches)
        self._in_flight: dict[int, tuple[float | None, list[Batch]]] = {}
        self._request_seq = 0
        self._flushing = 0  # flush() calls under way: every open batch is closed at once
        self._expiring: list[Batch] = []  # taken by _sender_round, until _fail_expired ends
        self._closing = False
        self._init_face()

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers = None,
    ) -> Any:
        """Queue one record for ``topic``. The blocking producer returns a
        ``concurrent.futures.Future`` of its :class:`RecordMetadata`; the async one returns
        an awaitable: ``await producer.send(...)`` queues the record and gives a
        :class:`~odradek.client.futures.DeliveryHandle` (``await`` it for the metadata).
        ``RecordMetadata.timestamp`` is the broker's log-append time under LogAppendTime,
        else the record's own timestamp (Kafka's, kafka-python's and aiokafka's).

        ``partition`` None: the partitioner chooses; ``timestamp_ms`` None: now; ``headers``:
        ``(str, bytes | None)`` pairs. Raises ``TypeError`` for a key or value that is not
        ``bytes``, ``bytearray``, ``memoryview`` or ``None`` (or a header that is not such a
        pair, a ``timestamp_ms`` that is not an int), :class:`KafkaError` if the
        producer is closed (or, async, not started); every other error (unknown or invalid
        topic, partition out of range, record too large, a failed or timed-out delivery) is
        the record's delivery result."""
        if key is None and partition is None and timestamp_ms is None and headers is None:
            delivery = self._tail_append(topic, value)  # TailAppender.append: C, lock-free
            if delivery is not None:
                return delivery
        place = self._place_op(topic, value, key, partition, timestamp_ms, headers)
        return self._queue(place, self._sticky and partition is None and key is None)

    def _add(self, placed: Placed, tail: bool, now_s: float) -> tuple[Batch, int, bool] | None:
        """Add a placed record to the accumulator (see ``Accumulator.add``); for a record that
        may go to its topic's tail (``tail``), a full tail is closed first and the record
        goes to the sticky partition chosen then (KIP-480: a new batch, a new partition)."""
        topic = placed[0]
        if tail and self._acc.retire_full_tail(topic, placed[-1]):
            count = self._partition_counts[topic]
            placed = (topic, self._partitioner.partition(topic, None, count), *placed[2:])
        return self._acc.add(*placed, now_s, tail)

    def _queue(self, place: Op[Placed | KafkaError], tail: bool) -> Any:
        """The face's way of running ``place`` and adding the record to the accumulator
        (``tail``: it may open its topic's lock-free tail batch)."""
        raise NotImplementedError

    def _init_face(self) -> None:
        """The face's own state (threads, locks, events), set up last."""

    def _on_batch_closed(self, tp: TopicPartition) -> None:
        self._partitioner.on_new_batch(tp.topic, tp.partition, self._partition_counts[tp.topic])

    def _place_op(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers,
    ) -> Op[Placed | KafkaError]:
        """The record, checked, as :data:`Placed` (waiting for the topic's metadata the first
        time), or the error that fails its delivery; raises what :meth:`send` raises."""
        if type(value) is not bytes and value is not None:
            value = as_bytes(value, "value")
        if type(key) is not bytes and key is not None:
            key = as_bytes(key, "key")
        count = self._partition_counts.get(topic)
        if count is None:
            try:
                count = yield from self._topic_op(topic)
            except KafkaError as exc:
                return exc
        if partition is None:
            partition = self._partitioner.partition(topic, key, count)
        elif not 0 <= partition < count:
            return for_code(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"{topic} has {count} partitions, not {partition}",
            )
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        elif not isinstance(timestamp_ms, int):  # the pure-Python buffer would keep it
            raise TypeError(f"timestamp_ms must be an int, not {type(timestamp_ms).__name__}")
        size = record_size(key, value, headers)
        if size > self._max_record_bytes:
            return for_code(
                ErrorCode.MESSAGE_TOO_LARGE, f"record of ~{size} bytes exceeds max_request_size"
            )
        return topic, partition, key, value, timestamp_ms, headers, size

    def _topic_op(self, topic: str) -> Op[int]:
        """The partition count of ``topic``, asking the broker (allowing auto-creation) until
        it is known. Raises the topic's error: at once if it is not retriable (an invalid
        name), once ``max_block_ms`` has passed if it is (an unknown topic)."""
        cfg = self.config
        deadline_s = time.monotonic() + cfg.max_block_ms / 1000
        attempt = 0
        while True:
            meta = yield from metadata_op([topic], allow_auto_create=True)
            info = meta.topics.get(topic)
            error = topic_error(topic, info)
            if error is None:
                assert info is not None
                self._partition_counts[topic] = len(info.partitions)
                return len(info.partitions)
            remaining_s = deadline_s - time.monotonic()
            if not error.retriable or remaining_s <= 0:
                if error.retriable:
                    error = type(error)(
                        f"topic {topic!r} not present in metadata after {cfg.max_block_ms} ms"
                    )
                raise error
            delay_s = cfg.backoff_s(attempt)
            attempt += 1
            yield Sleep(min(delay_s, remaining_s))  # backoff before asking the broker again

    def _refresh_op(self, topics: list[str]) -> Op[None]:
        """Ask the partition counts of ``topics`` again (a failure keeps them as they were;
        they are asked again after ``metadata_max_age_ms``)."""
        try:
            meta = yield from metadata_op(topics)
        except KafkaError:
            return
        self._metadata.update(meta.topics)

    @operation
    def partitions_for(self, topic: str) -> Op[set[int]]:
        """The partitions of ``topic`` as last seen (waiting for its metadata the first time,
        up to ``max_block_ms``)."""
        count = self._partition_counts.get(topic)
        if count is None:
            count = yield from self._topic_op(topic)
        return set(range(count))

    def _produce_request(self, batches: list[Batch]) -> tuple[m.ProduceRequest, list[Any]]:
        """Encode ``batches`` and count the attempt: the Produce request and its record bytes."""
        self._acc.encode(batches)
        for batch in batches:
            batch.attempts += 1
        return build_produce(
            {b.tp: b.data for b in batches},  # type: ignore[misc]
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
        )

    # -- the sender (sans-I/O: each face drives it, under its _locked()) ---------------------
    def _locked(self) -> AbstractContextManager[None]:
        """The face's guard of the accumulator and the sender's state, held while they change;
        it wakes the sender (and whoever waits for buffer memory) on the way out."""
        raise NotImplementedError

    def _sender_round(
        self, now_s: float
    ) -> tuple[int, list[Batch], Op[None] | None, float | None, list[Batch]] | None:
        """What the sender does next: ``(seq, batches, refresh, wait_s, expired)``. Fail
        ``expired`` (:meth:`_fail_expired`, with no lock held); send ``batches`` if there are
        any (they are in flight from now, under ``seq`` in ``_in_flight``, so a flush or a
        close sees them while they are being sent; the face stamps the entry when the request
        is on the wire and ends it with :meth:`_complete`), then run ``refresh`` unless it is
        ``None`` (the metadata refresh, when due: ``TopicPartitionCounts.due``); else wait
        ``wait_s`` seconds (``None``: until woken) before the next round. ``None`` once the
        producer is closing and nothing is left to send or to await: the sender stops."""
        acc = self._acc
        cfg = self.config
        closed_all = acc.close_expired(now_s, force=self._flushing > 0 or self._closing)
        in_flight = [b for _, bs in self._in_flight.values() for b in bs if not b.is_done]
        expired_in_flight = [b for b in in_flight if b.deadline_s <= now_s]
        acc.release(expired_in_flight)  # its request's answer frees nothing more
        expired = acc.take_expired(now_s) + expired_in_flight
        self._expiring += expired
        if len(self._in_flight) < cfg.max_in_flight:
            batches = acc.take_ready(now_s, cfg.max_request_size)
            if batches:
                self._request_seq += 1
                self._in_flight[self._request_seq] = (None, batches)
                topics = self._metadata.due(now_s)
                refresh = None if topics is None else self._refresh_op(topics)
                return self._request_seq, batches, refresh, 0.0, expired
        if expired:
            return 0, [], None, 0.0, expired
        if self._closing and not self._in_flight and not acc.unfinished():
            return None
        if not closed_all:  # a due tail was being appended to: try again soon
            return 0, [], None, _TAIL_RETRY_S, []  # (a zero wait would spin, holding the GIL)
        wait_s = acc.next_wakeup_s(now_s)
        if in_flight:  # the next in-flight deadline
            until_s = max(0.0, min(b.deadline_s for b in in_flight) - now_s)
            wait_s = until_s if wait_s is None else min(wait_s, until_s)
        return 0, [], None, wait_s, []

    def _fail_expired(self, batches: list[Batch]) -> None:
        """Fail the batches whose delivery deadline passed (from :meth:`_sender_round`), as
        Kafka's producer does, though a batch in flight may still be written."""
        timeout_ms = self.config.delivery_timeout_ms
        for batch in batches:
            batch.complete(
                error=KafkaTimeoutError(
                    f"{len(batch)} record(s) for {batch.tp.topic}-{batch.tp.partition} expired: "
                    f"{timeout_ms} ms (delivery_timeout_ms) passed since the batch was created"
                )
            )
        if batches:
            with self._locked():
                self._expiring = [batch for batch in self._expiring if not batch.is_done]

    def _memory_timeout(self) -> KafkaTimeoutError:
        """What ``send`` raises when ``buffer_memory`` stays full for ``max_block_ms``."""
        cfg = self.config
        return KafkaTimeoutError(
            f"buffer_memory of {cfg.buffer_memory} bytes full for {cfg.max_block_ms} ms"
        )

    def _pending(self) -> list[Batch]:
        """Every batch not completed yet: open, ready, in flight or being failed."""
        in_flight = (b for _, bs in self._in_flight.values() for b in bs)
        return [*self._acc.unfinished(), *in_flight, *self._expiring]

    @contextmanager
    def _flush_pending(self) -> Iterator[list[Batch]]:
        """While it is open the sender closes every batch at once (a flush): yields the
        batches to wait for, every one not completed yet."""
        with self._locked():
            self._flushing += 1
            pending = self._pending()
        try:
            yield pending
        finally:
            with self._locked():
                self._flushing -= 1

    def _complete(self, seq: int, response: Any, error: BaseException | None) -> None:
        """End request ``seq`` from its response (or its error). The request leaves
        ``_in_flight`` only with its retried batches back in the queue, under the same
        ``_locked()``, so a flush or a close never misses a batch; the batches are completed
        (their callbacks run) with no lock held. Nothing if ``close()`` gave up on it first."""
        with self._locked():
            entry = self._in_flight.get(seq)
            if entry is None:
                return
            self._in_flight[seq] = (None, entry[1])  # answered: no request timeout any more
        retry: list[Batch] = []
        finished: list[Batch] = []
        now_s = time.monotonic()
        for batch, outcome in handle_produce_response(entry[1], response, error):
            if outcome is not None:
                at_s = None if self._closed else retry_at_s(self.config, batch, outcome, now_s)
                if at_s is not None:
                    batch.retry_at_s = at_s
                    retry.append(batch)
                    continue
                batch.complete(error=outcome)
            finished.append(batch)
        with self._locked():
            if self._in_flight.pop(seq, None) is not None:  # else close() failed them all
                self._acc.settle(retry, finished)
