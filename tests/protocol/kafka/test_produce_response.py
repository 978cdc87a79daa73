"""The data path's ProduceResponse writer against the generic codec (its oracle): for every
version 0-9, any answer the shared handler can give encodes to the same bytes as its fields
through :func:`encode_response`, and kafka-python's codec reads it back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol import messages as m
from odradek.protocol.kafka import KafkaMalformed, encode_produce_response, encode_response

PRODUCE = 0
VERSIONS = range(0, 10)

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=40)
partitions = st.builds(
    m.ProducePartitionResponse,
    partition_index=int32,
    error_code=int16,
    error_message=st.none() | text,
    base_offset=int64,
    log_append_time_ms=int64,
    log_start_offset=int64,
)
topics = st.builds(m.ProduceTopicResponse, name=text, partitions=st.lists(partitions, max_size=4))
responses = st.builds(
    m.ProduceResponse, correlation_id=st.just(0), topics=st.lists(topics, max_size=4)
)


def fields_of(response: m.ProduceResponse) -> dict:
    """The answer as the generic codec's fields (what the adapter built before the writer)."""
    return {
        "throttle_time_ms": 0,
        "responses": [
            {
                "name": topic.name,
                "partition_responses": [
                    {
                        "index": p.partition_index,
                        "error_code": p.error_code,
                        "base_offset": p.base_offset,
                        "log_append_time_ms": p.log_append_time_ms,
                        "log_start_offset": p.log_start_offset,
                        "record_errors": [],
                        "error_message": p.error_message,
                    }
                    for p in topic.partitions
                ],
            }
            for topic in response.topics
        ],
    }


@pytest.mark.parametrize("version", VERSIONS)
@given(response=responses, correlation_id=int32)
def test_same_bytes_as_the_generic_codec(
    version: int, response: m.ProduceResponse, correlation_id: int
) -> None:
    ours = encode_produce_response(version, correlation_id, response)
    assert ours == encode_response(PRODUCE, version, correlation_id, fields_of(response))


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_python_reads_it(version: int) -> None:
    kafka_produce = pytest.importorskip("kafka.protocol.producer")
    part = m.ProducePartitionResponse(
        partition_index=2, base_offset=41, log_start_offset=7, error_message=None
    )
    topic = m.ProduceTopicResponse(name="events", partitions=[part])
    body = encode_produce_response(version, 5, m.ProduceResponse(correlation_id=0, topics=[topic]))
    header_bytes = 5 if version >= 9 else 4  # correlation id (+ tagged fields, header v1)
    theirs = kafka_produce.ProduceResponse.decode(body[header_bytes:], version=version)
    theirs = theirs.to_dict(json=False)
    [their_topic] = theirs["responses"]
    [their_part] = their_topic["partition_responses"]
    assert their_topic["name"] == "events"
    assert (their_part["index"], their_part["error_code"], their_part["base_offset"]) == (2, 0, 41)
    if version >= 5:
        assert their_part["log_start_offset"] == 7


def test_refuses_versions_it_does_not_write_and_overlong_messages() -> None:
    empty = m.ProduceResponse(correlation_id=0, topics=[])
    for version in (-1, 10, 13):
        with pytest.raises(ValueError, match=f"v{version}"):
            encode_produce_response(version, 1, empty)
    part = m.ProducePartitionResponse(partition_index=0, error_code=2, error_message="x" * 40_000)
    topic = m.ProduceTopicResponse(name="t", partitions=[part])
    with pytest.raises(KafkaMalformed):
        encode_produce_response(8, 1, m.ProduceResponse(correlation_id=0, topics=[topic]))
