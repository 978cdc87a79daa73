"""Re-encode a v2 batch with another codec: the broker side of a topic's ``compression.type``.

Kafka stores a batch as the producer sent it when the topic's ``compression.type`` is
``producer`` (the default) or names the codec the batch already has; otherwise the broker
decompresses the records and writes them again with the topic's codec (``uncompressed``
means no codec). Everything but the body and the codec bits is kept: base offset, every
record's offset delta, timestamp, key, value and headers, the timestamp type, producer id,
epoch, base sequence, partition leader epoch and the transactional flag. The new batch gets a
new length and CRC. Control batches are never re-encoded.

The input must be one batch that passed :func:`odradek.protocol.validate.validate_produced_batch`
(so its offset deltas are ``0 .. recordCount - 1``, which :class:`BatchBuilder` reproduces), with
the decompressed body that validation returned: the body is never decompressed twice, and never
beyond the validation's bound.
"""

from __future__ import annotations

from odradek.protocol.records import (
    BatchBuilder,
    Buffer,
    Compression,
    CorruptRecordError,
    decode_body,
    decode_records,
    parse_batch_header,
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
    """``batch`` re-encoded with ``codec``; the same object if it already uses it. ``body``:
    its decompressed records, as validation returned them (None: a trusted batch, decompressed
    here)."""
    header = parse_batch_header(batch)
    if header.compression == codec or header.is_control:
        return batch
    builder = BatchBuilder(codec)
    records = decode_records(batch) if body is None else decode_body(header, bytes(body))
    for expected_offset, record in enumerate(records, start=header.base_offset):
        if record.offset != expected_offset:
            raise CorruptRecordError(
                f"record offset delta {record.offset - header.base_offset} where "
                f"{expected_offset - header.base_offset} was expected"
            )
        builder.append(record.value, record.key, record.timestamp_ms, record.headers)
    return builder.build(
        header.base_offset,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        transactional=header.is_transactional,
        log_append_time=bool(header.timestamp_type),
    )
