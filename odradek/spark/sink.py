"""Batch and streaming writes: rows → records through the blocking :class:`odradek.client.Producer`.

The input columns are those of Spark's Kafka sink:

    value    string or binary, required (null: a tombstone)
    key      string or binary, optional (null: no key; the default partitioner is sticky)
    topic    string, required unless the ``topic`` option is given (the option wins)
    partition int, optional (null: the producer's default partitioner)
    headers  array<struct<key string, value binary>>, optional

Other columns are ignored. Every Spark task owns one producer, which batches per partition
(``linger.ms``, ``batch.size``, ``compression.type``, ``acks``; with or without the ``kafka.``
prefix). A task ends only after ``flush()`` and after every delivery future succeeded, so a
finished task means its records are acknowledged (at-least-once: a retried task writes its
rows again). The first failed delivery fails the task with the broker's error.

Rows arrive as Arrow record batches (``DataSourceArrowWriter``) and go to the producer a
producer batch at a time (:meth:`odradek.client.Producer.send_columns`): the record bytes are
encoded from the Arrow buffers in C (the client's ``RecordBuffer.extend``), with no Python
object per row. Per Arrow batch and topic:

1. Each row's partition: the ``partition`` column's value; else, for a row with a key, Kafka's
   default partitioner (murmur2 of the key: the only per-row Python work, for keyed rows
   alone); else none (null key: the sticky partitioner, a producer batch at a time).
2. The rows of each partition, in their order, go to ``send_columns``; so do the rows without
   a partition. Row order within a partition is kept.

Rows with headers (a non-null ``headers`` value in the Arrow batch) take the per-row ``send``
path, one Arrow batch at a time: the column encoder carries no headers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.client import Producer
from odradek.spark.option_values import OdradekOptionError
from odradek.spark.options import WriteOptions
from odradek.spark.schema import HEADERS_TYPE

__all__ = [
    "OdradekBatchWriter",
    "OdradekStreamWriter",
    "WriteResult",
    "check_write_schema",
    "write_batches",
]

log = logging.getLogger("odradek.spark")

_BINARY_OR_STRING = (BinaryType(), StringType())


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """Spark's checks on the columns of a Kafka sink, before any task runs."""
    types = {field.name.lower(): field.dataType for field in schema.fields}

    def bad(column: str, wanted: str, actual: DataType) -> OdradekOptionError:
        return OdradekOptionError(
            column, f"the '{column}' column must be {wanted}, it is {actual.simpleString()}"
        )

    if "value" not in types:
        raise OdradekOptionError("value", "a 'value' column (string or binary) is required")
    if types["value"] not in _BINARY_OR_STRING:
        raise bad("value", "string or binary", types["value"])
    if "key" in types and types["key"] not in _BINARY_OR_STRING:
        raise bad("key", "string or binary", types["key"])
    if options.topic is None and "topic" not in types:
        raise OdradekOptionError("topic", "give the 'topic' option or a 'topic' column (string)")
    if "topic" in types and types["topic"] != StringType():
        raise bad("topic", "a string", types["topic"])
    if "partition" in types and types["partition"] != IntegerType():
        raise bad("partition", "an int", types["partition"])
    if "headers" in types and not _headers_type_ok(types["headers"]):
        raise bad("headers", HEADERS_TYPE.simpleString(), types["headers"])


def _headers_type_ok(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    return fields.get("key") == StringType() and fields.get("value") in _BINARY_OR_STRING


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote."""

    records: int


class _Deliveries:
    """The delivery outcome of every record sent, checked one producer batch at a time.

    The client's record futures share their batch's result and only become real
    ``Future`` objects when touched (~2 µs each). So one future per producer batch is kept
    (recognized by the batch it points to; any other future is kept as it is) and the record
    futures themselves are dropped at once: memory and cost stay per batch, not per record.
    """

    def __init__(self) -> None:
        self._pending: dict[int, tuple[object, Future]] = {}

    def track(self, future: Future) -> None:
        shared = getattr(future, "_batch", future)
        key = id(shared)
        if key not in self._pending:
            self._pending[key] = (shared, future)

    def check(self, *, wait: bool = False) -> None:
        """Raise the first delivery error among the finished (``wait``: all) deliveries."""
        for key, (_, future) in list(self._pending.items()):
            if wait or future.done():
                error = future.exception()
                if error is not None:
                    raise error
                del self._pending[key]


def _bytes_list(column: pa.ChunkedArray | pa.Array | None, n: int) -> list[bytes | None]:
    if column is None:
        return [None] * n
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [None if v is None else v.encode() for v in column.to_pylist()]
    return column.to_pylist()


def _headers_list(column: pa.Array | None, n: int) -> list[list[tuple[str, bytes | None]] | None]:
    if column is None:
        return [None] * n
    rows: list[list[tuple[str, bytes | None]] | None] = []
    for items in column.to_pylist():
        if not items:
            rows.append(None)
            continue
        rows.append(
            [
                (h["key"], h["value"].encode() if isinstance(h["value"], str) else h["value"])
                for h in items
            ]
        )
    return rows


def write_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row of ``batches``; returns the number of records acknowledged."""
    producer = Producer(
        options.bootstrap_servers,
        acks="all" if options.acks == -1 else options.acks,
        linger_ms=options.linger_ms,
        batch_size=options.batch_size,
        compression_type=None if options.compression == "none" else options.compression,
        **dict(options.client_options),
    )
    deliveries = _Deliveries()
    count = 0
    try:
        for batch in batches:
            names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
            headers = names.get("headers")
            if headers is not None and batch.column(headers).null_count < batch.num_rows:
                _send_rows(producer, deliveries, options, batch, names, count)
            else:
                _send_columns(producer, deliveries, options, batch, names, count)
            count += batch.num_rows
            deliveries.check()
        producer.flush()
        deliveries.check(wait=True)
    finally:
        producer.close()
    return count


def _column(batch: pa.RecordBatch, names: dict[str, int], name: str) -> pa.Array | None:
    index = names.get(name)
    return None if index is None else batch.column(index)


def _buffers(array: pa.Array | None) -> tuple[object, object, object, int] | None:
    """An Arrow binary/string array as the client's column tuple (offsets, data, validity,
    array offset); ``None`` when absent or all null."""
    if array is None or array.null_count == len(array):
        return None
    if pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(pa.binary())
    validity, offsets, data = array.buffers()[:3]
    return (offsets, b"" if data is None else data, validity, array.offset)


def _send_columns(
    producer: Producer,
    deliveries: _Deliveries,
    options: WriteOptions,
    batch: pa.RecordBatch,
    names: dict[str, int],
    sent_before: int,
) -> None:
    """Steps 1-2 of the module docstring for one Arrow batch."""
    n = batch.num_rows
    values = _buffers(_column(batch, names, "value"))
    key_array = _column(batch, names, "key")
    keys = _buffers(key_array)
    partition_array = _column(batch, names, "partition")
    topic_array = _column(batch, names, "topic")
    if options.topic is not None or topic_array is None:
        groups = [(options.topic, np.arange(n, dtype=np.int64))]
    else:
        groups = _by_topic(topic_array, sent_before)
    explicit = np.full(n, -1, dtype=np.int64)
    if partition_array is not None and partition_array.null_count < n:
        explicit = partition_array.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    for topic, rows in groups:
        assert topic is not None
        chosen = explicit[rows]
        if keys is not None:
            keyed = np.flatnonzero(
                (chosen < 0) & key_array.is_valid().to_numpy(zero_copy_only=False)[rows]
            )
            if keyed.size:
                chosen[keyed] = _key_partitions(producer, topic, key_array, rows[keyed])
        for partition in np.unique(chosen).tolist():
            these = np.ascontiguousarray(rows[chosen == partition])
            target = None if partition < 0 else partition
            for future in producer.send_columns(topic, target, values, keys, these):
                deliveries.track(future)


def _by_topic(topics: pa.Array, sent_before: int) -> list[tuple[str, np.ndarray]]:
    """The rows of each topic, in order; a null topic fails the task (as Spark's sink)."""
    if topics.null_count:
        row = sent_before + int(
            np.flatnonzero(~topics.is_valid().to_numpy(zero_copy_only=False))[0]
        )
        raise ValueError(
            f"a row has a null 'topic' and no 'topic' option is given (row {row} of this task)"
        )
    encoded = topics.dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    return [
        (name, np.flatnonzero(codes == code).astype(np.int64))
        for code, name in enumerate(encoded.dictionary.to_pylist())
    ]


def _key_partitions(producer: Producer, topic: str, keys: pa.Array, rows: np.ndarray) -> list[int]:
    """Kafka's default partitioner for the keyed rows without a partition."""
    count = len(producer.partitions_for(topic))
    partition = producer._partitioner.partition
    values = keys.take(pa.array(rows)).to_pylist()
    return [partition(topic, k.encode() if isinstance(k, str) else k, count) for k in values]


def _send_rows(
    producer: Producer,
    deliveries: _Deliveries,
    options: WriteOptions,
    batch: pa.RecordBatch,
    names: dict[str, int],
    sent_before: int,
) -> None:
    """One ``send`` per row (rows with headers)."""
    n = batch.num_rows
    values = _bytes_list(_column(batch, names, "value"), n)
    keys = _bytes_list(_column(batch, names, "key"), n)
    topic_column = _column(batch, names, "topic")
    topics = (
        [options.topic] * n
        if options.topic is not None or topic_column is None
        else topic_column.to_pylist()
    )
    partition_column = _column(batch, names, "partition")
    partitions = [None] * n if partition_column is None else partition_column.to_pylist()
    headers = _headers_list(_column(batch, names, "headers"), n)
    send = producer.send
    track = deliveries.track
    for row, (topic, value, key, partition, header) in enumerate(
        zip(topics, values, keys, partitions, headers, strict=True)
    ):
        if topic is None:
            raise ValueError(
                "a row has a null 'topic' and no 'topic' option is given (row "
                f"{sent_before + row} of this task)"
            )
        track(send(topic, value=value, key=key, partition=partition, headers=header))


class OdradekBatchWriter(DataSourceArrowWriter):
    """``df.write.format("odradek").mode("append")``."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return WriteResult(write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("wrote %d records", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.warning("write aborted after %d records were acknowledged (at-least-once)", written)


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("odradek")``: each micro-batch as a batch write."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return WriteResult(write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("micro-batch %d: wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted; acknowledged records stay (at-least-once)", batchId)
