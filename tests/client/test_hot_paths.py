"""Round 2 of the client's hot paths, against a real broker: the producer's lock-free tail
batches (mixed with locked appends to the same partition, closed by linger while threads
append), and the consumer's chunked iteration over lazily built records (seek and commit in
the middle of a ``for`` loop, small polls over big batches, ``next()`` mixed with ``for``)."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

from odradek.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from odradek.client.record_buffer import PyRecordBuffer
from odradek.client.record_decoder import DecodedRecords
from tests.client.test_roundtrip import consume_all


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions)])


def test_tail_and_locked_appends_keep_one_threads_order(bootstrap: str, topic: str) -> None:
    """Null-key records (the lock-free tail) and records with a key, a timestamp, headers or
    an explicit partition (the locked path) to the same partition stay in send order, and
    every future reports the offset its record got."""
    _create(bootstrap, topic)
    sent: list[tuple[bytes | None, bytes]] = []
    futures = []
    with Producer(bootstrap, linger_ms=1, batch_size=2_000) as producer:
        for i in range(3000):
            value = b"v%d" % i
            kind = i % 7
            if kind == 3:
                futures.append(producer.send(topic, value, key=b"k"))
                sent.append((b"k", value))
                continue
            if kind == 5:
                futures.append(producer.send(topic, value, partition=0))
            elif kind == 6:
                futures.append(producer.send(topic, value, headers=[("h", b"1")]))
            elif i % 11 == 0:
                futures.append(producer.send(topic, value, timestamp_ms=1_000 + i))
            else:
                futures.append(producer.send(topic, value))
            sent.append((None, value))
        producer.flush()
    assert [f.result(0).offset for f in futures] == list(range(3000))
    records = consume_all(bootstrap, [TopicPartition(topic, 0)], 3000)
    assert [(r.key, r.value) for r in records] == sent
    assert [r.offset for r in records] == list(range(3000))


def test_threads_race_the_linger_on_the_tail(bootstrap: str, topic: str) -> None:
    """Three threads append lock-free while the sender closes tails on a 0 ms linger and a
    fourth thread flushes: every record lands once, each thread's in order, and each future's
    offset is its record's."""
    _create(bootstrap, topic, partitions=2)
    offsets: dict[int, list[tuple[int, int]]] = {}
    stop = threading.Event()
    interval_s = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch at (nearly) every bytecode boundary
    try:
        _race(bootstrap, topic, offsets, stop)
    finally:
        sys.setswitchinterval(interval_s)
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in (0, 1)])
    total = sum(ends.values())
    assert total == 9000
    records = consume_all(bootstrap, [TopicPartition(topic, p) for p in (0, 1)], 9000)
    by_position = {(r.partition, r.offset): r.value for r in records}
    for n in range(3):
        assert [by_position[at] for at in offsets[n]] == [b"%d-%d" % (n, i) for i in range(3000)]


def _race(
    bootstrap: str, topic: str, offsets: dict[int, list[tuple[int, int]]], stop: threading.Event
) -> None:
    with Producer(bootstrap, linger_ms=0, batch_size=3_000) as producer:

        def worker(n: int) -> None:
            futures = [producer.send(topic, b"%d-%d" % (n, i)) for i in range(3000)]
            offsets[n] = [(f.result(60).partition, f.result(60).offset) for f in futures]

        def flusher() -> None:
            while not stop.is_set():
                producer.flush(30)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
        extra = threading.Thread(target=flusher)
        extra.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        stop.set()
        extra.join(60)


def _filled(bootstrap: str, topic: str, count: int) -> None:
    _create(bootstrap, topic)
    with Producer(bootstrap, linger_ms=60_000) as producer:
        for i in range(count):
            producer.send(topic, b"%d" % i)
        producer.flush()  # one big batch


@pytest.mark.parametrize("read_position_first", [True, False])
def test_a_seek_inside_a_for_loop(bootstrap: str, topic: str, read_position_first: bool) -> None:
    """A seek mid-chunk: the records of the chunk not yet yielded are given back before the
    seek, not after it (which would move back again), also when nothing else (``position``)
    is called first."""
    _filled(bootstrap, topic, 2000)
    tp = TopicPartition(topic, 0)
    seen: list[int] = []
    with Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
        max_poll_records=100,
    ) as consumer:
        consumer.assign([tp])
        for record in consumer:
            seen.append(int(record.value))  # type: ignore[arg-type]
            if len(seen) == 150:
                if read_position_first:
                    assert consumer.position(tp) == 150  # mid-chunk: the next record not yielded
                consumer.seek(tp, 1990)
            if len(seen) == 160:
                break
        if read_position_first:
            assert consumer.position(tp) == 2000
    assert seen == [*range(150), *range(1990, 2000)]


def test_next_and_for_share_one_position(bootstrap: str, topic: str) -> None:
    _filled(bootstrap, topic, 1000)
    tp = TopicPartition(topic, 0)
    with Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
        max_poll_records=64,
    ) as consumer:
        consumer.assign([tp])
        first = [next(consumer).offset for _ in range(10)]
        rest = [r.offset for r in consumer]
    assert first + rest == list(range(1000))


def test_small_polls_take_a_big_batch_in_pieces(bootstrap: str, topic: str) -> None:
    _filled(bootstrap, topic, 500)
    tp = TopicPartition(topic, 0)
    got: list[int] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        while len(got) < 500:
            for records in consumer.poll(timeout_ms=2000, max_records=7).values():
                assert len(records) <= 7
                got += [r.offset for r in records]
                assert consumer.position(tp) == got[-1] + 1
            pending = consumer._fetcher.pending_records.get(tp)
            assert pending is None or isinstance(pending, list) or hasattr(pending, "take")
    assert got == list(range(500))


def test_decoded_records_take_in_chunks() -> None:
    buffer = PyRecordBuffer()
    for i in range(10):
        buffer.append(b"%d" % i, None, 5, None)
    # offsets 10..19, every record below offset 12 skipped, as below a consumer's position
    batch = DecodedRecords(buffer.body(), 10, 10, 5, None, 0, "t", 3, 12)
    assert len(batch) == 8
    first = batch.take(3)
    assert [(r.offset, r.value, r.key, r.headers) for r in first] == [
        (12, b"2", None, []),
        (13, b"3", None, []),
        (14, b"4", None, []),
    ]
    assert len(batch) == 5
    assert [r.offset for r in batch.take(10)] == [15, 16, 17, 18, 19]
    assert len(batch) == 0 and not batch


def test_send_is_the_class_method_and_appends_null_key_records_to_the_tail(bootstrap: str) -> None:
    class Counting(Producer):
        def send(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.calls = getattr(self, "calls", 0) + 1
            return super().send(*args, **kwargs)

    with Producer(bootstrap, linger_ms=60_000) as plain, Counting(bootstrap) as counting:
        assert "send" not in vars(plain) and plain.send.__func__ is Producer.send
        taken: list[bool] = []
        append = plain._tail_append

        def spy(topic: str, value: bytes) -> Any:
            future = append(topic, value)
            taken.append(future is not None)
            return future

        plain._tail_append = spy  # type: ignore[method-assign]
        futures = [plain.send("t-tail", b"v") for _ in range(4)]
        plain.send("t-tail", b"k", b"key")  # a key: the locked path, not the tail
        plain.flush(timeout=10)
        assert taken == [False, True, True, True]  # the first record opened the tail batch
        assert [f.result(timeout=10).offset for f in futures] == [0, 1, 2, 3]
        counting.send("t-sub", b"v").result(timeout=10)
        assert counting.calls == 1


def test_a_full_tail_batch_is_replaced_by_one_on_the_next_sticky_partition(bootstrap: str) -> None:
    # 10 records of 100 bytes fill a batch (136 estimated bytes each): a full tail must be
    # closed by the next record and a new tail opened, on the sticky partition it moved to,
    # so only the record after each full batch leaves the lock-free path
    Admin(bootstrap).create_topics([NewTopic("t-full-tail", 3)])
    with Producer(bootstrap, batch_size=1360, linger_ms=60_000) as producer:
        declined = 0
        append = producer._tail_append

        def spy(topic: str, value: bytes) -> Any:
            nonlocal declined
            future = append(topic, value)
            declined += future is None
            return future

        producer._tail_append = spy  # type: ignore[method-assign]
        futures = [producer.send("t-full-tail", bytes(100)) for _ in range(1000)]
        producer.flush(timeout=10)
        assert declined <= 1000 // 10 + 2
        partitions = {f.result(timeout=10).partition for f in futures}
        assert len(partitions) > 1  # the sticky partition moved on (KIP-480)
