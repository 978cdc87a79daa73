"""Re-encode a v2 batch with another codec: the broker side of a topic's ``compression.type``.

Kafka stores a batch as the producer sent it when the topic's ``compression.type`` is
``producer`` (the default) or names the codec the batch already has; otherwise the broker
decompresses the records and writes them again with the topic's codec (``uncompressed``
means no codec). Only the body, the codec bits, ``batchLength`` and the CRC change: the
records' bytes are kept as they are (their deltas are relative to the batch's base offset and
base timestamp, which stay), and so are every header field: base offset, offset range,
timestamps and their type, producer id, epoch, base sequence, partition leader epoch, the
transactional flag. No record is decoded into Python objects: re-encoding costs one
decompression and one compression, however many records the batch holds (decoding 4 million
7-byte records would take a gigabyte). Control batches are never re-encoded.

The input must be one valid batch; ``body``, its records decompressed, as
:func:`odradek.protocol.validate.validate_produced_batch` returned them (so the body is never
decompressed twice, nor beyond the validation's bound). Without ``body`` the batch is trusted
and decompressed here.
"""

from __future__ import annotations

from odradek.protocol import compression as _compression
from odradek.protocol.record_batch import (
    HEADER_SIZE,
    Buffer,
    Compression,
    parse_batch_header,
    with_body,
)

__all__ = ["CODECS", "recompress_batch", "target_codec"]

# compression.type values that name a codec, and the codec each one means.
CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def target_codec(compression_type: str) -> Compression | None:
    """The codec a topic's ``compression.type`` imposes (None: keep the producer's)."""
    return CODECS.get(compression_type)


def recompress_batch(batch: Buffer, codec: Compression, body: Buffer | None = None) -> Buffer:
    """``batch`` re-encoded with ``codec`` (module docstring); the same object if it already
    uses it."""
    header = parse_batch_header(batch)
    if header.compression == codec or header.is_control:
        return batch
    if body is None:
        stored = bytes(batch[HEADER_SIZE : header.size_bytes])
        body = _compression.decompress(header.compression, stored) if header.compression else stored
    records = bytes(body)
    if codec:
        records = _compression.compress(codec, records)
    return with_body(batch, records, codec=codec)
