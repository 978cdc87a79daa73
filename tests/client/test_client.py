"""The low-level blocking client: thread-safe pipelined calls, acks=0, raw records."""

from __future__ import annotations

import threading

from odradek.client import Client, Producer, TopicPartition
from odradek.client.ops import build_produce
from odradek.protocol import messages as m
from odradek.protocol.records import decode_records


def test_concurrent_calls_from_threads_are_pipelined(bootstrap: str, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    with Producer(bootstrap) as producer:
        producer.send(topic, b"x").result(30)
    errors: list[BaseException] = []
    with Client(bootstrap) as client:

        def worker(i: int) -> None:
            try:
                for _ in range(20):
                    if i % 2:
                        assert client.list_offsets({tp: -1})[tp].offset == 1  # type: ignore[union-attr]
                    else:  # long polls (nothing new arrives) share the connection meanwhile
                        fetched = client.fetch_raw({tp: 1}, max_wait_ms=20)
                        assert fetched[tp].error is None and len(fetched[tp].records) == 0
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors
        assert client.connection().in_flight == 0


def test_raw_produce_with_acks_0_and_fetch_raw(bootstrap: str, topic: str) -> None:
    from odradek.protocol.batch_builder import encode_batch

    tp = TopicPartition(topic, 0)
    with Client(bootstrap) as client:
        client.metadata([topic], allow_auto_create=True)
        request, raw = build_produce(
            {tp: [encode_batch([(b"k", b"v")] * 3)]}, acks=0, timeout_ms=1000
        )
        assert client.call(request, raw) == (None, memoryview(b""))  # no response for acks=0
        request, raw = build_produce({tp: [encode_batch([(None, b"w")])]}, acks=1, timeout_ms=1000)
        response, _ = client.call(request, raw)
        assert isinstance(response, m.ProduceResponse)
        assert response.topics[0].partitions[0].base_offset == 3  # the acks=0 batch landed first
        fetched = client.fetch_raw({tp: 0})[tp]
        assert fetched.high_watermark == 4 and fetched.log_start_offset == 0
        records = decode_records(bytes(fetched.records[: len(fetched.records)]))
        assert [r.value for r in records] == [b"v", b"v", b"v"]
