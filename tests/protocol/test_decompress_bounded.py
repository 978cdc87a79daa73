"""protocol.compression.decompress_bounded: exact at the limit, refused one byte over it,
never expanding a bomb; and protocol.validate's cheap codec scan."""

from __future__ import annotations

import gzip
import time

import cramjam
import pytest

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.compression import (
    CompressionError,
    DecompressionLimitError,
    compress,
    decompress_bounded,
)
from odradek.protocol.validate import has_compressed_batch

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
DATA = b"records, records, records " * 40_000  # ~1 MiB, compresses well


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_the_limit_is_exact(codec: int) -> None:
    packed = compress(codec, DATA)
    assert decompress_bounded(codec, packed, len(DATA)) == DATA
    with pytest.raises(DecompressionLimitError, match=f"more than {len(DATA) - 1} bytes"):
        decompress_bounded(codec, packed, len(DATA) - 1)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_garbage_is_a_compression_error(codec: int) -> None:
    with pytest.raises(CompressionError):
        decompress_bounded(codec, b"\x00garbage, not a frame" * 3, 1 << 20)


def test_a_multi_frame_zstd_bomb_is_refused_at_once() -> None:
    frame = bytes(cramjam.zstd.compress(b"\0" * (64 << 20), level=3))
    started = time.perf_counter()
    with pytest.raises(DecompressionLimitError):
        decompress_bounded(4, frame * 32, 1 << 20)  # 2 GiB behind 66 KB
    assert time.perf_counter() - started < 1.0


def test_gzip_members_are_concatenated_and_bounded_together() -> None:
    two = gzip.compress(b"a" * 1000) + gzip.compress(b"b" * 1000)
    assert decompress_bounded(1, two, 2000) == b"a" * 1000 + b"b" * 1000
    with pytest.raises(DecompressionLimitError):
        decompress_bounded(1, two, 1999)
    with pytest.raises(CompressionError, match="truncated"):
        decompress_bounded(1, two[:-10], 2000)


def test_has_compressed_batch_reads_every_header() -> None:
    plain = encode_batch([(b"k", b"v")])
    zstd = encode_batch([(b"k", b"v")], compression=4)
    assert not has_compressed_batch(plain * 3)
    assert has_compressed_batch(plain + plain + zstd)
    assert not has_compressed_batch(plain[:40])  # shorter than a header: nothing to say
