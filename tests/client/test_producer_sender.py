"""The blocking producer's sender thread around one request: while the request is written,
while its answer is completed, and how long it may take. The batches of a request count as in
flight from the moment they leave the accumulator until they are completed or back in it, so a
``flush`` (or a ``close``) never misses them; ``request_timeout_ms`` counts from the moment the
request is on the wire."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from odradek.client import (
    AsyncProducer,
    KafkaConnectionError,
    KafkaTimeoutError,
    Producer,
    producer_core,
)


class HeldConnection:
    """A real connection whose ``submit`` first says a request reached it, then waits until
    the test lets it go (as a socket whose send buffer is full would), or fails once."""

    def __init__(self, connection: Any, *, fail_once: bool = False) -> None:
        self.connection = connection
        self.reached = threading.Event()
        self.release = threading.Event()
        self.fail_once = fail_once
        if fail_once:
            self.release.set()

    def submit(self, request: Any, raw: Any = b"") -> Any:
        self.reached.set()
        assert self.release.wait(30)
        if self.fail_once:
            self.fail_once = False
            raise KafkaConnectionError("the connection broke (a test)")
        return self.connection.submit(request, raw)


def test_flush_waits_for_a_request_being_written(bootstrap: str, topic: str) -> None:
    with Producer(bootstrap, linger_ms=0) as producer:
        producer.send(topic, b"first", b"k").result(10)  # the topic exists, metadata known
        held = HeldConnection(producer._client.connection())
        producer._client.connection = lambda: held  # type: ignore[method-assign]
        delivery = producer.send(topic, b"second", b"k")
        assert held.reached.wait(10)  # the sender took the batch and is writing it
        with pytest.raises(KafkaTimeoutError):
            producer.flush(0.2)  # before: returned at once, the batch in no list
        assert not delivery.done()
        held.release.set()
        producer.flush(10)
        assert delivery.result().offset == 1


def test_flush_waits_for_a_batch_on_its_way_back_to_the_queue(
    bootstrap: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retriable failure: between the decision to retry and the batch's return to the
    ready queue (no lock held), the batch is still pending for a flush."""
    with Producer(bootstrap, linger_ms=0) as producer:
        producer.send(topic, b"first", b"k").result(10)
        failing = HeldConnection(producer._client.connection(), fail_once=True)
        producer._client.connection = lambda: failing  # type: ignore[method-assign]
        deciding, decide = threading.Event(), threading.Event()
        retry_at_s = producer_core.retry_at_s

        def held_retry_at_s(*args: Any) -> float | None:
            deciding.set()
            assert decide.wait(30)
            return retry_at_s(*args)

        monkeypatch.setattr(producer_core, "retry_at_s", held_retry_at_s)
        delivery = producer.send(topic, b"second", b"k")
        assert deciding.wait(10)  # the request failed; its batch is being settled
        with pytest.raises(KafkaTimeoutError):
            producer.flush(0.2)  # before: returned at once, the batch in no list
        decide.set()
        producer.flush(10)
        assert delivery.result().offset == 1


def test_request_timeout_counts_from_the_write(bootstrap: str, topic: str) -> None:
    """A request that waited for its connection longer than ``request_timeout_ms`` before it
    was written is not stale: it is answered (it was failed and, with retries, sent twice)."""
    with Producer(bootstrap, linger_ms=0, request_timeout_ms=500, retries=0) as producer:
        producer.send(topic, b"first", b"k").result(10)
        connection = producer._client.connection

        def slow_connection() -> Any:  # a reconnection that takes its time
            time.sleep(0.8)
            return connection()

        producer._client.connection = slow_connection  # type: ignore[method-assign]
        assert producer.send(topic, b"second", b"k").result(10).offset == 1


def test_a_batch_fails_at_its_delivery_deadline_in_flight_or_not() -> None:
    """Kafka's delivery.timeout.ms, in the sender's decision (no I/O: an async producer that
    is not started runs nothing by itself): a batch in flight past its deadline is failed at
    once, its bytes freed (as Java's), and its request's answer, arriving later, changes
    nothing."""
    producer = AsyncProducer("127.0.0.1:9", linger_ms=0, delivery_timeout_ms=1000,
                             request_timeout_ms=1000)  # fmt: skip
    producer._partition_counts["t"] = 1
    now_s = time.monotonic()
    batch = producer._add(("t", 0, None, b"v", 0, None, 100), False, now_s)[0]  # type: ignore[index]
    seq, batches, _, _, expired = producer._sender_round(now_s)  # type: ignore[misc]
    assert batches == [batch] and expired == []  # in flight from now
    producer._produce_request(batches)  # what the face sends
    waiting = producer._sender_round(now_s + 0.25)
    assert waiting is not None and waiting[4] == [] and waiting[3] == pytest.approx(0.75)
    expiring = producer._sender_round(now_s + 1.0)
    assert expiring is not None and expiring[4] == [batch]
    assert producer._acc.buffered_bytes == 0  # a send waiting for memory may go on
    producer._fail_expired(expiring[4])
    with pytest.raises(KafkaTimeoutError, match="delivery_timeout_ms"):
        batch.result(0)
    producer._complete(seq, None, KafkaConnectionError("the answer came too late"))
    assert not producer._in_flight and producer._acc.buffered_bytes == 0
    assert producer._pending() == []
