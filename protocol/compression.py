"""Batch-level compression codecs, byte-compatible with what Kafka's clients write.

- gzip: RFC 1952 gzip stream (level 6 by default, as Java's ``GZIPOutputStream``).
- snappy: xerial ``SnappyOutputStream`` framing, which is what Kafka writes::

      magic  b"\\x82SNAPPY\\x00"  version int32 = 1  compatible int32 = 1
      then blocks: length int32 (big-endian) | raw snappy block

  Decoding also accepts a bare raw snappy block (some non-Java clients write that).
- lz4: the LZ4 frame format (Kafka ≥ 0.10, magic ≥ 1).
- zstd: a zstd frame (level 3 by default, Kafka's ``compression.zstd.level``).

Every codec here is pure bytes in, bytes out (sans-I/O); errors surface as
:class:`CompressionError`, which the record codec reports as a corrupt batch.
"""

from __future__ import annotations

import struct

import cramjam

__all__ = ["CompressionError", "compress", "decompress"]

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_BYTES = 32 * 1024  # snappy-java's default block size
_BLOCK_LENGTH = struct.Struct(">i")

GZIP_LEVEL = 6
ZSTD_LEVEL = 3

# Codec ids as in attribute bits 0-2 (protocol.records.Compression).
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


class CompressionError(ValueError):
    """Compressed bytes that the named codec cannot decode, or an unknown codec id."""


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` with codec id ``codec`` (1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=GZIP_LEVEL))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))
    raise CompressionError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: bytes) -> bytes:
    """Inverse of :func:`compress`; raises :class:`CompressionError` on any bad input."""
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _xerial_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"cannot decompress {_NAMES[codec]} data: {exc}") from None
    raise CompressionError(f"unknown compression codec id {codec}")


_NAMES = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _xerial_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    if len(data) < len(_XERIAL_HEADER):
        raise CompressionError("truncated xerial snappy header")
    pos = len(_XERIAL_HEADER)
    out = []
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("truncated xerial snappy block length")
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CompressionError(f"xerial snappy block of {length} bytes overruns the data")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(out)
