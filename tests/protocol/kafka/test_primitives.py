"""The wire primitives: round trips, known encodings, and bounds checks."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.kafka import primitives as p
from odradek.protocol.kafka.primitives import KafkaMalformed
from odradek.protocol.varint import decode_varint as record_varint
from odradek.protocol.varint import encode_varint as record_encode_varint

PAIRS = {
    "uvarint": (p.decode_uvarint, p.encode_uvarint, st.integers(0, 2**32 - 1)),
    "varint": (p.decode_varint, p.encode_varint, st.integers(-(2**31), 2**31 - 1)),
    "varlong": (p.decode_varlong, p.encode_varlong, st.integers(-(2**63), 2**63 - 1)),
    "string": (p.decode_string, p.encode_string, st.none() | st.text(max_size=40)),
    "compact_string": (
        p.decode_compact_string,
        p.encode_compact_string,
        st.none() | st.text(max_size=300),
    ),
    "bytes": (p.decode_bytes, p.encode_bytes, st.none() | st.binary(max_size=40)),
    "compact_bytes": (
        p.decode_compact_bytes,
        p.encode_compact_bytes,
        st.none() | st.binary(max_size=300),
    ),
    "bool": (p.decode_bool, p.encode_bool, st.booleans()),
    "uuid": (p.decode_uuid, p.encode_uuid, st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))),
    "int8": (*p.FIXED["int8"][:2], st.integers(-128, 127)),
    "int16": (*p.FIXED["int16"][:2], st.integers(-(2**15), 2**15 - 1)),
    "int32": (*p.FIXED["int32"][:2], st.integers(-(2**31), 2**31 - 1)),
    "int64": (*p.FIXED["int64"][:2], st.integers(-(2**63), 2**63 - 1)),
    "uint16": (*p.FIXED["uint16"][:2], st.integers(0, 2**16 - 1)),
    "uint32": (*p.FIXED["uint32"][:2], st.integers(0, 2**32 - 1)),
    "float64": (*p.FIXED["float64"][:2], st.floats(allow_nan=False)),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
@given(data=st.data())
def test_round_trip_and_every_truncation_fails(name: str, data: st.DataObject) -> None:
    decode, encode, values = PAIRS[name]
    value = data.draw(values)
    out = bytearray(b"\xaa")  # decoding starts mid-buffer
    encode(out, value)
    got, end = decode(memoryview(bytes(out) + b"\xbb"), 1)
    assert end == len(out)
    assert (bytes(got) if isinstance(got, memoryview) else got) == value
    cut = data.draw(st.integers(1, len(out) - 1)) if len(out) > 1 else None
    if cut is not None and cut < len(out):
        with pytest.raises(KafkaMalformed):
            decode(memoryview(bytes(out[:cut])), 1)


@given(st.integers(-(2**31), 2**31 - 1))
def test_zigzag_varint_matches_the_record_format(value: int) -> None:
    out = bytearray()
    p.encode_varint(out, value)
    assert bytes(out) == record_encode_varint(value)
    assert record_varint(bytes(out), 0) == (value, len(out))


@pytest.mark.parametrize(
    ("encode", "value", "wire"),
    [
        (p.encode_uvarint, 300, b"\xac\x02"),
        (p.encode_varint, -1, b"\x01"),
        (p.encode_string, None, b"\xff\xff"),
        (p.encode_string, "ab", b"\x00\x02ab"),
        (p.encode_compact_string, None, b"\x00"),
        (p.encode_compact_string, "", b"\x01"),
        (p.encode_compact_string, "ab", b"\x03ab"),
        (p.encode_bytes, None, b"\xff\xff\xff\xff"),
        (p.encode_compact_bytes, b"\x07", b"\x02\x07"),
    ],
)
def test_known_encodings(encode, value, wire: bytes) -> None:
    out = bytearray()
    encode(out, value)
    assert bytes(out) == wire


@pytest.mark.parametrize(
    ("decode", "wire"),
    [
        (p.decode_uvarint, b"\xff\xff\xff\xff\xff\x01"),  # six bytes
        (p.decode_string, b"\xff\xfe"),  # length -2
        (p.decode_string, b"\x00\x05abc"),  # length past the end
        (p.decode_string, b"\x00\x02\xff\xfe"),  # not UTF-8
        (p.decode_compact_string, b"\x05ab"),
        (p.decode_bytes, b"\xff\xff\xff\xfe"),
        (p.decode_compact_bytes, b"\x80"),
        (p.array_count, b"\xff\xff\xff\xfe"),  # negative count
        (p.array_count, b"\x7f\xff\xff\xff\x00"),  # a count no frame can hold
        (p.compact_array_count, b"\xff\xff\xff\xff\x0f"),
        (p.skip_tagged_fields, b"\x01\x00\x05ab"),
        (p.decode_bool, b""),
        (p.decode_uuid, b"\x00" * 15),
    ],
)
def test_bad_input_raises_the_one_error(decode, wire: bytes) -> None:
    with pytest.raises(KafkaMalformed):
        decode(memoryview(wire), 0)


def test_unknown_tags_are_skipped() -> None:
    wire = b"\x02\x00\x01\x07\x05\x02ab!"
    assert p.skip_tagged_fields(memoryview(wire), 0) == len(wire) - 1


def test_bytes_decode_to_a_view_without_copy() -> None:
    frame = bytearray(b"\x00\x00\x00\x03abc")
    view, _ = p.decode_bytes(memoryview(frame), 0)
    frame[4] = ord("z")
    assert bytes(view) == b"zbc"
