"""Consumer-side decoding of fetched bytes into :class:`ConsumerRecord` tuples, lazily,
one batch at a time.

Input: the raw bytes of one partition in a Fetch response: log entries back to back, each
``baseOffset int64 | length int32 | ...`` (12-byte prefix) — RecordBatch v2 (see
:mod:`protocol.records`) or legacy v0/v1 entries (:mod:`protocol.legacy`), told apart by the
magic byte at offset 16. The bytes may end in a partial entry (the broker cuts at
``partition_max_bytes``); :class:`BatchCursor` stops before it and reports where it stopped.

A v2 batch is decoded into columns at once but its :class:`ConsumerRecord` tuples are built
only as they are taken (:class:`DecodedRecords`, a chunk at a time), so few records are alive
at once (each is a GC-tracked tuple; see :class:`DecodedRecords`).

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

from crc32c import crc32c

from client.errors import for_code
from client.record_runs import FAST_MIN_RECORDS, Columns, fast_run
from client.types import ConsumerRecord
from protocol import compression as _compression
from protocol.legacy import decode_legacy_records, validate_legacy_entry
from protocol.records import HEADER_SIZE, LOG_OVERHEAD, CorruptRecordError
from protocol.varint import VarintError, decode_varint

__all__ = ["BatchCursor", "DecodedRecords"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_ATTR_CODEC = 0x07
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_CONTROL = 0x20
_new = tuple.__new__
_NO_HEADERS: list[tuple[str, bytes | None]] = []  # shared, never mutated


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
        Raises :class:`~client.errors.CorruptRecordError` for a corrupt batch."""
        batch = self.next_batch()
        return None if batch is None else list(batch)

    def next_batch(self) -> DecodedRecords | list[ConsumerRecord] | None:
        """Like :meth:`next_records`, but a v2 batch's records stay columns
        (:class:`DecodedRecords`) until taken."""
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

    def _v2(self, data: memoryview, pos: int, size: int) -> DecodedRecords | list[ConsumerRecord]:
        (
            base_offset,
            _length,
            _epoch,
            _magic,
            crc,
            attributes,
            last_offset_delta,
            base_ts,
            max_ts,
            _pid,
            _pepoch,
            _seq,
            count,
        ) = _HEADER.unpack_from(data, pos)
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
        return _decode(
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


def _decode(
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
    """Decode ``count`` records into columns (the ConsumerRecords are built as they are taken:
    :class:`DecodedRecords`). Runs of records sharing one layout are decoded a run at a time
    (:func:`client.record_runs.fast_run`); the rest goes through the record-at-a-time loop."""
    cols = Columns(base_ts)
    pos = index = 0
    if count >= FAST_MIN_RECORDS:
        view = memoryview(body)
        while index < count:
            run = fast_run(body, view, pos, index, count, cols)
            if run is None:
                break
            pos, index = run
    if index < count:
        pos = _decode_loop(body, pos, index, count, cols)
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
        j = min(i + n, len(self.values))
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


def _decode_loop(body: bytes, pos: int, first: int, count: int, cols: Columns) -> int:
    """Records ``first`` .. ``count - 1`` from ``pos``, one at a time (any layout: varints of
    one and two bytes inline, headers); returns the position after the last one."""
    if cols.sequential:
        cols.offset_deltas = list(range(first))
        cols.sequential = False
    if cols.keys is None:
        cols.keys = [None] * first
    offset_deltas = cols.offset_deltas
    base_ts = cols.base_ts
    headers_at = cols.headers_at
    add_offset = offset_deltas.append
    add_ts = cols.timestamps.append
    add_key = cols.keys.append
    add_value = cols.values.append
    for index in range(first, count):
        # the record length is skipped (fields are self-delimiting); then the attributes byte
        if body[pos] < 128:
            pos += 2
        elif body[pos + 1] < 128:
            pos += 3
        else:
            _, pos = decode_varint(body, pos)
            pos += 1
        b = body[pos]
        if b < 128:
            add_ts(base_ts + ((b >> 1) ^ -(b & 1)))
            pos += 1
        else:
            n, pos = decode_varint(body, pos)
            add_ts(base_ts + n)
        b = body[pos]
        if b < 128:
            add_offset(b >> 1)
            pos += 1
        elif body[pos + 1] < 128:
            add_offset(((b & 127) | (body[pos + 1] << 7)) >> 1)
            pos += 2
        else:
            n, pos = decode_varint(body, pos)
            add_offset(n)
        b = body[pos]
        if b == 1:  # null key
            add_key(None)
            pos += 1
        else:
            if b < 128:
                n = b >> 1
                pos += 1
            else:
                n, pos = decode_varint(body, pos)
            if n < 0:
                raise CorruptRecordError(f"invalid key length {n}")
            add_key(body[pos : pos + n])
            pos += n
        b = body[pos]
        if b == 1:  # null value
            add_value(None)
            pos += 1
        else:
            if b < 128:
                n = b >> 1
                pos += 1
            elif body[pos + 1] < 128:
                n = ((b & 127) | (body[pos + 1] << 7)) >> 1
                pos += 2
            else:
                n, pos = decode_varint(body, pos)
            if n < 0:
                raise CorruptRecordError(f"invalid value length {n}")
            add_value(body[pos : pos + n])
            pos += n
        if body[pos] == 0:
            pos += 1
        else:
            headers_at[index], pos = _headers(body, pos)
    return pos


def _headers(body: bytes, pos: int) -> tuple[list[tuple[str, bytes | None]], int]:
    count, pos = decode_varint(body, pos)
    if count < 0 or count > len(body) - pos:
        raise CorruptRecordError(f"invalid header count {count}")
    out = []
    for _ in range(count):
        n, pos = decode_varint(body, pos)
        if n < 0 or pos + n > len(body):
            raise CorruptRecordError(f"invalid header key length {n}")
        try:
            key = body[pos : pos + n].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        pos += n
        n, pos = decode_varint(body, pos)
        if n < 0:
            out.append((key, None))
        else:
            out.append((key, body[pos : pos + n]))
            pos += n
    return out, pos


def iter_records(
    topic: str, partition: int, data: memoryview, position: int
) -> Iterator[ConsumerRecord]:
    """Every record of the whole batches in ``data`` at or after ``position``."""
    cursor = BatchCursor(topic, partition, data, position)
    while (records := cursor.next_batch()) is not None:
        yield from records
