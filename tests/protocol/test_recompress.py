"""Broker-side re-encoding for a topic's ``compression.type`` (protocol.recompress)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.recompress import CODECS, recompress_batch, target_codec
from odradek.protocol.record_batch import (
    ATTR_CONTROL,
    Compression,
    parse_batch_header,
    recompute_crc,
    validate_client_batch,
)
from odradek.protocol.records import decode_records

records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=200),
        st.integers(min_value=0, max_value=2**41),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=2),
    ),
    min_size=1,
    max_size=30,
)
codecs = st.sampled_from(list(Compression))


@settings(max_examples=60, deadline=None)
@given(records, codecs, codecs, st.booleans())
def test_recompressed_batch_keeps_every_record_and_header_field(
    items: list, source: Compression, target: Compression, log_append_time: bool
) -> None:
    original = encode_batch(
        items,
        base_offset=1234,
        compression=source,
        producer_id=77,
        producer_epoch=3,
        base_sequence=9,
        partition_leader_epoch=5,
        log_append_time=log_append_time,
    )
    rebuilt = recompress_batch(original, target)
    header = validate_client_batch(rebuilt)
    before = parse_batch_header(original)
    assert header.compression == target
    assert decode_records(rebuilt) == decode_records(original)
    for field in (
        "base_offset",
        "partition_leader_epoch",
        "last_offset_delta",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
        "timestamp_type",
        "is_transactional",
    ):
        assert getattr(header, field) == getattr(before, field), field
    if source == target:
        assert rebuilt is original


def test_control_batches_are_never_reencoded() -> None:
    batch = bytearray(encode_batch([(b"k", b"v")], compression=Compression.GZIP))
    batch[22] |= ATTR_CONTROL  # attributes low byte
    recompute_crc(batch)
    assert recompress_batch(batch, Compression.NONE) is batch


def test_compression_type_names() -> None:
    assert target_codec("producer") is None
    assert target_codec("uncompressed") == Compression.NONE
    assert {name: target_codec(name) for name in CODECS} == CODECS
