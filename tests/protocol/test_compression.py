"""Compression codecs: round-trips, interoperability with reference libraries, clean errors."""

from __future__ import annotations

import contextlib
import gzip
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from odradek.protocol.compression import (
    GZIP,
    LZ4,
    SNAPPY,
    ZSTD,
    CompressionError,
    compress,
    decompress,
)
from odradek.protocol.record_batch import Compression

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
# Compressible and incompressible parts, more than one 32 KiB xerial block.
SAMPLE = b"odradek " * 5000 + bytes(range(256)) * 40


def test_codec_ids_match_the_record_attributes() -> None:
    assert [GZIP, SNAPPY, LZ4, ZSTD] == [
        Compression.GZIP,
        Compression.SNAPPY,
        Compression.LZ4,
        Compression.ZSTD,
    ]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", SAMPLE])
def test_round_trip_fixed(codec: int, data: bytes) -> None:
    compressed = compress(codec, data)
    assert isinstance(compressed, bytes)
    assert decompress(codec, compressed) == data


@settings(max_examples=50)
@given(st.sampled_from(CODECS), st.binary(max_size=5000))
def test_round_trip(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_compression_actually_shrinks_repetitive_data() -> None:
    data = b"a" * 100_000
    for codec in CODECS:
        assert len(compress(codec, data)) < 5_000


# -- what we write, reference libraries read -------------------------------------------------


def test_gzip_is_an_rfc1952_stream() -> None:
    compressed = compress(GZIP, SAMPLE)
    assert compressed[:3] == b"\x1f\x8b\x08"  # gzip magic, deflate
    assert gzip.decompress(compressed) == SAMPLE
    assert kafka_codec.gzip_decode(compressed) == SAMPLE


def test_snappy_uses_xerial_framing_with_32k_blocks() -> None:
    compressed = compress(SNAPPY, SAMPLE)
    assert compressed[:16] == XERIAL_HEADER
    pos, blocks, out = 16, 0, []
    while pos < len(compressed):
        (length,) = struct.unpack_from(">i", compressed, pos)
        block = snappy.decompress(compressed[pos + 4 : pos + 4 + length])
        assert len(block) <= 32 * 1024
        out.append(block)
        pos += 4 + length
        blocks += 1
    assert pos == len(compressed)
    assert blocks == -(-len(SAMPLE) // (32 * 1024))
    assert b"".join(out) == SAMPLE
    assert kafka_codec.snappy_decode(compressed) == SAMPLE


def test_lz4_is_a_standard_frame() -> None:
    compressed = compress(LZ4, SAMPLE)
    assert compressed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    assert lz4.frame.decompress(compressed) == SAMPLE
    assert kafka_codec.lz4_decode(compressed) == SAMPLE


def test_zstd_is_a_standard_frame() -> None:
    compressed = compress(ZSTD, SAMPLE)
    assert compressed[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    assert zstandard.ZstdDecompressor().decompress(compressed) == SAMPLE
    assert kafka_codec.zstd_decode(compressed) == SAMPLE


# -- what reference libraries write, we read -------------------------------------------------


def test_reads_reference_encodings() -> None:
    assert decompress(GZIP, gzip.compress(SAMPLE)) == SAMPLE
    assert decompress(GZIP, kafka_codec.gzip_encode(SAMPLE)) == SAMPLE
    assert decompress(SNAPPY, kafka_codec.snappy_encode(SAMPLE)) == SAMPLE  # xerial
    assert decompress(SNAPPY, snappy.compress(SAMPLE)) == SAMPLE  # a bare raw block
    assert decompress(LZ4, lz4.frame.compress(SAMPLE)) == SAMPLE
    assert decompress(LZ4, kafka_codec.lz4_encode(SAMPLE)) == SAMPLE
    assert decompress(ZSTD, zstandard.ZstdCompressor().compress(SAMPLE)) == SAMPLE
    assert decompress(ZSTD, kafka_codec.zstd_encode(SAMPLE)) == SAMPLE


def test_reads_streamed_zstd_without_content_size() -> None:
    # Java's zstd-jni output stream writes frames that do not declare their content size.
    compressed = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    data = compressed.compress(SAMPLE) + compressed.flush()
    assert zstandard.get_frame_parameters(data).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, data) == SAMPLE


def test_reads_lz4_frame_with_block_checksums_and_small_blocks() -> None:
    data = lz4.frame.compress(SAMPLE, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_checksum=True)
    assert decompress(LZ4, data) == SAMPLE


def test_reads_xerial_snappy_with_uneven_blocks() -> None:
    blocks = [SAMPLE[:100], SAMPLE[100:70_000], SAMPLE[70_000:]]
    framed = XERIAL_HEADER + b"".join(
        struct.pack(">i", len(c)) + c for c in (snappy.compress(b) for b in blocks)
    )
    assert decompress(SNAPPY, framed) == SAMPLE


def test_reads_concatenated_gzip_members() -> None:
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(GZIP, data) == b"first second"


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [0, 5, 7, -1])
def test_unknown_codec_ids(codec: int) -> None:
    with pytest.raises(CompressionError, match="unknown compression codec"):
        compress(codec, b"x")
    with pytest.raises(CompressionError, match="unknown compression codec"):
        decompress(codec, b"x")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (XERIAL_HEADER[:12], "truncated xerial snappy header"),
        (XERIAL_HEADER + b"\x00\x00", "truncated xerial snappy block length"),
        (XERIAL_HEADER + struct.pack(">i", 50) + b"abc", "overruns the data"),
        (XERIAL_HEADER + struct.pack(">i", -1), "overruns the data"),
    ],
)
def test_bad_xerial_framing(data: bytes, message: str) -> None:
    with pytest.raises(CompressionError, match=message):
        decompress(SNAPPY, data)


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_is_a_compression_error(codec: int) -> None:
    compressed = compress(codec, SAMPLE[:3000])
    for cut in range(len(compressed)):
        if codec == SNAPPY and cut == len(XERIAL_HEADER):
            assert decompress(codec, compressed[:cut]) == b""  # a valid empty xerial stream
            continue
        with pytest.raises(CompressionError):
            decompress(codec, compressed[:cut])


@settings(max_examples=300)
@given(st.sampled_from(CODECS), st.binary(max_size=200))
def test_garbage_raises_only_compression_error(codec: int, data: bytes) -> None:
    with contextlib.suppress(CompressionError):
        decompress(codec, data)


@settings(max_examples=200)
@given(st.sampled_from(CODECS), st.data())
def test_corrupted_stream_raises_only_compression_error(codec: int, data: st.DataObject) -> None:
    compressed = bytearray(compress(codec, SAMPLE[:2000]))
    position = data.draw(st.integers(0, len(compressed) - 1))
    compressed[position] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(CompressionError):
        decompress(codec, bytes(compressed))


def test_compression_error_is_a_value_error() -> None:
    assert issubclass(CompressionError, ValueError)
