"""Consumer-side decoding of fetched bytes into :class:`ConsumerRecord` tuples, lazily,
one batch at a time.

Input: the raw bytes of one partition in a Fetch response: log entries back to back, each
``baseOffset int64 | length int32 | ...`` (12-byte prefix) — RecordBatch v2 (see
:mod:`odradek.protocol.records`) or legacy v0/v1 entries (:mod:`odradek.protocol.legacy`), told
apart by the magic byte at offset 16. The bytes may end in a partial entry (the broker cuts at
``partition_max_bytes``); :class:`BatchCursor` stops before it and reports where it stopped.

A v2 batch is checked at once but its :class:`ConsumerRecord` tuples are built only as they
are taken (a chunk at a time), so few records are alive at once (each is a GC-tracked tuple;
see :class:`DecodedRecords`). Two decoders do it, with the same results and the same errors
(``tests/client/test_record_decoder.py`` runs them side by side): the C one,
``odradek.client._record_decoder`` (its ``Records``: builds each record from the body's
bytes as it is taken), used when it was built and ``NO_ODRADEK_EXTENSIONS`` is not set
(:mod:`odradek.client.native`); else the pure-Python one (:func:`decode_columns`: the body into
columns, :mod:`odradek.client.record_runs`, then :class:`DecodedRecords` zips the records out of
them).

Rules: each v2 batch's CRC-32C is checked (Kafka's ``check.crcs``); control batches are
skipped (they still advance the position); records below the consumer's position are skipped
(a batch may start before it, e.g. a compressed batch or a fetch from the middle of one); the
position after a batch is its last offset + 1 even if its tail records were compacted away.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Iterator
from itertools import repeat
from operator import add
from typing import Any

from crc32c import crc32c

from odradek.client import native
from odradek.client.errors import for_code
from odradek.client.record_runs import FAST_MIN_RECORDS, Columns, decode_loop, fast_run
from odradek.client.types import ConsumerRecord
from odradek.protocol import compression as _compression
from odradek.protocol.legacy import decode_legacy_records, validate_legacy_entry
from odradek.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, CorruptRecordError
from odradek.protocol.varint import VarintError

__all__ = ["BatchCursor", "DecodedRecords", "LazyRecords", "decode_body"]

_HEADER = struct.Struct(">q9xIhiqq14xi")  # the fields of a v2 batch header _v2 reads
_PREFIX = struct.Struct(">qi")
_ATTR_CODEC = 0x07
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_CONTROL = 0x20
_new = tuple.__new__
_NO_HEADERS: list[tuple[str, bytes | None]] = []  # shared, never mutated
_LOOP_RECORDS = 256  # decoded one at a time after a short run, before trying a run again
_native = native.load("_record_decoder")  # None: not built, or disabled


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


def decode_columns(
    body: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    log_append_ts: int | None,
    ts_type: int,
    topic: str,
    partition: int,
    min_offset: int,
) -> DecodedRecords:
    """The pure-Python decoder: ``count`` records into columns (the ConsumerRecords are built
    as they are taken: :class:`DecodedRecords`). Runs of records sharing one layout are
    decoded a run at a time (:func:`odradek.client.record_runs.fast_run`); the rest goes through the
    record-at-a-time loop, and so do the next ``_LOOP_RECORDS`` after a short run (checking a
    run scans the rest of the batch: a call per record of mixed sizes took ~18 µs a record)."""
    if count < 0:
        raise CorruptRecordError(f"invalid record count {count}")
    cols = Columns(base_ts)
    pos = index = 0
    if count >= FAST_MIN_RECORDS:
        view = memoryview(body)
        while index < count:
            run = fast_run(body, view, pos, index, count, cols)
            if run is None:
                break
            if run[1] - index >= FAST_MIN_RECORDS:
                pos, index = run
            else:  # records of mixed layouts: the loop is faster, for a while
                index = min(count, run[1] + _LOOP_RECORDS)
                pos = decode_loop(body, run[0], run[1], index, cols)
    if index < count:
        pos = decode_loop(body, pos, index, count, cols)
    if pos != len(body):  # also catches a last field that overran the body (slices clip)
        raise CorruptRecordError(f"{len(body) - pos} bytes left after {count} records")
    headers: list[list[tuple[str, bytes | None]]] | None = None
    if cols.headers_at:
        headers = [cols.headers_at.get(i, _NO_HEADERS) for i in range(count)]
    offsets: range | list[int] = (
        range(base_offset, base_offset + count)
        if cols.sequential
        else list(map(add, repeat(base_offset), cols.offset_deltas))
    )
    start = 0
    if count and offsets[0] < min_offset:
        start = bisect_left(offsets, min_offset)
    return DecodedRecords(
        topic,
        partition,
        ts_type,
        offsets,
        log_append_ts if log_append_ts is not None else cols.timestamps,
        cols.keys,
        cols.values,
        headers,
        start,
    )


class DecodedRecords:
    """The records of one decoded batch, kept as columns; :meth:`take` builds the
    ConsumerRecords a chunk at a time (C-level ``map``/``zip``), so only the records being
    handed out exist as objects: few survive a garbage-collector pass (each ConsumerRecord is
    a GC-tracked tuple; a whole batch of them alive at once made the collector a third of
    the consumer's time). ``timestamps`` is an int when every record has the batch's
    LogAppendTime; ``keys`` ``None`` when every key is null; ``headers`` ``None`` when no
    record has any."""

    __slots__ = (
        "headers",
        "keys",
        "offsets",
        "partition",
        "start",
        "timestamps",
        "topic",
        "ts_type",
        "values",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        ts_type: int,
        offsets: range | list[int],
        timestamps: int | list[int],
        keys: list[bytes | None] | None,
        values: list[bytes | None],
        headers: list[list[tuple[str, bytes | None]]] | None,
        start: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.ts_type = ts_type
        self.offsets = offsets
        self.timestamps = timestamps
        self.keys = keys
        self.values = values
        self.headers = headers
        self.start = start  # records before it were taken (or are below the position)

    def __len__(self) -> int:
        return len(self.values) - self.start

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return iter(self.take(len(self)))

    def take(self, n: int) -> list[ConsumerRecord]:
        """The next ``n`` records (fewer if fewer are left), as ConsumerRecords."""
        i = self.start
        j = max(i, min(i + n, len(self.values)))
        self.start = j
        ts = self.timestamps
        return list(
            map(
                _new,
                repeat(ConsumerRecord),
                zip(
                    repeat(self.topic),
                    repeat(self.partition),
                    self.offsets[i:j],
                    repeat(ts) if type(ts) is int else ts[i:j],  # type: ignore[index]
                    repeat(self.ts_type),
                    repeat(None) if self.keys is None else self.keys[i:j],
                    self.values[i:j],
                    repeat(_NO_HEADERS) if self.headers is None else self.headers[i:j],
                ),
            )
        )


#: what BatchCursor decodes v2 bodies with: :func:`decode_columns`, or the C decoder's
#: ``Records`` (the same arguments; it checks the whole body at once and builds each
#: ConsumerRecord from the body's bytes as it is taken, by ``take(n)``)
decode_body: Any = decode_columns if _native is None else _native.Records
#: a v2 batch's records, built as they are taken: ``take(n)`` and ``len()``
LazyRecords = Any  # DecodedRecords, or the C decoder's Records


def iter_records(
    topic: str, partition: int, data: memoryview, position: int
) -> Iterator[ConsumerRecord]:
    """Every record of the whole batches in ``data`` at or after ``position``."""
    cursor = BatchCursor(topic, partition, data, position)
    while (records := cursor.next_records()) is not None:
        yield from records
