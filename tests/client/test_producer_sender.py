"""The blocking producer's sender thread, at the moment a request is being written: the batches
it took are in flight from the moment they leave the accumulator, so a ``flush`` (or a
``close``) that runs while the request is being written waits for them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from odradek.client import KafkaTimeoutError, Producer


class HeldConnection:
    """A real connection whose ``submit`` waits until the test lets it go (as a socket whose
    send buffer is full would), and says when a request has reached it."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.reached = threading.Event()
        self.release = threading.Event()

    def submit(self, request: Any, raw: Any = b"") -> Any:
        self.reached.set()
        assert self.release.wait(30)
        return self.connection.submit(request, raw)


def test_flush_waits_for_a_request_being_written(bootstrap: str, topic: str) -> None:
    with Producer(bootstrap, linger_ms=0) as producer:
        producer.send(topic, b"first", b"k").result(10)  # the topic exists, metadata known
        held = HeldConnection(producer._client.connection())
        producer._client.connection = lambda: held  # type: ignore[method-assign]
        delivery = producer.send(topic, b"second", b"k")
        assert held.reached.wait(10)  # the sender took the batch and is writing it
        with pytest.raises(KafkaTimeoutError):
            producer.flush(0.2)  # before the fix: returned at once, the batch in no list
        assert not delivery.done()
        held.release.set()
        producer.flush(10)
        assert delivery.result().offset == 1
