"""Encoding records into one Kafka RecordBatch v2 (Kafka's ``MemoryRecordsBuilder``).

A batch is built whole: its records (the layout in :mod:`odradek.protocol.records`) are encoded
as they are appended, the body is compressed once by the batch's codec, then the header
(:mod:`odradek.protocol.record_batch`) is packed with the CRC-32C over bytes 21..end. Offsets are
deltas from the base offset the broker assigns later; timestamps are deltas from the first
record's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from crc32c import crc32c

from odradek.protocol import compression as _compression
from odradek.protocol.record_batch import (
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    HEADER_PREFIX,
    HEADER_SIZE,
    HEADER_TAIL,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Buffer,
    Compression,
)
from odradek.protocol.varint import encode_varint

__all__ = ["BatchBuilder", "batch_header", "encode_batch", "encode_record"]

_ZERO = b"\x00"
_NULL = encode_varint(-1)
_NO_HEADERS = encode_varint(0)


class BatchBuilder:
    """Accumulates records into one v2 batch; :meth:`build` returns its bytes.

    Records are encoded as they are appended (:func:`encode_record`), into a list of byte
    strings joined once by :meth:`build`.
    """

    __slots__ = ("_base_ts", "_body_bytes", "_compression", "_count", "_max_ts", "_parts")

    def __init__(self, compression: Compression = Compression.NONE) -> None:
        self._compression = Compression(compression)
        self._parts: list[bytes] = []
        self._count = 0
        self._body_bytes = 0
        self._base_ts: int | None = None
        self._max_ts = -1

    def __len__(self) -> int:
        return self._count

    @property
    def size_bytes(self) -> int:
        """The uncompressed size the batch would have if built now."""
        return HEADER_SIZE + self._body_bytes

    def append(
        self,
        value: bytes | None,
        key: bytes | None = None,
        timestamp_ms: int = 0,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> int:
        """Add one record; returns its offset delta within the batch."""
        base_ts = self._base_ts
        if base_ts is None:
            base_ts = self._base_ts = timestamp_ms
        if timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        delta = self._count
        record = encode_record(delta, timestamp_ms - base_ts, key, value, headers)
        self._parts.append(record)
        self._body_bytes += len(record)
        self._count = delta + 1
        return delta

    def build(
        self,
        base_offset: int = 0,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        transactional: bool = False,
        log_append_time: bool = False,
    ) -> bytes:
        """The batch's bytes. An empty builder cannot be built (Kafka has no empty batches)."""
        if not self._count:
            raise ValueError("a record batch needs at least one record")
        body = b"".join(self._parts)
        attributes = int(self._compression)
        if self._compression:
            body = _compression.compress(self._compression, body)
        if transactional:
            attributes |= ATTR_TRANSACTIONAL
        if log_append_time:
            attributes |= ATTR_LOG_APPEND_TIME
        header = batch_header(
            body,
            self._count,
            self._base_ts,  # type: ignore[arg-type]
            self._max_ts,
            attributes,
            base_offset=base_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            partition_leader_epoch=partition_leader_epoch,
        )
        return header + body


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
) -> bytes:
    """One record's bytes (the layout in :mod:`odradek.protocol.records`), length first: the
    one pure-Python record encoder (:class:`BatchBuilder`, and the client's pure-Python record
    buffer, ``odradek.client.record_buffer``)."""
    if key is None:
        key_len, key = _NULL, b""
    else:
        key_len = encode_varint(len(key))
    if value is None:
        value_len, value = _NULL, b""
    else:
        value_len = encode_varint(len(value))
    ts_delta = encode_varint(timestamp_delta)
    delta = encode_varint(offset_delta)
    header_bytes = _encode_headers(headers) if headers else _NO_HEADERS
    length = (
        1
        + len(ts_delta)
        + len(delta)
        + len(key_len)
        + len(key)
        + len(value_len)
        + len(value)
        + len(header_bytes)
    )
    return b"".join(
        (
            encode_varint(length),
            _ZERO,
            ts_delta,
            delta,
            key_len,
            key,
            value_len,
            value,
            header_bytes,
        )
    )


def batch_header(
    body: Buffer,
    count: int,
    base_timestamp_ms: int,
    max_timestamp_ms: int,
    attributes: int,
    *,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """The 61-byte header of a batch of ``count`` records whose (compressed) records section
    is ``body``, with its CRC-32C over bytes 21..end (the header's tail, then ``body``: a
    large ``body`` is checksummed with the GIL released and never copied)."""
    tail = HEADER_TAIL.pack(
        attributes,
        count - 1,
        base_timestamp_ms,
        max_timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(body, crc32c(tail))
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    return HEADER_PREFIX.pack(base_offset, length, partition_leader_epoch, 2, crc) + tail


def _encode_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        key_bytes = key.encode()
        parts.append(encode_varint(len(key_bytes)))
        parts.append(key_bytes)
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_batch(
    records: Iterable[tuple[bytes | None, bytes | None]]
    | Iterable[tuple[bytes | None, bytes | None, int]]
    | Iterable[tuple[bytes | None, bytes | None, int, Sequence[tuple[str, bytes | None]]]],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    **build_options: int | bool,
) -> bytes:
    """Encode ``(key, value[, timestamp_ms[, headers]])`` tuples as one batch."""
    builder = BatchBuilder(compression)
    for record in records:
        key, value, *rest = record
        builder.append(value, key, *rest)  # type: ignore[arg-type]
    return builder.build(base_offset, **build_options)  # type: ignore[arg-type]
