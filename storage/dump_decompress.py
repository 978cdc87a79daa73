"""Decompression with a ceiling on the output, for ``dump-log``'s deep iteration.

A batch body of a few kilobytes can expand to gigabytes (64 MiB zstd frames of zeros compress
to a few hundred bytes each). :class:`BoundedDecompressor` never holds more than ``max_bytes``
of output: gzip, lz4 and zstd decode into one preallocated buffer of ``max_bytes + 1`` bytes
(reused from batch to batch) and stop when it is full; snappy (xerial framing or one raw block)
states each block's uncompressed length up front, so the sum is checked before anything is
decompressed. Output over the ceiling raises :class:`DecompressedTooLarge`; bytes the codec
cannot decode raise :class:`~odradek.protocol.compression.CompressionError`.
"""

from __future__ import annotations

import struct

import cramjam

from odradek.protocol import compression

__all__ = ["BoundedDecompressor", "DecompressedTooLarge"]

_STREAMING = {compression.GZIP: cramjam.gzip, compression.LZ4: cramjam.lz4}
_STREAMING[compression.ZSTD] = cramjam.zstd
_XERIAL_HEADER_BYTES = 16  # magic (8) | version int32 | compatible int32
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_BLOCK_LENGTH = struct.Struct(">i")
_FULL = "failed to write whole buffer"  # cramjam's message when the output buffer is full


class DecompressedTooLarge(ValueError):
    """A body whose decompressed size is over the ceiling."""


class BoundedDecompressor:
    """Decompress batch bodies to at most ``max_bytes`` each."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer: bytearray | None = None  # allocated on the first compressed batch

    def decompress(self, codec: int, body: bytes) -> bytes:
        if codec == compression.SNAPPY:
            self._check(_snappy_length(body))
            return compression.decompress(codec, body)
        module = _STREAMING.get(codec)
        if module is None:
            return compression.decompress(codec, body)  # an unknown id: CompressionError
        if self._buffer is None:
            self._buffer = bytearray(self.max_bytes + 1)
        try:
            size = module.decompress_into(body, self._buffer)
        except cramjam.DecompressionError as exc:
            if _FULL in str(exc):
                self._check(self.max_bytes + 1)
            raise compression.CompressionError(str(exc)) from None
        self._check(size)
        return bytes(memoryview(self._buffer)[:size])

    def _check(self, size: int) -> None:
        if size > self.max_bytes:
            raise DecompressedTooLarge(
                f"decompresses to more than {self.max_bytes} bytes"
                + ("" if size == self.max_bytes + 1 else f" ({size})")
            )


def _snappy_length(body: bytes) -> int:
    """The uncompressed length snappy data declares (xerial blocks summed, or one raw block)."""
    try:
        if not body.startswith(_XERIAL_MAGIC):
            return int(cramjam.snappy.decompress_raw_len(body))
        total = 0
        position = _XERIAL_HEADER_BYTES
        while position < len(body):
            (length,) = _BLOCK_LENGTH.unpack_from(body, position)
            position += _BLOCK_LENGTH.size
            if length < 0 or position + length > len(body):
                raise compression.CompressionError(f"snappy block of {length} bytes cut short")
            total += int(cramjam.snappy.decompress_raw_len(body[position : position + length]))
            position += length
        return total
    except (struct.error, cramjam.DecompressionError) as exc:
        raise compression.CompressionError(f"snappy: {exc}") from None
