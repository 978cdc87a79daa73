"""Produce and fetch against a real broker: round trips, codecs, acks, pipelining, backends."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import Compression, parse_batch_header
from odradek.protocol.records import decode_records
from tests.broker.wire import Wire, bad_events, batch, fetch_all, split_batches
from tests.broker_process import BrokerProcess

RECORDS = [
    (b"key-0", b"value-0", 1_700_000_000_000, ()),
    (None, b"no key", 1_700_000_000_001, ()),
    (b"tombstone", None, 1_700_000_000_002, ()),
    (None, None, 1_700_000_000_003, ()),
    (b"", b"", 1_700_000_000_004, ()),
    (b"k", b"with headers", 1_700_000_000_005, (("trace", b"abc"), ("empty", b""), ("n", None))),
    (b"\x00\xff" * 50, bytes(range(256)) * 40, 1_700_000_000_006, (("bin", b"\x00\x01"),)),
]


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_every_codec_round_trips_byte_identical(wire: Wire, topic: str, codec: Compression) -> None:
    wire.create_topic(topic)
    sent = [encode_batch(RECORDS, compression=codec), encode_batch(RECORDS[:2], compression=codec)]
    first = wire.produce(topic, 0, sent[0])
    second = wire.produce(topic, 0, sent[1])
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (second.error_code, second.base_offset) == (0, len(RECORDS))

    result, tail = wire.fetch(topic, 0, 0)
    assert result.error_code == 0 and result.high_watermark == len(RECORDS) + 2
    fetched = split_batches(tail)
    assert len(fetched) == 2 and sum(map(len, fetched)) == len(tail)
    for got, original, base in zip(fetched, sent, (0, len(RECORDS)), strict=True):
        assert parse_batch_header(got).base_offset == base
        # only baseOffset and partitionLeaderEpoch (0, stamped as Kafka does; the client sent
        # -1) differ: never re-encoded
        assert parse_batch_header(got).partition_leader_epoch == 0
        assert got[8:12] == original[8:12] and got[16:] == original[16:]
        assert parse_batch_header(got).compression == codec
    records = decode_records(fetched[0])
    assert [(r.key, r.value, r.timestamp_ms, r.headers) for r in records] == [
        (k, v, t, tuple(h)) for k, v, t, h in RECORDS
    ]
    assert [r.offset for r in records] == list(range(len(RECORDS)))


def test_several_batches_in_one_partition_section(wire: Wire, topic: str) -> None:
    wire.create_topic(topic)
    data = batch(3, tag="a") + batch(2, tag="b") + batch(1, tag="c")
    assert wire.produce(topic, 0, data).base_offset == 0
    records = fetch_all(wire, topic)
    assert [r.value for r in records] == [b"a0", b"a1", b"a2", b"b0", b"b1", b"c0"]
    assert [r.offset for r in records] == list(range(6))


def test_multi_partition_multi_topic_produce(wire: Wire, topic: str) -> None:
    other = topic + "-other"
    wire.create_topic(topic, partitions=3)
    wire.create_topic(other, partitions=2)
    wire.produce(topic, 1, batch(5, tag="pre"))  # partition 1 starts at offset 5 below
    sections = [
        (topic, 0, batch(2, tag="t0")),
        (topic, 1, batch(3, tag="t1")),
        (topic, 2, batch(1, tag="t2")),
        (other, 0, batch(4, tag="o0")),
        (other, 1, batch(1, tag="o1", compression=Compression.ZSTD)),
    ]
    request, raw = wire.produce_request(sections, acks=m.ACKS_ALL)
    response = wire.call(request, raw)
    assert response.error_code == 0
    results = {
        (t.name, p.partition_index): (p.error_code, p.base_offset)
        for t in response.topics
        for p in t.partitions
    }
    assert results == {
        (topic, 0): (0, 0),
        (topic, 1): (0, 5),
        (topic, 2): (0, 0),
        (other, 0): (0, 0),
        (other, 1): (0, 0),
    }
    for name, partition, data in sections:
        expected = [r.value for r in decode_records(data)]
        assert [r.value for r in fetch_all(wire, name, partition)][-len(expected) :] == expected


def test_acks_zero_gets_no_response_and_appends(
    shared_broker: BrokerProcess, wire: Wire, topic: str
) -> None:
    wire.create_topic(topic)
    request, raw = wire.produce_request([(topic, 0, batch(4))], acks=m.ACKS_NONE)
    wire.send(request, raw)
    wire.send(request, raw)
    # The next response on this connection belongs to the ApiVersions request sent after the
    # two produces: acks=0 is never answered, and the appends happened in arrival order first.
    cid = wire.send(m.ApiVersionsRequest(correlation_id=0))
    response, _ = wire.recv()
    assert isinstance(response, m.ApiVersionsResponse) and response.correlation_id == cid
    assert [r.offset for r in fetch_all(wire, topic)] == list(range(8))


@pytest.mark.parametrize("acks", [m.ACKS_LEADER, m.ACKS_ALL], ids=["acks1", "acks_all"])
def test_acks_one_and_all_answer_with_offsets(
    shared_broker: BrokerProcess, wire: Wire, topic: str, acks: int
) -> None:
    wire.create_topic(topic)
    offsets = [wire.produce(topic, 0, batch(10), acks=acks).base_offset for _ in range(5)]
    assert offsets == [0, 10, 20, 30, 40]
    assert len(fetch_all(wire, topic)) == 50
    assert bad_events(shared_broker.lines) == []


@pytest.mark.parametrize("acks", [m.ACKS_LEADER, m.ACKS_ALL], ids=["acks1", "acks_all"])
def test_pipelined_produce_requests_keep_order(wire: Wire, topic: str, acks: int) -> None:
    wire.create_topic(topic)
    frames = []
    cids = []
    for i in range(100):
        request, raw = wire.produce_request([(topic, 0, batch(3, tag=f"r{i}-"))], acks=acks)
        request.correlation_id = cid = wire.cid()
        cids.append(cid)
        frames.append(b"".join(bytes(p) for p in m.encode_request(request, raw)))
    wire.send_bytes(b"".join(frames))  # all 100 before reading a single response
    base_offsets = {}
    for _ in range(100):
        response, _ = wire.recv()
        part = response.topics[0].partitions[0]
        assert part.error_code == 0
        base_offsets[response.correlation_id] = part.base_offset
    assert sorted(base_offsets) == cids
    assert [base_offsets[c] for c in cids] == [3 * i for i in range(100)]
    records = fetch_all(wire, topic)
    assert [r.value for r in records] == [
        f"r{i}-{j}".encode() for i in range(100) for j in range(3)
    ]


def test_two_clients_at_once(shared_broker: BrokerProcess, topic: str) -> None:
    with Wire(shared_broker.port) as admin:  # type: ignore[arg-type]
        admin.create_topic(topic)
    errors: list[BaseException] = []

    def client(name: str) -> Callable[[], None]:
        def run() -> None:
            try:
                with Wire(shared_broker.port) as w:  # type: ignore[arg-type]
                    for i in range(100):
                        assert w.produce(topic, 0, batch(2, tag=f"{name}{i}-")).error_code == 0
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=client(name)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    with Wire(shared_broker.port) as reader:  # type: ignore[arg-type]
        records = fetch_all(reader, topic)
    assert [r.offset for r in records] == list(range(400))
    for name in "ab":
        mine = [r.value for r in records if r.value.startswith(name.encode())]
        assert mine == [f"{name}{i}-{j}".encode() for i in range(100) for j in range(2)]


def test_fetch_from_the_middle_and_limits(wire: Wire, topic: str) -> None:
    wire.create_topic(topic)
    for i in range(10):
        wire.produce(topic, 0, batch(10, tag=f"b{i}-", value_bytes=100))
    result, tail = wire.fetch(topic, 0, 55)
    first = decode_records(split_batches(tail)[0])
    assert first[0].offset == 50  # the batch holding 55 starts at 50: never split at its start
    assert [r.offset for r in fetch_all(wire, topic, start=55)] == list(range(55, 100))
    # A tiny limit still returns the first batch whole (KIP-74).
    result, tail = wire.fetch(topic, 0, 0, partition_max_bytes=1)
    assert len(split_batches(tail)) == 1 and len(tail) > 1
    # At the log end: nothing; beyond it: OFFSET_OUT_OF_RANGE.
    result, tail = wire.fetch(topic, 0, 100)
    assert (result.error_code, len(tail), result.high_watermark) == (0, 0, 100)
    result, tail = wire.fetch(topic, 0, 101)
    assert result.error_code == 1 and len(tail) == 0
    result, _ = wire.fetch(topic, 7, 0)
    assert result.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_round_trip_on_each_backend(
    broker_factory: Callable[..., BrokerProcess], backend: str
) -> None:
    broker = broker_factory(backend=backend)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("smoke", partitions=2)
        for acks in (m.ACKS_NONE, m.ACKS_LEADER, m.ACKS_ALL):
            request, raw = wire.produce_request([("smoke", 1, batch(3))], acks=acks)
            wire.send(request, raw)
            if acks != m.ACKS_NONE:
                response, _ = wire.recv()
                assert response.topics[0].partitions[0].error_code == 0
        assert [r.offset for r in fetch_all(wire, "smoke", 1)] == list(range(9))
    assert broker.stop() == 0
    assert bad_events(broker.lines) == []
