"""The producer's edges an experienced Kafka user relies on, the same on every face: flush and
close with nothing or everything queued, a broker that stops answering, delivery callbacks,
ordering with one request in flight, metadata of a missing topic, record values at the
broker's size limit, keys and headers at their edges, and every codec with headers.

Where kafka-python (blocking) and aiokafka (async) say the same, the test pins it."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from odradek.client import (
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NewTopic,
    TopicPartition,
    UnknownTopicOrPartitionError,
    murmur2,
)
from tests.broker_process import BrokerProcess
from tests.client.faces.driver import Face
from tests.client.faces.test_edges import strict_broker, until  # noqa: F401 (a fixture)
from tests.client.faces.test_producer import read_all


@pytest.fixture(scope="module")
def stallable_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of this module's own, that :func:`stalled` may stop for a moment."""
    with BrokerProcess([tmp_path_factory.mktemp("stallable") / "logs"]) as process:
        yield process


@pytest.fixture
def stalled(stallable_broker: BrokerProcess) -> Iterator[Any]:
    """``with stalled():`` the stallable broker stops answering (SIGSTOP) until the block ends."""
    assert stallable_broker.process is not None
    pid = stallable_broker.process.pid

    class Stall:
        def __enter__(self) -> None:
            os.kill(pid, signal.SIGSTOP)

        def __exit__(self, *exc: object) -> None:
            os.kill(pid, signal.SIGCONT)

    try:
        yield Stall
    finally:
        os.kill(pid, signal.SIGCONT)


# -- flush -----------------------------------------------------------------------------------------
def test_flush_with_nothing_queued_returns_at_once(face: Face, topic: str) -> None:
    with face.producer(linger_ms=60_000) as producer:
        started_s = time.monotonic()
        producer.flush()
        producer.flush(0)
        delivery = producer.send(topic, b"v")
        producer.flush(5)
        assert delivery.result().offset == 0
        producer.flush(0)  # everything delivered: nothing to wait for
        assert time.monotonic() - started_s < 5


def test_flush_times_out_while_the_broker_does_not_answer(
    face: Face, topic: str, stallable_broker: BrokerProcess, stalled: Any
) -> None:
    stall = face.with_bootstrap(stallable_broker.bootstrap)
    with stall.producer(linger_ms=0) as producer:
        assert producer.send(topic, b"first").result().offset == 0
        with stalled():
            delivery = producer.send(topic, b"second")
            started_s = time.monotonic()
            with pytest.raises(KafkaTimeoutError):
                producer.flush(0.3)
            assert 0.25 <= time.monotonic() - started_s < 3
            assert not delivery.done()
        producer.flush(10)
        assert delivery.result().offset == 1


def test_flush_from_two_threads_at_once(face: Face, topic: str) -> None:
    if face.is_async:
        pytest.skip("one event loop: flush is awaited by tasks, not threads")
    with face.producer(linger_ms=60_000) as producer:
        sent = [producer.send(topic, b"v%d" % i) for i in range(50)]
        errors: list[BaseException] = []

        def flush() -> None:
            try:
                producer.flush(10)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=flush) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        assert errors == []
        assert all(d.done() for d in sent)
        assert [d.result().offset for d in sent] == list(range(50))


def test_a_flush_sends_a_large_linger_batch_at_once(face: Face, topic: str) -> None:
    for linger_ms in (0, 60_000):
        with face.producer(linger_ms=linger_ms) as producer:
            sent = [producer.send(topic, b"v") for _ in range(5)]
            started_s = time.monotonic()
            producer.flush(10)
            assert time.monotonic() - started_s < 5
            assert all(d.done() for d in sent)


# -- close -----------------------------------------------------------------------------------------
def test_close_twice_and_send_after_close(face: Face, topic: str) -> None:
    with face.producer() as producer:
        assert producer.send(topic, b"v").result().offset == 0
    if face.is_async:
        face.portal.call(producer._target.stop)  # type: ignore[union-attr]
    else:
        producer.target.close()
    with pytest.raises(KafkaError):
        producer.send(topic, b"after")
    with pytest.raises(KafkaError):
        producer.send(topic, b"after", b"key", partition=0)


def test_close_timeout_fails_what_a_stalled_broker_did_not_take(
    face: Face, topic: str, stallable_broker: BrokerProcess, stalled: Any
) -> None:
    if face.is_async:
        pytest.skip("aiokafka's stop() has no timeout")
    stall = face.with_bootstrap(stallable_broker.bootstrap)
    with stall.producer(linger_ms=60_000) as producer:
        first = producer.send(topic, b"first")
        producer.flush(10)
        assert first.result().offset == 0
        sent = [producer.send(topic, b"v%d" % i) for i in range(3)]
        with stalled():
            started_s = time.monotonic()
            producer.target.close(0.3)
            assert time.monotonic() - started_s < 3
            for delivery in sent:
                with pytest.raises(KafkaTimeoutError):
                    delivery.result(1)
        with pytest.raises(KafkaError):
            producer.send(topic, b"after")


def send_in_background(face: Face, producer: Any, *args: Any, **kwargs: Any) -> Future[Any]:
    """``producer.send(*args)`` started in the background: in a thread of its own (blocking
    face) or in a task of the event loop (async faces); a future of what it returns."""
    if face.portal is None:
        outcome: Future[Any] = Future()

        def run() -> None:
            try:
                outcome.set_result(producer.target.send(*args, **kwargs))
            except BaseException as exc:
                outcome.set_exception(exc)

        threading.Thread(target=run, daemon=True).start()
        return outcome
    return face.portal.start_task_soon(functools.partial(producer._target.send, *args, **kwargs))


def fails_with_kafka_error(face: Face, outcome: Future[Any]) -> None:
    """The background send raised a KafkaError, or returned a delivery that fails with one."""
    try:
        delivery = outcome.result(10)
    except KafkaError:
        return

    async def delivered() -> Any:
        return await delivery

    with pytest.raises(KafkaError):
        delivery.result(10) if face.portal is None else face.portal.call(delivered)


def test_close_while_a_send_waits_for_buffer_memory(face: Face, topic: str) -> None:
    """kafka-python and aiokafka: a send waiting for memory when the producer closes fails
    (it is not queued behind the close); what was queued is delivered."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1)])
    with face.producer(linger_ms=60_000, buffer_memory=1, max_block_ms=60_000) as producer:
        first = producer.send(topic, b"x" * 100, b"key")
        waiting = send_in_background(face, producer, topic, b"y", b"key")
        time.sleep(0.1)  # to reach its wait (nothing shows it); a close first fails it too
        assert not waiting.done()
        started_s = time.monotonic()
    assert first.result(0.01).offset == 0
    fails_with_kafka_error(face, waiting)
    assert time.monotonic() - started_s < 5


def test_close_while_a_send_waits_for_metadata(
    face: Face,
    topic: str,
    strict_broker: BrokerProcess,  # noqa: F811
) -> None:
    strict = face.with_bootstrap(strict_broker.bootstrap)
    started_s = time.monotonic()
    with strict.producer(max_block_ms=60_000) as producer:
        waiting = send_in_background(strict, producer, topic, b"x")
        time.sleep(0.1)  # to reach its wait (nothing shows it); a close first fails it too
        assert not waiting.done()
    fails_with_kafka_error(face, waiting)
    assert time.monotonic() - started_s < 5


# -- ordering and partitions -----------------------------------------------------------------------
def test_one_request_in_flight_keeps_send_order(face: Face, topic: str) -> None:
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with face.producer(max_in_flight=1, linger_ms=0, batch_size=200) as producer:
        sent = [producer.send(topic, b"v%d" % i, partition=i % 2) for i in range(200)]
        producer.flush(10)
        offsets = [[d.result().offset for d in sent[p::2]] for p in range(2)]
    assert offsets == [list(range(100)), list(range(100))]
    values = [r.value for r in read_all(face, topic, 2, 200)]
    assert values == [b"v%d" % i for p in range(2) for i in range(p, 200, 2)]


def test_one_request_in_flight_keeps_send_order_across_retries(
    face: Face, topic: str, stallable_broker: BrokerProcess, stalled: Any
) -> None:
    """Kafka's ``max.in.flight.requests.per.connection=1``: a request timed out by a broker that
    stopped answering is retried before any later batch of its partition, so the records keep
    their send order (a retry may write a record twice: no idempotence)."""
    stall = face.with_bootstrap(stallable_broker.bootstrap)
    options = {"max_in_flight": 1, "request_timeout_ms": 300, "retry_backoff_ms": 10}
    with stall.producer(linger_ms=0, batch_size=100, **options) as producer:
        sent = [producer.send(topic, b"v%d" % i) for i in range(5)]
        producer.flush(10)
        with stalled():
            sent += [producer.send(topic, b"v%d" % i) for i in range(5, 30)]
            time.sleep(0.5)  # longer than request_timeout_ms: the request in flight times out
        producer.flush(10)
        offsets = [d.result().offset for d in sent]
    assert offsets == sorted(offsets) and len(set(offsets)) == 30
    tp = TopicPartition(topic, 0)
    with stall.consumer(auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        values = [r.value for r in consumer.take(consumer.end_offsets([tp])[tp])]
    first_seen = list(dict.fromkeys(values))
    assert first_seen == [b"v%d" % i for i in range(30)]


def test_keyed_records_go_to_the_partitions_java_computes(face: Face, topic: str) -> None:
    """Kafka's UtilsTest murmur2 vectors give Java's partition of each key among 7."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 7)])
    java = {b"21": -973932308, b"foobar": -790332482, b"abc": 479470107}
    with face.producer() as producer:
        for key, hashed in java.items():
            assert murmur2(key) == hashed
            expected = (hashed & 0x7FFFFFFF) % 7
            assert producer.send(topic, b"v", key).result().partition == expected


def test_partitions_for_a_missing_topic_without_auto_creation(
    face: Face,
    topic: str,
    strict_broker: BrokerProcess,  # noqa: F811
) -> None:
    strict = face.with_bootstrap(strict_broker.bootstrap)
    with strict.producer(max_block_ms=300) as producer:
        started_s = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.partitions_for(topic)
        assert 0.29 <= time.monotonic() - started_s < 5
        with strict.admin() as admin:
            admin.create_topics([NewTopic(topic, 2)])
        assert producer.partitions_for(topic) == {0, 1}


# -- records at their edges ------------------------------------------------------------------------
def test_empty_and_null_keys_stay_distinct(face: Face, topic: str) -> None:
    with face.producer(linger_ms=20) as producer:
        sent = [
            producer.send(topic, b"a", b""),
            producer.send(topic, b"b", None),
            producer.send(topic, b"", b""),
            producer.send(topic, None, b""),
        ]
        producer.flush(10)
        sizes = [(d.result().serialized_key_size, d.result().serialized_value_size) for d in sent]
    assert sizes == [(0, 1), (-1, 1), (0, 0), (0, -1)]
    records = read_all(face, topic, 1, 4)
    assert [(r.key, r.value) for r in records] == [
        (b"", b"a"),
        (None, b"b"),
        (b"", b""),
        (b"", None),
    ]


def test_headers_with_null_values_and_non_ascii_keys(face: Face, topic: str) -> None:
    headers = [("clé", b"v"), ("日本", None), ("", b""), ("k", b"\xff" * 300)]
    with face.producer() as producer:
        assert producer.send(topic, b"v", headers=headers).result().offset == 0
        assert producer.send(topic, b"v", headers=[]).result().offset == 1
    records = read_all(face, topic, 1, 2)
    assert list(records[0].headers) == headers
    assert list(records[1].headers) == []


def test_timestamps_far_in_the_future_and_before_1970(face: Face, topic: str) -> None:
    """kafka-python and aiokafka send any int timestamp (Java's ProducerRecord refuses a
    negative one); the broker keeps it under CreateTime."""
    future_ms = int(time.time() * 1000) + 10 * 365 * 86_400_000
    with face.producer(linger_ms=20) as producer:
        sent = [producer.send(topic, b"v", timestamp_ms=ts) for ts in (future_ms, 0, -5, 2**62)]
        producer.flush(10)
        assert [d.result().timestamp for d in sent] == [future_ms, 0, -5, 2**62]
    records = read_all(face, topic, 1, 4)
    assert [r.timestamp for r in records] == [future_ms, 0, -5, 2**62]


def _largest_value_the_broker_takes() -> int:
    """The value size of a one-record batch (null key, no headers) of exactly the broker's
    default message.max.bytes (1048588)."""

    def varint_size(n: int) -> int:
        zigzag, size = n << 1, 1
        while zigzag >= 0x80:
            zigzag >>= 7
            size += 1
        return size

    value = 1048588
    while True:
        body = 1 + 1 + 1 + 1 + varint_size(value) + value + 1  # attrs, deltas, key, value, headers
        total = 61 + varint_size(body) + body
        if total <= 1048588:
            return value
        value -= 1


def test_a_value_of_exactly_the_brokers_limit_and_one_byte_more(face: Face, topic: str) -> None:
    largest = _largest_value_the_broker_takes()
    with face.producer(max_request_size=4 << 20, linger_ms=0) as producer:
        assert producer.send(topic, b"x" * largest).result().offset == 0
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, b"x" * (largest + 1)).result()
        assert producer.send(topic, b"after").result().offset == 1


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips_headers_and_keys(face: Face, topic: str, codec: Any) -> None:
    with face.producer(compression_type=codec, linger_ms=20) as producer:
        sent = [
            producer.send(
                topic,
                b"v%d" % i * 50,
                b"k%d" % i if i % 2 else None,
                headers=[("n", b"%d" % i), ("é", None)],
            )
            for i in range(20)
        ]
        producer.flush(10)
        assert [d.result().offset for d in sent] == list(range(20))
    records = read_all(face, topic, 1, 20)
    assert [(r.key, r.value, list(r.headers)) for r in records] == [
        (b"k%d" % i if i % 2 else None, b"v%d" % i * 50, [("n", b"%d" % i), ("é", None)])
        for i in range(20)
    ]


# -- delivery callbacks ----------------------------------------------------------------------------
def test_delivery_callbacks_run_once_and_survive_a_raising_one(
    face: Face, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """kafka-python's future and aiokafka's ``asyncio.Future``: ``add_done_callback(fn)``
    calls ``fn(future)`` once, at once if it is done; ``result()`` and ``exception()`` read
    it. A callback that raises is logged; the other callbacks and records go on."""
    with face.admin() as admin:
        admin.create_topics([NewTopic(topic, 1)])
    calls: list[tuple[str, Any, int]] = []

    def note(name: str) -> Any:
        def callback(future: Any) -> None:
            error = future.exception()
            outcome = type(error) if error is not None else future.result().offset
            calls.append((name, outcome, threading.get_ident()))

        return callback

    def boom(future: Any) -> None:
        raise RuntimeError("a user's callback fails")

    loop_thread = face.portal.call(threading.get_ident) if face.portal else None
    with face.producer(linger_ms=60_000) as producer:
        first = producer.send(topic, b"a", partition=0)
        second = producer.send(topic, b"b", partition=0)
        refused = producer.send(topic, b"c", partition=9)  # fails before it is queued
        first.add_done_callback(boom)
        first.add_done_callback(note("first"))
        second.add_done_callback(note("second"))
        refused.add_done_callback(note("refused"))
        assert [c[0] for c in calls] == ["refused"]  # done already: called at once
        producer.flush(10)
        assert first.done() and first.exception() is None
        assert isinstance(refused.exception(), UnknownTopicOrPartitionError)
        second.add_done_callback(note("late"))  # done already: called at once
        assert producer.send(topic, b"d", partition=0)  # the producer still works
        producer.flush(10)
    assert sorted((name, outcome) for name, outcome, _ in calls) == [
        ("first", 0),
        ("late", 1),
        ("refused", UnknownTopicOrPartitionError),
        ("second", 1),
    ]
    if loop_thread is not None:  # the async faces: in the event loop's thread
        assert {thread for _, _, thread in calls} == {loop_thread}
    assert "a user's callback fails" in caplog.text


@pytest.mark.parametrize("acks", [1, 0])
def test_close_from_a_delivery_callback_waits_for_nothing(
    face: Face, topic: str, acks: int
) -> None:
    """Kafka's ``close()`` from a callback is ``close(0)`` (kafka-python's too): the thread that
    runs the callback is the one that would complete the records it would wait for."""
    if face.is_async:
        pytest.skip("an async producer's stop() is awaited: a callback cannot call it")
    closed = threading.Event()
    errors: list[BaseException] = []

    def close(future: Any) -> None:
        try:
            producer.target.close()
        except BaseException as exc:
            errors.append(exc)
        closed.set()

    with face.producer(acks=acks) as producer:
        producer.send(topic, b"known").result()
        producer.send(topic, b"v").add_done_callback(close)
        assert closed.wait(10), "close() from the callback hung"
        assert errors == []
        with pytest.raises(KafkaError):
            producer.send(topic, b"after")


def test_flush_from_a_delivery_callback_raises(face: Face, topic: str) -> None:
    """Kafka's ``flush()`` from a callback raises (KafkaException: it may deadlock): the thread
    that runs the callback is the one that would complete the records it waits for."""
    if face.is_async:
        pytest.skip("an async producer's flush() is awaited: a callback cannot call it")
    outcome: Future[Any] = Future()

    def flush(future: Any) -> None:
        try:
            producer.send(topic, b"from the callback")
            producer.target.flush()
            outcome.set_result(None)
        except BaseException as exc:
            outcome.set_exception(exc)

    with face.producer() as producer:
        producer.send(topic, b"known").result()
        producer.send(topic, b"v").add_done_callback(flush)
        with pytest.raises(KafkaError, match="delivery callback"):
            outcome.result(10)
        producer.flush(10)  # from any other thread, it works
