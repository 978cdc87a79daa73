"""Fetched record batches → Arrow record batches in the Kafka source's schema, column-wise.

This is the executor's hot path of a broker-backed read (the file-backed reader,
``format("odradek-files")``, decodes in the JVM: odradek/spark/jvm). Keys and values never become
Python objects, and no Python code runs per record:

1. Walk the batch headers of the fetched bytes (one ``struct`` unpack each), check each CRC-32C
   (``crc32c``), skip control batches, empty batches and batches wholly outside
   ``[from_offset, until_offset)``, decompress compressed bodies (``cramjam``, per batch).
2. Hand the kept bodies to ``records_to_columns``: the compiled ``odradek.spark._arrow_records``
   (validates every record and writes the Arrow buffers of the records in range in one pass),
   or its numpy twin :mod:`odradek.spark.columns` when it is not built or
   ``NO_ODRADEK_EXTENSIONS`` is set. Both follow the rules at the top of ``_arrow_records.c``.
3. Wrap the buffers with ``pa.Array.from_buffers`` (no copy): ``key``/``value`` binary (offsets,
   data, validity bitmap), ``offset``/``timestamp`` int64, ``timestampType`` int32, and the
   constants ``topic`` and ``partition``.

Headers (``includeHeaders``) are parsed per record in Python, for the records that have any
(one implementation for both twins). Legacy v0/v1 message sets go through
:func:`odradek.protocol.legacy.decode_legacy_records` (records as Python objects: slow, rare).

``columns`` (optional) names the columns the caller will use: ``key`` and ``value`` outside it
are returned as all-null columns without being copied, ``headers`` outside it is not parsed.
Spark's Python Data Source API (PySpark 4.3) does not tell a reader which columns a query
needs, so the Spark reader asks for every column (docs/spark.md, "Column pruning").
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from crc32c import crc32c

from odradek.protocol import compression, native
from odradek.protocol.legacy import decode_legacy_records
from odradek.protocol.record_batch import CorruptRecordError
from odradek.protocol.records import Record
from odradek.protocol.varint import VarintError, decode_varint
from odradek.spark import columns as _twin
from odradek.spark.schema import arrow_schema

__all__ = ["COLUMNS", "CorruptRecordError", "decode_fetch", "records_to_columns"]

COLUMNS = frozenset(arrow_schema(True).names)

_compiled = native.load("odradek.spark._arrow_records")
#: The compiled ``records_to_columns`` when it is built (and not disabled), else the twin's.
records_to_columns: Any = (
    _twin.records_to_columns if _compiled is None else _compiled.records_to_columns
)

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_HEADER_SIZE = 61
_LOG_OVERHEAD = 12
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_CONTROL = 0x20


class _Pending:
    """v2 batches collected for one columnar decode."""

    __slots__ = ("append_ts", "base_offsets", "base_ts", "bodies", "counts")

    def __init__(self) -> None:
        self.bodies: list[bytes | memoryview] = []
        self.counts: list[int] = []
        self.base_offsets: list[int] = []
        self.base_ts: list[int] = []
        self.append_ts: list[int] = []  # -1: CreateTime

    def __bool__(self) -> bool:
        return bool(self.bodies)


def decode_fetch(
    raw: bytes | memoryview,
    *,
    topic: str,
    partition: int,
    from_offset: int,
    until_offset: int,
    include_headers: bool,
    columns: Collection[str] | None = None,
) -> tuple[list[pa.RecordBatch], int]:
    """Decode the complete batches in ``raw`` (one partition's fetched bytes).

    Returns the Arrow batches of the records with ``from_offset <= offset < until_offset``
    and the offset the next fetch should ask for (after the last complete batch; unchanged
    if ``raw`` holds no complete batch). Raises :class:`CorruptRecordError` on a bad batch.
    ``columns``: see the module docstring (``None``: all).
    """
    wanted = COLUMNS if columns is None else frozenset(columns)
    view = memoryview(raw)
    size = len(view)
    pending = _Pending()
    out: list[pa.RecordBatch] = []
    next_offset = from_offset
    pos = 0
    while pos + _LOG_OVERHEAD <= size:
        base_offset, batch_length = _PREFIX.unpack_from(view, pos)
        end = pos + _LOG_OVERHEAD + batch_length
        if end > size or pos + 17 > size:
            break  # a partial batch at the end of the fetch
        if base_offset >= until_offset:
            break
        magic = view[pos + 16]
        if magic != 2:
            records = decode_legacy_records(view[pos:end])
            if records:
                next_offset = max(next_offset, records[-1].offset + 1)
            records = [r for r in records if from_offset <= r.offset < until_offset]
            if records:
                out.extend(
                    _flush(
                        pending,
                        topic,
                        partition,
                        from_offset,
                        until_offset,
                        include_headers,
                        wanted,
                    )
                )
                pending = _Pending()
                out.append(_records_to_arrow(records, topic, partition, include_headers))
            pos = end
            continue
        if end - pos < _HEADER_SIZE:
            raise CorruptRecordError(f"record batch at offset {base_offset} is too short")
        (_, _, _, _, crc, attributes, last_delta, base_ts, max_ts, _, _, _, count) = (
            _HEADER.unpack_from(view, pos)
        )
        if crc32c(view[pos + 21 : end]) != crc:
            raise CorruptRecordError(f"record batch at offset {base_offset}: CRC mismatch")
        next_offset = max(next_offset, base_offset + last_delta + 1)
        if base_offset + last_delta < from_offset or attributes & _CONTROL or count <= 0:
            pos = end
            continue
        body: bytes | memoryview = view[pos + _HEADER_SIZE : end]
        codec = attributes & _CODEC_MASK
        if codec:
            try:
                body = compression.decompress(codec, bytes(body))
            except compression.CompressionError as exc:
                raise CorruptRecordError(f"record batch at offset {base_offset}: {exc}") from None
        pending.bodies.append(body)
        pending.counts.append(count)
        pending.base_offsets.append(base_offset)
        pending.base_ts.append(base_ts)
        pending.append_ts.append(max_ts if attributes & _LOG_APPEND_TIME else -1)
        pos = end
    out.extend(
        _flush(pending, topic, partition, from_offset, until_offset, include_headers, wanted)
    )
    return out, next_offset


def _flush(
    pending: _Pending,
    topic: str,
    partition: int,
    from_offset: int,
    until_offset: int,
    include_headers: bool,
    wanted: frozenset[str],
) -> Iterator[pa.RecordBatch]:
    """Steps 2-3 for the collected v2 batches."""
    if not pending:
        return
    n, key, value, offsets, timestamps_us, types, spans = records_to_columns(
        pending.bodies,
        pending.counts,
        pending.base_offsets,
        pending.base_ts,
        pending.append_ts,
        from_offset,
        until_offset,
        "key" in wanted,
        "value" in wanted,
        include_headers and "headers" in wanted,
    )
    if n == 0:
        return
    columns: list[pa.Array] = [
        _binary(key, n),
        _binary(value, n),
        _constant_string(topic, n),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(_int32s(partition, n))]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(timestamps_us)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(types)]),
    ]
    if include_headers:
        columns.append(_headers(pending.bodies, n, spans))
    yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _binary(buffers: tuple[Any, Any, Any] | None, n: int) -> pa.Array:
    """A ``binary`` array from (offsets, data, validity or None); all nulls for ``None``."""
    if buffers is None:
        return pa.nulls(n, pa.binary())
    offsets, data, validity = buffers
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [
            None if validity is None else pa.py_buffer(validity),
            pa.py_buffer(offsets),
            pa.py_buffer(data),
        ],
    )


def _int32s(value: int, n: int) -> np.ndarray:
    return np.full(n, value, dtype=np.int32)


def _constant_string(text: str, n: int) -> pa.Array:
    """``n`` times ``text`` (Spark's schema check wants plain ``string``, not a dictionary)."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
    )


def _headers(bodies: list[bytes | memoryview], n: int, spans: Any) -> pa.Array:
    """The ``headers`` column: null for a record without headers (Spark's behaviour).

    ``spans``: int64 rows of (row, body index, position after the header count, record end,
    header count), one per record that has headers (``None``: the column was not wanted)."""
    rows: list[list[dict[str, object]] | None] = [None] * n
    if spans is not None:
        for row, body_index, pos, end, count in (
            np.frombuffer(spans, dtype=np.int64).reshape(-1, 5).tolist()
        ):
            rows[row] = _header_items(bodies[body_index], pos, end, count)
    return pa.array(rows, type=arrow_schema(True).field("headers").type)


def _header_items(
    buf: bytes | memoryview, pos: int, end: int, count: int
) -> list[dict[str, object]]:
    items = []
    try:
        for _ in range(count):
            key_len, pos = decode_varint(buf, pos)
            if key_len < 0 or pos + key_len > end:
                raise CorruptRecordError("bad record header key length")
            key = bytes(buf[pos : pos + key_len]).decode()
            pos += key_len
            value_len, pos = decode_varint(buf, pos)
            if value_len < -1 or pos + value_len > end:
                raise CorruptRecordError("bad record header value length")
            value = None if value_len < 0 else bytes(buf[pos : pos + value_len])
            pos += max(value_len, 0)
            items.append({"key": key, "value": value})
    except (VarintError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"bad record header: {exc}") from None
    if pos != end:
        raise CorruptRecordError("record headers do not match the record's length")
    return items


def _records_to_arrow(
    records: list[Record], topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """The slow path for decoded :class:`Record` tuples (legacy message sets)."""
    n = len(records)
    columns: list[object] = [
        [r.key for r in records],
        [r.value for r in records],
        [topic] * n,
        [partition] * n,
        [r.offset for r in records],
        [r.timestamp_ms * 1000 for r in records],
        [0] * n,
    ]
    if include_headers:
        columns.append([[{"key": k, "value": v} for k, v in r.headers] or None for r in records])
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )
