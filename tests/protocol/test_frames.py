"""protocol.frames: length-prefixed framing, sans-I/O."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.frames import (
    MAX_FRAME_BYTES_LIMIT,
    FrameDecoder,
    FrameError,
    FrameTooLarge,
    MalformedFrame,
    encode_frame,
    frame_prefix,
)

bodies = st.lists(st.binary(min_size=1, max_size=300), max_size=8)


def _stream(frames: list[bytes]) -> bytes:
    return b"".join(encode_frame(body) for body in frames)


def _drain(decoder: FrameDecoder) -> list[bytes]:
    return list(decoder)


def test_prefix_is_big_endian_u32_length() -> None:
    assert frame_prefix(1) == b"\x00\x00\x00\x01"
    assert frame_prefix(0x01020304) == b"\x01\x02\x03\x04"
    assert encode_frame(b"ab", memoryview(b"cd"), bytearray(b"e")) == b"\x00\x00\x00\x05abcde"


@pytest.mark.parametrize("length", [0, -1, MAX_FRAME_BYTES_LIMIT + 1])
def test_prefix_rejects_lengths_a_decoder_would_refuse(length: int) -> None:
    with pytest.raises(ValueError):
        frame_prefix(length)


@pytest.mark.parametrize("limit", [0, -5, MAX_FRAME_BYTES_LIMIT + 1])
def test_decoder_limit_must_be_a_positive_int32(limit: int) -> None:
    with pytest.raises(ValueError):
        FrameDecoder(limit)


def test_error_hierarchy() -> None:
    assert issubclass(FrameTooLarge, FrameError)
    assert issubclass(MalformedFrame, FrameError)


def test_no_frame_until_complete() -> None:
    decoder = FrameDecoder(100)
    assert decoder.next_frame() is None
    decoder.feed(b"\x00\x00")
    assert decoder.next_frame() is None
    decoder.feed(b"\x00\x03ab")
    assert decoder.next_frame() is None
    assert decoder.mid_frame
    decoder.feed(b"c")
    assert decoder.next_frame() == b"abc"
    assert decoder.next_frame() is None
    assert not decoder.mid_frame
    decoder.end_of_stream()


def test_many_frames_in_one_chunk_and_a_partial_tail() -> None:
    decoder = FrameDecoder(100)
    decoder.feed(_stream([b"one", b"two", b"three"]) + b"\x00\x00\x00\x04fo")
    assert _drain(decoder) == [b"one", b"two", b"three"]
    decoder.feed(b"ur")
    assert _drain(decoder) == [b"four"]


@given(bodies)
def test_one_byte_at_a_time_gives_the_same_frames(frames: list[bytes]) -> None:
    data = _stream(frames)
    whole = FrameDecoder(1000)
    whole.feed(data)
    bytewise = FrameDecoder(1000)
    out: list[bytes] = []
    for i in range(len(data)):
        bytewise.feed(data[i : i + 1])
        out.extend(bytewise)
    assert _drain(whole) == frames
    assert out == frames
    bytewise.end_of_stream()


@given(bodies, st.lists(st.integers(min_value=0, max_value=3000), max_size=10))
def test_any_split_gives_the_same_frames(frames: list[bytes], cuts: list[int]) -> None:
    data = _stream(frames)
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    decoder = FrameDecoder(1000)
    out: list[bytes] = []
    for start, end in itertools.pairwise(points):
        decoder.feed(memoryview(data)[start:end])
        out.extend(decoder)
    assert out == frames


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(8)
    decoder.feed(encode_frame(b"x" * 8))
    assert decoder.next_frame() == b"x" * 8


def test_oversized_prefix_is_refused_before_buffering_its_body() -> None:
    decoder = FrameDecoder(1024)
    junk = b"\xaa" * 1_000_000
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(struct.pack(">I", 1025) + junk)
    assert info.value.length == 1025
    assert info.value.max_frame_bytes == 1024
    assert "1025" in str(info.value)
    assert decoder.buffered_bytes == 0


def test_oversized_prefix_is_refused_at_its_fourth_byte() -> None:
    decoder = FrameDecoder(1024)
    prefix = struct.pack(">I", 0xFFFF_FFFF)
    for byte in prefix[:3]:
        decoder.feed(bytes([byte]))
    with pytest.raises(FrameTooLarge):
        decoder.feed(prefix[3:])
    assert decoder.buffered_bytes == 0


def test_zero_length_frame_is_malformed() -> None:
    decoder = FrameDecoder(1024)
    with pytest.raises(MalformedFrame, match="zero-length"):
        decoder.feed(b"\x00\x00\x00\x00")


def test_decoder_is_dead_after_an_error_but_keeps_earlier_frames() -> None:
    decoder = FrameDecoder(10)
    with pytest.raises(FrameTooLarge):
        decoder.feed(encode_frame(b"good") + struct.pack(">I", 11) + b"x" * 11)
    assert decoder.next_frame() == b"good"
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()
    with pytest.raises(FrameTooLarge):
        decoder.feed(encode_frame(b"more"))


def test_partial_body_is_not_preallocated() -> None:
    decoder = FrameDecoder(MAX_FRAME_BYTES_LIMIT)
    decoder.feed(struct.pack(">I", MAX_FRAME_BYTES_LIMIT) + b"0123456789")
    assert decoder.buffered_bytes == 10


def test_a_partial_body_holds_what_arrived_and_is_joined_once() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    decoder = FrameDecoder(MAX_FRAME_BYTES_LIMIT)
    data = encode_frame(body)
    arrived = 0
    for size in (4, 1, 7, 300, 5000, 70_000, 1, 200_000, 300_000, 600_000):
        chunk = data[arrived : arrived + size]
        decoder.feed(chunk)
        arrived += len(chunk)
        if decoder.mid_frame:
            assert decoder.buffered_bytes == max(arrived - 4, 0)
    assert _drain(decoder) == [body]
    assert decoder.buffered_bytes == 0 and not decoder.mid_frame


def test_frames_do_not_alias_the_callers_buffer() -> None:
    decoder = FrameDecoder(100)
    buf = bytearray(encode_frame(b"hello") + b"\x00\x00\x00\x05wor")
    decoder.feed(buf)
    buf[:] = b"\xff" * len(buf)
    decoder.feed(bytearray(b"ld"))
    assert _drain(decoder) == [b"hello", b"world"]


def test_end_of_stream_mid_prefix_or_mid_body_is_malformed() -> None:
    decoder = FrameDecoder(100)
    decoder.feed(b"\x00\x00")
    with pytest.raises(MalformedFrame, match="2 of 4 length bytes"):
        decoder.end_of_stream()
    decoder = FrameDecoder(100)
    decoder.feed(b"\x00\x00\x00\x0aabc")
    with pytest.raises(MalformedFrame, match="3 bytes into a 10-byte frame"):
        decoder.end_of_stream()


def test_non_byte_buffers_are_read_as_bytes() -> None:
    shorts = memoryview(b"\x00\x00\x00\x02AB").cast("H")  # 3 items of 2 bytes
    decoder = FrameDecoder(100)
    decoder.feed(shorts)
    assert decoder.next_frame() == b"AB"


def test_drop_sent_removes_written_bytes_across_views() -> None:
    from odradek.protocol.frames import byte_views, drop_sent

    views = byte_views([b"abc", b"", bytearray(b"de"), memoryview(b"fgh")])
    assert [bytes(v) for v in views] == [b"abc", b"de", b"fgh"]  # the empty part is gone
    drop_sent(views, 4)  # all of the first view and one byte of the second
    assert [bytes(v) for v in views] == [b"e", b"fgh"]
    drop_sent(views, 0)
    assert [bytes(v) for v in views] == [b"e", b"fgh"]
    drop_sent(views, 4)
    assert views == []
