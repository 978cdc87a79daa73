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

Untrusted input (a produced batch, a stored batch read back) goes through
:func:`decompress_bounded`, which never produces nor allocates more than ``max_bytes + 1``
bytes of output, however small the input (a 33 KB zstd frame may expand to 2 GiB): gzip
streams through :mod:`zlib` with ``max_length``; zstd and lz4 decompress into a buffer of 8,
then 256 times the input, then one of ``max_bytes + 1`` (a codec that fills it is over the
limit); snappy blocks declare their length up front and are checked before they are
decompressed. Over the limit: :class:`DecompressionLimitError`.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

__all__ = [
    "CompressionError",
    "DecompressionLimitError",
    "compress",
    "decompress",
    "decompress_bounded",
]

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_BYTES = 32 * 1024  # snappy-java's default block size
_BLOCK_LENGTH = struct.Struct(">i")

GZIP_LEVEL = 6
ZSTD_LEVEL = 3

# Codec ids as in attribute bits 0-2 (protocol.record_batch.Compression).
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


class CompressionError(ValueError):
    """Compressed bytes that the named codec cannot decode, or an unknown codec id."""


class DecompressionLimitError(CompressionError):
    """Compressed bytes that decompress to more than the caller's limit."""

    def __init__(self, codec: int, max_bytes: int, bound: str = "") -> None:
        """``bound``: the name of the limit, for the message (e.g. a config key)."""
        super().__init__(
            f"{_NAMES.get(codec, codec)} data decompresses to more than {max_bytes} bytes"
            + (f" ({bound})" if bound else "")
        )
        self.max_bytes = max_bytes


_FIRST_BUFFER_BYTES = 64 * 1024
_RATIOS = (8, 256)  # buffer sizes tried before the limit, as multiples of the input
_BUFFER_TOO_SMALL = "failed to write whole buffer"  # cramjam's message for a full buffer
_GZIP_WBITS = 16 + zlib.MAX_WBITS


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
            return _xerial_decompress(data, None)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"cannot decompress {_NAMES[codec]} data: {exc}") from None
    raise CompressionError(f"unknown compression codec id {codec}")


_NAMES = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}


def decompress_bounded(codec: int, data: bytes | memoryview, max_bytes: int) -> bytes:
    """:func:`decompress`, refusing (:class:`DecompressionLimitError`) output over
    ``max_bytes`` without ever holding more than ``max_bytes + 1`` bytes of it."""
    try:
        if codec == GZIP:
            return _gzip_bounded(data, max_bytes)
        if codec == SNAPPY:
            return _xerial_decompress(bytes(data), max_bytes)
        if codec in (LZ4, ZSTD):
            return _into_growing_buffer(codec, data, max_bytes)
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"cannot decompress {_NAMES[codec]} data: {exc}") from None
    raise CompressionError(f"unknown compression codec id {codec}")


def _gzip_bounded(data: bytes | memoryview, max_bytes: int) -> bytes:
    out: list[bytes] = []
    total = 0
    pending = bytes(data)
    while pending:  # one gzip member per round (a stream may concatenate members)
        stream = zlib.decompressobj(_GZIP_WBITS)
        try:
            chunk = stream.decompress(pending, max_bytes + 1 - total)
        except zlib.error as exc:
            raise CompressionError(f"cannot decompress gzip data: {exc}") from None
        total += len(chunk)
        if total > max_bytes or stream.unconsumed_tail:
            raise DecompressionLimitError(GZIP, max_bytes)
        if not stream.eof:
            raise CompressionError("cannot decompress gzip data: truncated stream")
        out.append(chunk)
        pending = stream.unused_data
    return b"".join(out)


def _into_growing_buffer(codec: int, data: bytes | memoryview, max_bytes: int) -> bytes:
    """At most three attempts: buffers of 8 and 256 times the input (almost every real batch:
    JSON compresses ~10x, a run of one byte ~100x), then one of ``max_bytes + 1`` (a bomb
    expands ~30,000x). Few sizes, each proportional to the input: a ladder of doublings would
    make many differently sized transient allocations, and in worker threads those fragment
    the allocator's arenas (measured: RSS ratcheting up to ~1 GiB under a flood of bombs)."""
    module = cramjam.zstd if codec == ZSTD else cramjam.lz4
    limit = max_bytes + 1
    sizes = sorted({min(limit, max(_FIRST_BUFFER_BYTES, r * len(data))) for r in _RATIOS} | {limit})
    for size in sizes:
        buffer = bytearray(size)
        try:
            written = module.decompress_into(data, buffer)
        except cramjam.DecompressionError as exc:
            if _BUFFER_TOO_SMALL not in str(exc):
                raise
            del buffer
            continue
        if written > max_bytes:
            break
        return bytes(memoryview(buffer)[:written])
    raise DecompressionLimitError(codec, max_bytes)


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_block(block: bytes, budget: int | None, max_bytes: int | None) -> bytes:
    """One raw snappy block, its declared length checked against ``budget`` (what is left
    of ``max_bytes``) first."""
    if budget is not None and cramjam.snappy.decompress_raw_len(block) > budget:
        raise DecompressionLimitError(SNAPPY, max_bytes or 0)
    return bytes(cramjam.snappy.decompress_raw(block))


def _xerial_decompress(data: bytes, max_bytes: int | None) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, max_bytes, max_bytes)
    if len(data) < len(_XERIAL_HEADER):
        raise CompressionError("truncated xerial snappy header")
    pos = len(_XERIAL_HEADER)
    out = []
    total = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("truncated xerial snappy block length")
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CompressionError(f"xerial snappy block of {length} bytes overruns the data")
        budget = None if max_bytes is None else max_bytes - total
        block = _snappy_block(data[pos : pos + length], budget, max_bytes)
        total += len(block)
        out.append(block)
        pos += length
    if max_bytes is not None and total > max_bytes:
        raise DecompressionLimitError(SNAPPY, max_bytes)
    return b"".join(out)
