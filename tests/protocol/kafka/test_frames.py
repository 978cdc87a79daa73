"""Frame bodies: headers per version, unsupported versions, ApiVersions' fallback, records
passed through (views on decode, slots on encode)."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol import messages as m
from odradek.protocol.kafka import (
    APIS,
    KafkaMalformed,
    KafkaUnsupported,
    RecordsSlot,
    api_version_ranges,
    decode_request,
    decode_response,
    encode_produce_response,
    encode_request,
    encode_response,
    encode_response_parts,
    served_version_ranges,
    unsupported_version_response,
)
from odradek.protocol.messages.base import MalformedMessage, UnsupportedVersion

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
BATCH = b"\x00" * 61 + b"record-bytes"


def _produce(version: int, records: bytes | None = BATCH) -> dict:
    partitions = [{"index": 0, "records": records}]
    return {
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": partitions}],
    }


@pytest.mark.parametrize(("version", "header_tail"), [(8, b""), (9, b"\x00")])
def test_request_header_v1_below_the_first_flexible_version_v2_from_it(
    version: int, header_tail: bytes
) -> None:
    body = encode_request(PRODUCE, version, 77, "cli", _produce(version))
    assert body.startswith(struct.pack(">hhih", PRODUCE, version, 77, 3) + b"cli" + header_tail)
    header, fields = decode_request(body)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        0,
        version,
        77,
        "cli",
    )
    assert fields["acks"] == -1


def test_null_client_id_stays_a_classic_string_in_header_v2() -> None:
    body = encode_request(METADATA, 9, 1, None, {"topics": None})
    assert body[8:11] == b"\xff\xff\x00"
    assert decode_request(body)[0].client_id is None


def test_produce_records_decode_to_a_view_into_the_frame() -> None:
    frame = bytearray(encode_request(PRODUCE, 7, 5, "c", _produce(7)))
    _, fields = decode_request(frame)
    records = fields["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is frame
    assert bytes(records) == BATCH


@pytest.mark.parametrize(
    ("version", "header"), [(11, b"\x00\x00\x00\x09"), (12, b"\x00\x00\x00\x09\x00")]
)
def test_response_header_v0_then_v1(version: int, header: bytes) -> None:
    body = encode_response(FETCH, version, 9, {"responses": []})
    assert body.startswith(header)
    assert decode_response(FETCH, version, body)[0] == 9


def test_api_versions_response_header_is_v0_even_when_flexible() -> None:
    ranges = [
        {"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in api_version_ranges()
    ]
    body = encode_response(API_VERSIONS, 3, 4, {"api_keys": ranges})
    # correlation id, then straight to error_code 0 (no header tagged fields), compact array
    assert body[:7] == b"\x00\x00\x00\x04\x00\x00" + bytes([len(ranges) + 1])
    assert decode_response(API_VERSIONS, 3, body)[1]["api_keys"] == ranges


def _fetch_response(records: object) -> dict:
    partition = {
        "partition_index": 0,
        "high_watermark": 10,
        "last_stable_offset": 10,
        "records": records,
    }
    return {"responses": [{"topic": "t", "partitions": [partition]}]}


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_records_slot_leaves_a_hole_after_its_length(version: int) -> None:
    slot = RecordsSlot(size=len(BATCH), source="segment-region")
    parts = encode_response_parts(FETCH, version, 3, _fetch_response(slot))
    assert len(parts) == 3 and parts[1] is slot
    whole = parts[0] + BATCH + parts[2]
    assert whole == encode_response(FETCH, version, 3, _fetch_response(BATCH))
    fields = decode_response(FETCH, version, whole)[1]
    assert bytes(fields["responses"][0]["partitions"][0]["records"]) == BATCH


@pytest.mark.parametrize(("version", "empty"), [(11, b"\x00\x00\x00\x00"), (12, b"\x01")])
def test_empty_or_null_fetch_records_are_zero_length_never_null(version: int, empty: bytes) -> None:
    for records in (b"", None):
        body = encode_response(FETCH, version, 3, _fetch_response(records))
        tail = b"\x00\x00" if version >= 12 else b""  # partition and topic tagged sections
        assert body.endswith(empty + tail + (b"\x00" if version >= 12 else b""))
        got = decode_response(FETCH, version, body)[1]["responses"][0]["partitions"][0]["records"]
        assert got is not None and len(got) == 0


def test_unsupported_version_keeps_key_and_correlation_id() -> None:
    body = struct.pack(">hhih", FETCH, 3, 4242, -1) + b"\x00" * 20
    with pytest.raises(KafkaUnsupported) as caught:
        decode_request(body)
    exc = caught.value
    assert isinstance(exc, UnsupportedVersion) and exc.known_api
    assert (exc.api_key, exc.version, exc.correlation_id) == (FETCH, 3, 4242)


def test_unknown_api_key_is_unsupported_too() -> None:
    with pytest.raises(KafkaUnsupported) as caught:
        decode_request(struct.pack(">hhih", 68, 0, 8, -1))
    assert not caught.value.known_api and caught.value.correlation_id == 8


def test_api_versions_v4_gets_the_v0_fallback_librdkafka_reads() -> None:
    """librdkafka (and kafka-python) send a newer ApiVersions than spoken here: the answer is
    header v0, error 35, an int32-counted v0 array of ranges that includes ApiVersions itself."""
    request = struct.pack(">hhih", API_VERSIONS, 4, 99, 4) + b"rdkf" + b"\x00\x05rdk\x003.0\x00"
    with pytest.raises(KafkaUnsupported) as caught:
        decode_request(request)
    ranges = api_version_ranges()
    body = unsupported_version_response(API_VERSIONS, caught.value.correlation_id, ranges)
    expected = struct.pack(">ihi", 99, 35, len(ranges)) + b"".join(
        struct.pack(">hhh", *r) for r in ranges
    )
    assert body == expected
    assert (API_VERSIONS, 0, 3) in ranges
    correlation_id, fields = decode_response(API_VERSIONS, 0, body)  # the v0 layout, exactly
    assert (
        correlation_id == 99
        and fields["error_code"] == 35
        and len(fields["api_keys"]) == len(ranges)
    )


def test_trailing_bytes_and_short_headers_are_malformed() -> None:
    body = encode_request(METADATA, 4, 1, "c", {"topics": []})
    with pytest.raises(KafkaMalformed) as caught:
        decode_request(body + b"\x00")
    assert caught.value.correlation_id == 1 and caught.value.api_key == METADATA
    with pytest.raises(KafkaMalformed):
        decode_request(body[:7])
    assert issubclass(KafkaMalformed, MalformedMessage)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_decode_and_are_refused_in_their_own_layout(version: int) -> None:
    """Produce v0-v2 are advertised (librdkafka < 2.11.1 compresses only if v0 is in the range)
    and decoded, but not served: the broker answers in a response of the request's version,
    every partition UNSUPPORTED_VERSION (35), that kafka-python's codec parses."""
    kafka_produce = pytest.importorskip("kafka.protocol.producer")
    records = b"legacy message set"
    request = {
        "acks": -1,
        "timeout_ms": 1500,
        "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": records}]}],
    }
    body = encode_request(PRODUCE, version, 77, "rdkafka", request)
    # no transactional_id: acks, timeout_ms, then topic_data right after the header
    layout = struct.pack(">hii", -1, 1500, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 3, 18)
    assert body[8 + 2 + len("rdkafka") :] == layout + records
    header, fields = decode_request(body)
    assert (header.api_version, fields["acks"], fields["timeout_ms"]) == (version, -1, 1500)
    [partition] = fields["topic_data"][0]["partition_data"]
    assert (partition["index"], bytes(partition["records"])) == (3, records)
    assert not APIS[PRODUCE].is_served(version) and APIS[PRODUCE].is_served(3)
    assert (PRODUCE, 0, 9) in api_version_ranges() and (PRODUCE, 3, 9) in served_version_ranges()

    refused = m.ProducePartitionResponse(partition_index=3, error_code=35)  # as the broker does
    topic = m.ProduceTopicResponse(name="t", partitions=[refused])
    native = m.ProduceResponse(correlation_id=0, topics=[topic])
    answer = encode_produce_response(version, 77, native)
    assert struct.unpack_from(">i", answer)[0] == 77
    theirs = kafka_produce.ProduceResponse.decode(answer[4:], version=version).to_dict(json=False)
    [topic] = theirs["responses"]
    [part] = topic["partition_responses"]
    assert (topic["name"], part["index"], part["error_code"]) == ("t", 3, 35)
    assert part["base_offset"] == -1
    assert ("throttle_time_ms" in theirs) == (version >= 1)
    assert ("log_append_time_ms" in part) == (version >= 2)
