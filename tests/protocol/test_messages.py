"""protocol.messages (the wire messages and their codec) and protocol.errors."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode, KafkaProtocolError, raise_for_error
from odradek.protocol.frames import FrameDecoder, FrameError

# ---- strategies built from the structs' own msgspec schema ---------------------------------


def _strategy(t: mi.Type, name: str = "") -> st.SearchStrategy[Any]:
    if name == "version":
        return st.just(0)
    if name == "records_bytes":
        return st.integers(min_value=0, max_value=64)
    if isinstance(t, mi.IntType):
        return st.integers(min_value=t.ge, max_value=t.le)
    if isinstance(t, mi.StrType):
        return st.text(max_size=12)
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.BytesType):
        return st.binary(max_size=12)
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.UnionType):
        return st.one_of([_strategy(sub, name) for sub in t.types])
    if isinstance(t, mi.ListType):
        return st.lists(_strategy(t.item_type), max_size=3)
    if isinstance(t, mi.DictType):
        return st.dictionaries(_strategy(t.key_type), _strategy(t.value_type), max_size=3)
    if isinstance(t, mi.StructType):
        fields = {f.name: _strategy(f.type, f.name) for f in t.fields}
        return st.builds(t.cls, **fields)
    raise AssertionError(f"no strategy for {t!r}")


def messages_of(cls: type[m.Message]) -> st.SearchStrategy[m.Message]:
    return _strategy(mi.type_info(cls))


def _raw_for(msg: m.Message) -> bytes:
    n = msg.declared_raw_bytes()
    return bytes(i % 251 for i in range(n))


def _body(parts: list[m.Buffer]) -> bytes:
    """The frame body (the frame prefix stripped) from encode_* parts."""
    frame = b"".join(bytes(p) for p in parts)
    (length,) = struct.unpack_from(">I", frame)
    assert length == len(frame) - 4
    return frame[4:]


def _header_body(header: Any, raw: bytes = b"") -> bytes:
    """A body with a hand-made msgpack header (bypassing the encoder's checks)."""
    packed = msgspec.msgpack.encode(header)
    return struct.pack(">I", len(packed)) + packed + raw


REQUESTS = list(m.REQUEST_TYPES.values())
RESPONSES = list(m.RESPONSE_TYPES.values())


# ---- registry ------------------------------------------------------------------------------


def test_every_api_has_a_request_a_response_and_versions() -> None:
    assert set(m.REQUEST_TYPES) == set(m.ApiKey) == set(m.RESPONSE_TYPES)
    assert set(m.SUPPORTED_VERSIONS) == set(m.ApiKey)
    for key in m.ApiKey:
        assert m.REQUEST_TYPES[key].__name__.removesuffix("Request") == m.RESPONSE_TYPES[
            key
        ].__name__.removesuffix("Response")
        assert m.REQUEST_TYPES[key].__struct_config__.tag == key
        assert m.RESPONSE_TYPES[key].__struct_config__.tag == key


def test_api_keys_are_kafkas() -> None:
    assert (m.ApiKey.PRODUCE, m.ApiKey.FETCH, m.ApiKey.LIST_OFFSETS, m.ApiKey.METADATA) == (
        0,
        1,
        2,
        3,
    )
    assert m.ApiKey.API_VERSIONS == 18
    assert m.ApiKey.JOIN_GROUP == 11
    assert m.ApiKey.SYNC_GROUP == 14


def test_header_starts_with_api_key_version_correlation_id() -> None:
    parts = m.encode_request(m.MetadataRequest(correlation_id=42, topics=["a"]))
    body = _body(parts)
    (header_len,) = struct.unpack_from(">I", body)
    header = msgspec.msgpack.decode(body[4 : 4 + header_len])
    assert header[:3] == [3, 0, 42]
    assert len(body) == 4 + header_len


def test_every_response_can_carry_only_a_top_level_error() -> None:
    for key in m.ApiKey:
        resp = m.error_response(key, 9, ErrorCode.UNSUPPORTED_VERSION, "no")
        assert isinstance(resp, m.RESPONSE_TYPES[key])
        decoded, tail = m.decode_response(_body(m.encode_response(resp)))
        assert decoded == resp
        assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert len(tail) == 0


def test_api_versions_response_lists_every_api() -> None:
    resp = m.ApiVersionsResponse(correlation_id=1, api_keys=m.supported_api_versions())
    decoded, _ = m.decode_response(_body(m.encode_response(resp)))
    assert isinstance(decoded, m.ApiVersionsResponse)
    ranges = {r.api_key: (r.min_version, r.max_version) for r in decoded.api_keys}
    assert ranges == {int(k): v for k, v in m.SUPPORTED_VERSIONS.items()}


def test_acks_zero_gets_no_response() -> None:
    assert not m.expects_response(m.ProduceRequest(correlation_id=1, acks=0))
    assert m.expects_response(m.ProduceRequest(correlation_id=1, acks=1))
    assert m.expects_response(m.ProduceRequest(correlation_id=1, acks=-1))
    assert m.expects_response(m.MetadataRequest(correlation_id=1))


# ---- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", REQUESTS, ids=lambda c: c.__name__)
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_request_round_trips(cls: type[m.Request], data: st.DataObject) -> None:
    msg = data.draw(messages_of(cls))
    raw = _raw_for(msg)
    decoded, tail = m.decode_request(_body(m.encode_request(msg, raw)))
    assert decoded == msg
    assert type(decoded) is cls
    assert bytes(tail) == raw


@pytest.mark.parametrize("cls", RESPONSES, ids=lambda c: c.__name__)
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_response_round_trips(cls: type[m.Response], data: st.DataObject) -> None:
    msg = data.draw(messages_of(cls))
    raw = _raw_for(msg)
    decoded, tail = m.decode_response(_body(m.encode_response(msg, raw)))
    assert decoded == msg
    assert type(decoded) is cls
    assert bytes(tail) == raw


def _produce() -> tuple[m.ProduceRequest, list[bytes]]:
    batches = [b"A" * 10, b"", b"B" * 7]
    req = m.ProduceRequest(
        correlation_id=5,
        acks=1,
        timeout_ms=1000,
        topics=[
            m.ProduceTopicData(
                name="t1",
                partitions=[
                    m.ProducePartitionData(partition_index=0, records_bytes=10),
                    m.ProducePartitionData(partition_index=1, records_bytes=0),
                ],
            ),
            m.ProduceTopicData(
                name="t2", partitions=[m.ProducePartitionData(partition_index=3, records_bytes=7)]
            ),
        ],
    )
    return req, batches


def test_produce_raw_batches_follow_in_header_order() -> None:
    req, batches = _produce()
    parts = m.encode_request(req, batches)
    assert parts[1:] == [b"A" * 10, b"B" * 7]  # raw parts are passed through, not copied
    decoded, tail = m.decode_request(_body(parts))
    sections = [(t, p.partition_index, bytes(v)) for t, p, v in m.record_sections(decoded, tail)]
    assert sections == [("t1", 0, b"A" * 10), ("t1", 1, b""), ("t2", 3, b"B" * 7)]


def test_fetch_response_head_is_encoded_before_the_records() -> None:
    records = [b"x" * 100, b"y" * 28]
    resp = m.FetchResponse(
        correlation_id=77,
        topics=[
            m.FetchTopicResponse(
                name="t",
                partitions=[
                    m.FetchPartitionResponse(
                        partition_index=0,
                        high_watermark=10,
                        last_stable_offset=10,
                        log_start_offset=0,
                        records_bytes=100,
                    ),
                    m.FetchPartitionResponse(
                        partition_index=1, error_code=ErrorCode.OFFSET_OUT_OF_RANGE
                    ),
                    m.FetchPartitionResponse(partition_index=2, records_bytes=28),
                ],
            )
        ],
    )
    head = m.encode_head(resp, raw_bytes=128)  # what a sendfile path writes first
    frame = head + b"".join(records)
    assert frame == b"".join(bytes(p) for p in m.encode_response(resp, records))
    decoded, tail = m.decode_response(frame[4:])
    assert isinstance(decoded, m.FetchResponse)
    got = {p.partition_index: bytes(v) for _, p, v in m.record_sections(decoded, tail)}
    assert got == {0: b"x" * 100, 1: b"", 2: b"y" * 28}


def test_pipelined_requests_survive_a_byte_at_a_time_stream() -> None:
    req, batches = _produce()
    msgs: list[tuple[m.Request, bytes]] = [
        (m.ApiVersionsRequest(correlation_id=1, client_software_name="odradek"), b""),
        (req, b"".join(batches)),
        (m.FetchRequest(correlation_id=6, topics=[m.FetchTopic(name="t1")]), b""),
        (m.HeartbeatRequest(correlation_id=7, group_id="g", generation_id=3, member_id="m"), b""),
    ]
    stream = b"".join(b"".join(bytes(p) for p in m.encode_request(q, r)) for q, r in msgs)
    decoder = FrameDecoder(1 << 20)
    out = []
    for i in range(len(stream)):
        decoder.feed(stream[i : i + 1])
        out.extend((msg, bytes(tail)) for msg, tail in map(m.decode_request, decoder))
    assert out == msgs


def test_encoders_refuse_mismatched_raw_bytes_and_directions() -> None:
    req, batches = _produce()
    with pytest.raises(ValueError, match="declares 17 raw bytes"):
        m.encode_request(req, batches[:1])
    with pytest.raises(ValueError):
        m.encode_request(m.MetadataRequest(correlation_id=1), b"stray")
    with pytest.raises(ValueError):
        m.encode_head(req, raw_bytes=3)
    with pytest.raises(TypeError):
        m.encode_request(m.MetadataResponse(correlation_id=1))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        m.encode_response(m.MetadataRequest(correlation_id=1))  # type: ignore[arg-type]


# ---- hostile input -------------------------------------------------------------------------

GOOD_METADATA = _header_body([3, 0, 11, ["a"], True])


def test_good_metadata_fixture_decodes() -> None:
    msg, tail = m.decode_request(GOOD_METADATA)
    assert msg == m.MetadataRequest(correlation_id=11, topics=["a"])
    assert len(tail) == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "no header length"),
        (b"\x00\x00\x01", "no header length"),
        (b"\x00\x00\x00\x00\x93\x03\x00\x01", "header length 0"),
        (b"\x00\x00\x00\x09\x93\x03\x00\x01", "header length 9 does not fit"),
        (b"\x00\x00\xff\xff" + GOOD_METADATA[4:], "does not fit"),
        (b"\x00\x00\x00\x02\xc1\xc1", "not a msgpack array"),  # 0xc1 is never used
        (_header_body(7), "not a msgpack array"),
        (_header_body([3, 0]), "not a msgpack array"),
        (_header_body(["x", 0, 1]), "not a msgpack array"),
        (_header_body([3, 0, 1, "not-a-list"]), "invalid MetadataRequest v0"),
        (_header_body([3, 0, 2**31]), "invalid MetadataRequest v0"),
        (_header_body([3, 0, 1, None, True, "unknown field"]), "invalid MetadataRequest"),
        (_header_body([1, 0, 1, -1]), "invalid FetchRequest v0"),  # negative max_wait_ms
        (_header_body([1, 0, 1, 0, 0, 0, [["t", [[0, 0, -5]]]]]), "invalid FetchRequest"),
        (_header_body([0, 0, 1, 1, 100, [["t", [[0, -1]]]]]), "invalid ProduceRequest"),
        (_header_body([0, 0, 1, 1, 100, [["t", [[0, 5]]]]], b"abc"), "declares 5 raw bytes"),
        (_header_body([0, 0, 1, 1, 100, [["t", [[0, 2]]]]], b"abc"), "declares 2 raw bytes"),
        (GOOD_METADATA + b"tail", "declares 0 raw bytes but the body carries 4"),
        (_header_body([3, 0, 1, ["ok"], "yes"]), "invalid MetadataRequest"),
    ],
)
def test_malformed_requests_raise_malformed_message(body: bytes, reason: str) -> None:
    with pytest.raises(m.MalformedMessage, match=reason) as info:
        m.decode_request(body)
    assert isinstance(info.value, FrameError)
    assert info.value.error_code == ErrorCode.INVALID_REQUEST


def test_unknown_api_key_names_it_and_keeps_the_correlation_id() -> None:
    with pytest.raises(m.MalformedMessage, match="unknown api key 99") as info:
        m.decode_request(_header_body([99, 0, 1234, "whatever"]))
    assert info.value.api_key == 99
    assert info.value.correlation_id == 1234
    assert not isinstance(info.value, m.UnsupportedVersion)


def test_unsupported_version_is_its_own_error() -> None:
    for header in ([3, 1, 55], [3, 9, 55, "a", "layout", "we", "do", "not", "know"]):
        with pytest.raises(m.UnsupportedVersion, match="METADATA v") as info:
            m.decode_request(_header_body(header))
        assert (info.value.api_key, info.value.correlation_id) == (m.ApiKey.METADATA, 55)
        assert info.value.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_invalid_utf8_is_malformed() -> None:
    header = b"\x94\x03\x00\x01\x91\xa2\xff\xfe"  # [3, 0, 1, ["\xff\xfe"]]
    with pytest.raises(m.MalformedMessage):
        m.decode_request(struct.pack(">I", len(header)) + header)


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_malformed_message(body: bytes) -> None:
    for decode in (m.decode_request, m.decode_response):
        with contextlib.suppress(m.MalformedMessage):
            decode(body)


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_random_headers_raise_only_malformed_message(header: bytes) -> None:
    body = struct.pack(">I", len(header)) + header
    for decode in (m.decode_request, m.decode_response):
        with contextlib.suppress(m.MalformedMessage):
            decode(body)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_valid_bodies_raise_only_malformed_message(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(REQUESTS))
    msg = data.draw(messages_of(cls))
    body = bytearray(_body(m.encode_request(msg, _raw_for(msg))))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        pos = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
        body[pos] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(body)))
    for candidate in (bytes(body), bytes(body[:cut])):
        with contextlib.suppress(m.MalformedMessage):
            m.decode_request(candidate)


# ---- error codes ---------------------------------------------------------------------------


def test_error_codes_have_kafkas_numbers() -> None:
    expected = {
        "UNKNOWN_SERVER_ERROR": -1,
        "NONE": 0,
        "OFFSET_OUT_OF_RANGE": 1,
        "CORRUPT_MESSAGE": 2,
        "UNKNOWN_TOPIC_OR_PARTITION": 3,
        "INVALID_FETCH_SIZE": 4,
        "REQUEST_TIMED_OUT": 7,
        "MESSAGE_TOO_LARGE": 10,
        "NOT_COORDINATOR": 16,
        "INVALID_TOPIC_EXCEPTION": 17,
        "RECORD_LIST_TOO_LARGE": 18,
        "INVALID_REQUIRED_ACKS": 21,
        "ILLEGAL_GENERATION": 22,
        "INCONSISTENT_GROUP_PROTOCOL": 23,
        "INVALID_GROUP_ID": 24,
        "UNKNOWN_MEMBER_ID": 25,
        "INVALID_SESSION_TIMEOUT": 26,
        "REBALANCE_IN_PROGRESS": 27,
        "UNSUPPORTED_VERSION": 35,
        "TOPIC_ALREADY_EXISTS": 36,
        "INVALID_PARTITIONS": 37,
        "INVALID_REPLICATION_FACTOR": 38,
        "INVALID_CONFIG": 40,
        "INVALID_REQUEST": 42,
        "POLICY_VIOLATION": 44,
        "KAFKA_STORAGE_ERROR": 56,
        "NON_EMPTY_GROUP": 68,
        "GROUP_ID_NOT_FOUND": 69,
        "MEMBER_ID_REQUIRED": 79,
        "GROUP_MAX_SIZE_REACHED": 81,
        "FENCED_INSTANCE_ID": 82,
    }
    assert {name: int(ErrorCode[name]) for name in expected} == expected
    assert [int(c) for c in ErrorCode] == list(range(-1, len(ErrorCode) - 1))  # no gaps, no dups


def test_error_code_attributes() -> None:
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.retriable
    assert ErrorCode.KAFKA_STORAGE_ERROR.retriable
    assert not ErrorCode.TOPIC_ALREADY_EXISTS.retriable
    assert not ErrorCode.OFFSET_OUT_OF_RANGE.retriable
    assert all(c.description for c in ErrorCode if c is not ErrorCode.NONE)
    assert ErrorCode.from_code(3) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ErrorCode.from_code(31999) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_kafka_protocol_error() -> None:
    err = KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, "topic 'x' already exists")
    assert err.code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert err.message == "topic 'x' already exists"
    assert not err.retriable
    assert "TOPIC_ALREADY_EXISTS (36)" in str(err)
    assert KafkaProtocolError(3).message == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.description
    raise_for_error(0)
    with pytest.raises(KafkaProtocolError) as info:
        raise_for_error(69, "group g")
    assert info.value.code is ErrorCode.GROUP_ID_NOT_FOUND


def test_docs_list_every_message_and_field() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    structs = [getattr(m, name) for name in m.__all__ if isinstance(getattr(m, name), type)]
    for cls in structs:
        if not issubclass(cls, msgspec.Struct) or cls in (m.Message, m.Request, m.Response):
            continue
        assert f"\n{cls.__name__}" in doc, cls.__name__
        for field in mi.type_info(cls).fields:
            assert f"    {field.name}: " in doc or field.name in (
                "version",
                "correlation_id",
                "error_code",
                "error_message",
            ), f"{cls.__name__}.{field.name}"
