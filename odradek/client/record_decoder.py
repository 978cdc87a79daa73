"""The pure-Python twin of the consumer's C record decoder (``odradek.client._record_decoder``):
one RecordBatch v2 records section into ConsumerRecords, built as they are taken.

Input: the records after the 61-byte batch header, decompressed: ``count`` records back to
back, each (:mod:`odradek.protocol.records`)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | (keyLength varint | key utf-8 | valueLength varint | value) * count

Rules, the same as the C decoder's (``client/_record_decoder.c``, whose comment lists them):
varints of at most 5 bytes / 32 bits, varlongs of at most 10 bytes / 64 bits (non-minimal
encodings accepted, as Kafka does); each record's length equal to its fields' size; key,
value and header value lengths of at least -1 (-1: null, in any encoding); header counts and
header key lengths of at least 0; UTF-8 header keys; no bytes after ``count`` records. A
broken rule raises CorruptRecordError naming the record; a field running past the body raises
IndexError (both are a corrupt batch to :class:`odradek.client.records.BatchCursor`). Both
decoders accept and reject the same bodies and give the same records: the tests run them side
by side (``tests/client/test_record_decoder.py``).

:func:`decode_columns` checks and decodes every record at once, one at a time (varints of one
and two bytes read inline from tables, the rest by :func:`varint` and :func:`varlong`), into
columns: offsets, timestamps, keys, values, and the headers of the records that have any.
:class:`DecodedRecords` holds the columns and builds the ConsumerRecords as they are taken,
``take(n)`` and ``len()`` like the C decoder's ``Records``.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import repeat

from odradek.client.types import ConsumerRecord
from odradek.protocol.record_batch import CorruptRecordError

__all__ = ["DecodedRecords", "decode_columns"]

Headers = list[tuple[str, bytes | None]]

_new = tuple.__new__
_NO_HEADERS: Headers = []  # shared, never mutated
_ZIGZAG_1 = [(b >> 1) ^ -(b & 1) for b in range(128)]  # one-byte varint -> value
# two-byte varint (first byte b0 >= 128, second b1 < 128) -> value, at b0 + _HIGH_7[b1]
_HIGH_7 = [(b << 7) - 128 for b in range(128)]
_ZIGZAG_2 = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]


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
    """The ``count`` records of ``body``, checked and decoded into columns; the records
    below ``min_offset`` are skipped the way the C decoder skips them (``bisect_left`` over
    the offsets, when the first one is below it). ``log_append_ts``: every record's timestamp
    (the batch's LogAppendTime), else ``None``."""
    if count < 0:
        raise CorruptRecordError(f"invalid record count {count}")
    one = _ZIGZAG_1
    two = _ZIGZAG_2  # at b0 + high[b1]
    high = _HIGH_7
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers_at: dict[int, Headers] = {}
    add_offset = offsets.append
    add_ts = timestamps.append
    add_key = keys.append
    add_value = values.append
    pos = 0
    for index in range(count):
        b = body[pos]  # the record length; then the attributes byte, skipped
        if b < 128:
            end = pos + 1 + one[b]
            pos += 2
        elif body[pos + 1] < 128:
            end = pos + 2 + two[b + high[body[pos + 1]]]
            pos += 3
        else:
            n, pos = varint(body, pos)
            end = pos + n
            pos += 1
        b = body[pos]
        if b < 128:
            add_ts(base_ts + one[b])
            pos += 1
        elif body[pos + 1] < 128:
            add_ts(base_ts + two[b + high[body[pos + 1]]])
            pos += 2
        else:
            n, pos = varlong(body, pos)
            add_ts(base_ts + n)
        b = body[pos]
        if b < 128:
            add_offset(base_offset + one[b])
            pos += 1
        elif body[pos + 1] < 128:
            add_offset(base_offset + two[b + high[body[pos + 1]]])
            pos += 2
        else:
            n, pos = varint(body, pos)
            add_offset(base_offset + n)
        b = body[pos]
        if b < 128:
            n = one[b]
            pos += 1
        else:
            n, pos = varint(body, pos)
        if n >= 0:
            add_key(body[pos : pos + n])
            pos += n
        elif n == -1:
            add_key(None)
        else:
            raise CorruptRecordError(f"record {index}: invalid key length {n}")
        b = body[pos]
        if b < 128:
            n = one[b]
            pos += 1
        elif body[pos + 1] < 128:
            n = two[b + high[body[pos + 1]]]
            pos += 2
        else:
            n, pos = varint(body, pos)
        if n >= 0:
            add_value(body[pos : pos + n])
            pos += n
        elif n == -1:
            add_value(None)
        else:
            raise CorruptRecordError(f"record {index}: invalid value length {n}")
        if body[pos] == 0:
            pos += 1
        else:
            headers_at[index], pos = _headers(body, pos, index)
        if pos != end:  # also a field that overran the record (slices clip)
            raise CorruptRecordError(f"record {index}: its length disagrees with its fields")
    if pos != len(body):
        raise CorruptRecordError(f"{len(body) - pos} bytes left after {count} records")
    start = 0
    if count and offsets[0] < min_offset:
        start = bisect_left(offsets, min_offset)
    return DecodedRecords(
        topic,
        partition,
        ts_type,
        offsets,
        timestamps if log_append_ts is None else log_append_ts,
        keys,
        values,
        [headers_at.get(i, _NO_HEADERS) for i in range(count)] if headers_at else None,
        start,
    )


def _headers(body: bytes, pos: int, index: int) -> tuple[Headers, int]:
    count, pos = varint(body, pos)
    if count < 0 or count > len(body) - pos:
        raise CorruptRecordError(f"record {index}: invalid header count {count}")
    out = []
    for _ in range(count):
        n, pos = varint(body, pos)
        if n < 0 or pos + n > len(body):
            raise CorruptRecordError(f"record {index}: invalid header key length {n}")
        try:
            key = body[pos : pos + n].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError(f"record {index}: header key is not UTF-8") from None
        pos += n
        n, pos = varint(body, pos)
        if n >= 0:
            out.append((key, body[pos : pos + n]))
            pos += n
        elif n == -1:
            out.append((key, None))
        else:
            raise CorruptRecordError(f"record {index}: invalid header value length {n}")
    return out, pos


def varint(body: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (at most 5 bytes, 32 bits) at ``body[pos]``; ``(value, next_pos)``."""
    return _zigzag(body, pos, 28, 0x0F, "varint longer than 5 bytes or beyond 32 bits")


def varlong(body: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varlong (at most 10 bytes, 64 bits) at ``body[pos]``; ``(value, next_pos)``."""
    return _zigzag(body, pos, 63, 0x01, "varlong longer than 10 bytes or beyond 64 bits")


def _zigzag(body: bytes, pos: int, last_shift: int, last_max: int, error: str) -> tuple[int, int]:
    """A zig-zag LEB128 number whose byte at ``last_shift`` (the last one allowed) is at most
    ``last_max``: longer or bigger is corrupt."""
    raw = shift = 0
    while True:
        b = body[pos]
        pos += 1
        if shift == last_shift and b > last_max:
            raise CorruptRecordError(error)
        raw |= (b & 0x7F) << shift
        if b < 128:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


class DecodedRecords:
    """The records of one decoded batch, kept as columns; :meth:`take` builds the
    ConsumerRecords a chunk at a time (C-level ``map``/``zip``), so only the records being
    handed out exist as objects: few survive a garbage-collector pass (each ConsumerRecord is
    a GC-tracked tuple; a whole batch of them alive at once made the collector a third of
    the consumer's time). ``timestamps`` is an int when every record has the batch's
    LogAppendTime; ``headers`` ``None`` when no record has any."""

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
        offsets: list[int],
        timestamps: int | list[int],
        keys: list[bytes | None],
        values: list[bytes | None],
        headers: list[Headers] | None,
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
                    self.keys[i:j],
                    self.values[i:j],
                    repeat(_NO_HEADERS) if self.headers is None else self.headers[i:j],
                ),
            )
        )
