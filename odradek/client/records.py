"""Consumer-side decoding of fetched bytes into :class:`ConsumerRecord` tuples, lazily,
one batch at a time.

Input: the raw bytes of one partition in a Fetch response: log entries back to back, each
``baseOffset int64 | length int32 | ...`` (12-byte prefix) — RecordBatch v2 (see
:mod:`odradek.protocol.records`) or legacy v0/v1 entries (:mod:`odradek.protocol.legacy`), told
apart by the magic byte at offset 16. The bytes may end in a partial entry (the broker cuts at
``partition_max_bytes``); :class:`BatchCursor` stops before it and reports where it stopped.

A v2 batch is checked at once but its :class:`ConsumerRecord` tuples are built only as they
are taken (``take(n)``: :class:`odradek.client.record_decoder.DecodedRecords` says why). Its
body is decoded by :data:`decode_body`: the C decoder, ``odradek.client._record_decoder`` (its
``Records``), when it was built and ``NO_ODRADEK_EXTENSIONS`` is not set
(:mod:`odradek.protocol.native`); else its pure-Python twin,
:class:`odradek.client.record_decoder.DecodedRecords`.

Rules: each v2 batch's CRC-32C is checked (Kafka's ``check.crcs``); control batches are
skipped (they still advance the position); records below the consumer's position are skipped
(a batch may start before it, e.g. a compressed batch or a fetch from the middle of one); the
position after a batch is its last offset + 1 even if its tail records were compacted away.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from crc32c import crc32c

from odradek.client.errors import for_code
from odradek.client.record_decoder import DecodedRecords
from odradek.client.types import ConsumerRecord
from odradek.protocol import compression as _compression
from odradek.protocol import native
from odradek.protocol.legacy import decode_legacy_records, validate_legacy_entry
from odradek.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, CorruptRecordError
from odradek.protocol.varint import VarintError

__all__ = ["BatchCursor", "LazyRecords", "decode_body"]

_HEADER = struct.Struct(">q9xIhiqq14xi")  # the fields of a v2 batch header _v2 reads
_PREFIX = struct.Struct(">qi")
_ATTR_CODEC = 0x07
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_CONTROL = 0x20
_native = native.load("odradek.client._record_decoder")  # None: not built, or disabled


class BatchCursor:
    """Walks one partition's fetched bytes; :meth:`next_records` decodes one batch at a time.

    ``position`` is the next offset the consumer wants; after each batch it is the offset
    after that batch (or unchanged when no whole batch is left: a partial tail)."""

    __slots__ = ("data", "partition", "pos", "position", "topic")

    def __init__(self, topic: str, partition: int, data: memoryview, position: int) -> None:
        self.topic = topic
        self.partition = partition
        self.data = data
        self.pos = 0
        self.position = position

    @property
    def exhausted(self) -> bool:
        data = self.data
        pos = self.pos
        if len(data) - pos < LOG_OVERHEAD:
            return True
        (_, length) = _PREFIX.unpack_from(data, pos)
        return pos + LOG_OVERHEAD + length > len(data)

    def next_records(self) -> list[ConsumerRecord] | None:
        """Records of the next whole batch at or after ``position`` (possibly empty: a control
        batch or one wholly below the position); ``None`` when no whole batch is left.
        Raises :class:`~odradek.client.errors.CorruptRecordError` for a corrupt batch."""
        batch = self.next_batch()
        if batch is None or type(batch) is list:
            return batch
        return batch.take(len(batch))

    def next_batch(self) -> LazyRecords | list[ConsumerRecord] | None:
        """Like :meth:`next_records`, but a v2 batch's records are built only as they are
        taken (:data:`LazyRecords`)."""
        data = self.data
        pos = self.pos
        if len(data) - pos < LOG_OVERHEAD + 5:
            return None
        base_offset, length = _PREFIX.unpack_from(data, pos)
        size = LOG_OVERHEAD + length
        if pos + size > len(data):
            return None
        self.pos = pos + size
        try:
            if data[pos + 16] != 2:
                return self._legacy(data[pos : pos + size])
            return self._v2(data, pos, size)
        except (CorruptRecordError, VarintError, IndexError, struct.error) as exc:
            raise for_code(
                2, f"{self.topic}-{self.partition} at offset {base_offset}: {exc}"
            ) from None

    def _legacy(self, entry: memoryview) -> list[ConsumerRecord]:
        info = validate_legacy_entry(entry)
        ts_type = 1 if info.magic == 1 and info.attributes & _ATTR_LOG_APPEND_TIME else 0
        position = self.position
        out = [
            ConsumerRecord(
                self.topic, self.partition, r.offset, r.timestamp_ms, ts_type, r.key, r.value, []
            )
            for r in decode_legacy_records(entry)
            if r.offset >= position
        ]
        self.position = max(position, info.offset + 1)
        return out

    def _v2(self, data: memoryview, pos: int, size: int) -> LazyRecords | list[ConsumerRecord]:
        # baseOffset, (length, epoch, magic), crc, attributes, lastOffsetDelta, baseTimestamp,
        # maxTimestamp, (producerId, producerEpoch, baseSequence), count
        base_offset, crc, attributes, last_offset_delta, base_ts, max_ts, count = (
            _HEADER.unpack_from(data, pos)
        )
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"batch of {size} bytes is shorter than its header")
        if crc32c(data[pos + 21 : pos + size]) != crc:
            raise CorruptRecordError("record batch CRC mismatch")
        position = self.position
        next_offset = base_offset + last_offset_delta + 1
        if next_offset > position:
            self.position = next_offset
        if attributes & _ATTR_CONTROL or next_offset <= position:
            return []
        body = bytes(data[pos + HEADER_SIZE : pos + size])
        codec = attributes & _ATTR_CODEC
        if codec:
            try:
                body = _compression.decompress(codec, body)
            except _compression.CompressionError as exc:
                raise CorruptRecordError(str(exc)) from None
        log_append = attributes & _ATTR_LOG_APPEND_TIME
        return decode_body(
            body,
            count,
            base_offset,
            base_ts,
            max_ts if log_append else None,
            1 if log_append else 0,
            self.topic,
            self.partition,
            position,
        )


#: what BatchCursor decodes v2 bodies with (see the module docstring)
decode_body: Any = DecodedRecords if _native is None else _native.Records
#: a v2 batch's records, built as they are taken: ``take(n)`` and ``len()``
LazyRecords = Any  # record_decoder.DecodedRecords, or the C decoder's Records


def iter_records(
    topic: str, partition: int, data: memoryview, position: int
) -> Iterator[ConsumerRecord]:
    """Every record of the whole batches in ``data`` at or after ``position``."""
    cursor = BatchCursor(topic, partition, data, position)
    while (records := cursor.next_records()) is not None:
        yield from records
