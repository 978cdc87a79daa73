"""protocol.validate: every honest batch passes; any damage to a body under a valid CRC is
refused with the format's own errors, never an IndexError, struct.error or the like."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.compression import CompressionError
from odradek.protocol.record_batch import (
    HEADER_SIZE,
    CorruptRecordError,
    InvalidRecordError,
    recompute_crc,
)
from odradek.protocol.validate import DecompressionBudget, validate_produced_batch

records_strategy = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=200),
        st.integers(0, 2**40),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(records_strategy, st.sampled_from([0, 1, 2, 3, 4]))
def test_every_honest_batch_passes(records: list, codec: int) -> None:
    data = encode_batch(records, compression=codec)
    checked = validate_produced_batch(data, 0, DecompressionBudget.default())
    assert checked.header.record_count == len(records)
    assert checked.has_keyless_record == any(key is None for key, *_ in records)
    assert checked.max_record_timestamp == max(ts for _, _, ts, _ in records)


@settings(max_examples=500, deadline=None)
@given(records_strategy, st.data())
def test_damage_under_a_valid_crc_is_refused_cleanly(records: list, data: st.DataObject) -> None:
    batch = bytearray(encode_batch(records))
    body_length = len(batch) - HEADER_SIZE
    position = data.draw(st.integers(HEADER_SIZE, HEADER_SIZE + body_length - 1))
    batch[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, 3))
    if cut:  # also shorten the body, fixing the length field
        del batch[-cut:]
        struct.pack_into(">i", batch, 8, len(batch) - 12)
    recompute_crc(batch)
    # Accepted (a value byte changed: still a well-formed batch) or refused with the format's
    # own errors, which the broker maps to Kafka codes; anything else escapes and fails.
    with contextlib.suppress(CorruptRecordError, CompressionError):
        validate_produced_batch(bytes(batch), 0, DecompressionBudget.default())


def test_a_producer_id_without_a_sequence_is_invalid() -> None:
    data = bytearray(encode_batch([(b"k", b"v")], producer_id=7, producer_epoch=0))
    recompute_crc(data)
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate_produced_batch(bytes(data), 0, DecompressionBudget.default())
