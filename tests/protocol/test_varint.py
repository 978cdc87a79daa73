"""Zig-zag varints: known encodings, table boundaries, round-trips, errors, kafka-python oracle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record import util as kafka_util

from odradek.protocol.varint import (
    MAX_VARLONG_BYTES,
    VarintError,
    decode_varint,
    encode_varint,
    encoded_size,
)

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
int64s = st.integers(INT64_MIN, INT64_MAX)


def reference_encode(value: int) -> bytes:
    """Independent zig-zag + base-128 encoder (as in the protobuf spec)."""
    zigzag = value * 2 if value >= 0 else -value * 2 - 1
    out = []
    while True:
        low, zigzag = zigzag & 0x7F, zigzag >> 7
        if zigzag:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (300, "d804"),
        ((1 << 31) - 1, "feffffff0f"),
        (-(1 << 31), "ffffffff0f"),
        (INT64_MAX, "feffffffffffffffff01"),
        (INT64_MIN, "ffffffffffffffffff01"),
    ],
)
def test_known_encodings(value: int, encoded: str) -> None:
    data = bytes.fromhex(encoded)
    assert encode_varint(value) == data
    assert encoded_size(value) == len(data)
    assert decode_varint(data, 0) == (value, len(data))


@pytest.mark.parametrize("value", [-65537, -65536, -65535, -1, 0, 65535, 65536, 65537])
def test_table_boundaries_match_reference(value: int) -> None:
    assert encode_varint(value) == reference_encode(value)
    assert decode_varint(encode_varint(value), 0) == (value, len(reference_encode(value)))


@given(int64s)
def test_encode_matches_reference(value: int) -> None:
    assert encode_varint(value) == reference_encode(value)
    assert encoded_size(value) == len(reference_encode(value)) <= MAX_VARLONG_BYTES


@given(int64s, st.binary(max_size=8), st.binary(max_size=8))
def test_round_trip_inside_a_buffer(value: int, before: bytes, after: bytes) -> None:
    encoded = encode_varint(value)
    buf = before + encoded + after
    for container in (buf, bytearray(buf), memoryview(buf)):
        assert decode_varint(container, len(before)) == (value, len(before) + len(encoded))


@given(st.lists(int64s, max_size=20))
def test_back_to_back_values(values: list[int]) -> None:
    buf = b"".join(encode_varint(v) for v in values)
    pos = 0
    decoded = []
    for _ in values:
        value, pos = decode_varint(buf, pos)
        decoded.append(value)
    assert decoded == values
    assert pos == len(buf)


@given(int64s)
def test_kafka_python_oracle_both_ways(value: int) -> None:
    theirs = bytearray()
    kafka_util.encode_varint(value, theirs.append)
    assert bytes(theirs) == encode_varint(value)
    assert kafka_util.decode_varint(encode_varint(value), 0) == (value, len(theirs))
    assert decode_varint(bytes(theirs), 0) == (value, len(theirs))
    assert kafka_util.size_of_varint(value) == encoded_size(value)


@given(int64s.filter(lambda v: not -64 <= v < 64))
def test_every_truncated_prefix_raises(value: int) -> None:
    encoded = encode_varint(value)
    for cut in range(len(encoded)):
        with pytest.raises(VarintError):
            decode_varint(encoded[:cut], 0)


def test_empty_buffer_and_position_at_end() -> None:
    with pytest.raises(VarintError, match="past the end"):
        decode_varint(b"", 0)
    with pytest.raises(VarintError):
        decode_varint(b"\x02", 1)


def test_over_long_encoding_is_rejected() -> None:
    with pytest.raises(VarintError, match="longer than 10 bytes"):
        decode_varint(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(VarintError):
        decode_varint(b"\xff" * 32, 0)
    # Ten bytes is the longest legal form and still decodes.
    assert decode_varint(b"\x80" * 9 + b"\x00", 0) == (0, 10)


def test_varint_error_is_a_value_error() -> None:
    assert issubclass(VarintError, ValueError)
