"""The sans-I/O core: correlation ids, out-of-order responses, acks=0, protocol violations,
bootstrap parsing, backoff; the producer's batch encoder against the protocol decoder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client.accumulator import Batch, encode_batch
from odradek.client.config import ClientConfig
from odradek.client.core import parse_bootstrap
from odradek.client.errors import KafkaConnectionError
from odradek.client.protocol_core import ProtocolCore, ProtocolViolation, connection_error
from odradek.client.records import iter_records
from odradek.client.types import TopicPartition
from odradek.protocol import messages as m
from odradek.protocol.record_batch import Compression, patch_base_offset, validate_client_batch
from odradek.protocol.records import decode_records


def response_bytes(response: m.Response) -> bytes:
    return b"".join(bytes(p) for p in m.encode_response(response))


def test_responses_match_requests_in_any_order() -> None:
    core = ProtocolCore()
    cid_a, parts = core.send(m.MetadataRequest(correlation_id=0), token="a")
    cid_b, _ = core.send(m.ListOffsetsRequest(correlation_id=0), token="b")
    cid_c, _ = core.send(m.ProduceRequest(correlation_id=0, acks=0), token="c")
    assert len({cid_a, cid_b, cid_c}) == 3 and isinstance(parts[0], bytes)
    assert core.in_flight == 2  # acks=0 expects nothing
    data = response_bytes(m.ListOffsetsResponse(correlation_id=cid_b)) + response_bytes(
        m.MetadataResponse(correlation_id=cid_a)
    )
    first = core.receive(data[:7])
    rest = core.receive(data[7:])
    assert first == [] and [token for token, _, _ in rest] == ["b", "a"]
    assert core.in_flight == 0


def test_unknown_or_mismatched_responses_are_violations() -> None:
    core = ProtocolCore()
    with pytest.raises(ProtocolViolation, match="unknown correlation id"):
        core.receive(response_bytes(m.MetadataResponse(correlation_id=77)))
    core = ProtocolCore()
    cid, _ = core.send(m.MetadataRequest(correlation_id=0), token=1)
    with pytest.raises(ProtocolViolation, match="answered a METADATA request"):
        core.receive(response_bytes(m.ListOffsetsResponse(correlation_id=cid)))
    core = ProtocolCore()
    with pytest.raises(ProtocolViolation):
        core.receive(b"\x00\x00\x00\x00")
    core = ProtocolCore()
    core.send(m.MetadataRequest(correlation_id=0), token="x")
    assert core.fail_all() == ["x"] and core.in_flight == 0


def test_parse_bootstrap_and_backoff() -> None:
    assert parse_bootstrap("h:1") == [("h", 1)]
    assert parse_bootstrap("h1:1, h2:2") == [("h1", 1), ("h2", 2)]
    assert parse_bootstrap(["a:5", "[::1]:7", "b"]) == [("a", 5), ("::1", 7), ("b", 9092)]
    with pytest.raises(ValueError):
        parse_bootstrap("")
    with pytest.raises(ValueError):
        parse_bootstrap("h:x")
    config = ClientConfig(bootstrap_servers="h:1", retry_backoff_ms=100, retry_backoff_max_ms=1000)
    assert [config.backoff_s(i) for i in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_connection_failures_are_worded_once_for_both_connections() -> None:
    address = ("h", 9)
    closed = connection_error(address, "closed by the broker")
    violation = connection_error(
        address, ProtocolViolation("response with unknown correlation id 7")
    )
    lost = connection_error(address, ConnectionResetError(104, "Connection reset by peer"))
    assert all(type(e) is KafkaConnectionError and e.retriable for e in (closed, violation, lost))
    assert closed.message == "connection to h:9 closed by the broker"
    assert violation.message == "connection to h:9 closed: response with unknown correlation id 7"
    assert lost.message == "connection to h:9 lost: [Errno 104] Connection reset by peer"
    assert connection_error(address, OSError()).message == "connection to h:9 lost: OSError()"


records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=300)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(min_value=0, max_value=2**41),
        st.lists(
            st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
            max_size=2,
        ),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(records_strategy, st.sampled_from(list(Compression)), st.integers(0, 2**40))
def test_encoded_batches_decode_identically(
    records: list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]],
    codec: Compression,
    base_offset: int,
) -> None:
    batch = Batch(TopicPartition("t", 0), 0.0, 1.0)
    for key, value, ts, headers in records:
        batch.records.append(value, key, ts, headers)
    data = bytearray(b"".join(encode_batch(batch, codec)))
    validate_client_batch(data)
    patch_base_offset(data, 0, base_offset)
    expected = decode_records(bytes(data))
    assert [(r.key, r.value, r.timestamp_ms, list(r.headers)) for r in expected] == [
        (k, v, ts, h) for k, v, ts, h in records
    ]
    # the consumer's decoder, reading from an offset inside the batch, after a partial tail
    start = base_offset + len(records) // 2
    tail = bytes(data) + bytes(data)[:40]
    got = list(iter_records("t", 0, memoryview(tail), start))
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (r.offset, r.key, r.value, r.timestamp_ms, list(r.headers))
        for r in expected
        if r.offset >= start
    ]
