"""A null where Kafka's message definitions allow none is malformed (Kafka's parser refuses it
too), so no adapter ever sees ``None`` in a field it may iterate or name a topic with."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol import kafka

NULL_STRING = b"\xff\xff"
NULL_ARRAY = b"\xff\xff\xff\xff"


def _header(api_key: int, version: int) -> bytes:
    return struct.pack(">hhi", api_key, version, 7) + struct.pack(">h", 1) + b"c"


def test_a_null_topic_name_in_metadata_is_malformed() -> None:
    body = _header(3, 1) + struct.pack(">i", 1) + NULL_STRING
    with pytest.raises(kafka.KafkaMalformed, match="name is null"):
        kafka.decode_request(body)


def test_a_null_topic_array_in_produce_is_malformed() -> None:
    body = _header(0, 7) + NULL_STRING + struct.pack(">hi", 1, 1000) + NULL_ARRAY
    with pytest.raises(kafka.KafkaMalformed, match="topic_data is null"):
        kafka.decode_request(body)


def test_null_where_nullable_still_decodes() -> None:
    # Metadata v1+: topics null = every topic; Produce: a null transactional id
    assert kafka.decode_request(_header(3, 1) + NULL_ARRAY)[1]["topics"] is None
    body = _header(0, 7) + NULL_STRING + struct.pack(">hii", 1, 1000, 0)
    assert kafka.decode_request(body)[1] == {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [],
    }
