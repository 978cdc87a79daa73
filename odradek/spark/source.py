"""The ``odradek`` data source: batch and streaming reads planned on the driver.

* :class:`OdradekDataSource` is what Spark instantiates (``format("odradek")``): it parses the
  options when a reader or writer is asked for, so a bad option fails the query before any
  task runs, with an error naming the option.
* :class:`OdradekBatchReader` resolves ``startingOffsets`` / ``endingOffsets`` (or timestamps)
  into one offset range per topic-partition and splits them for ``minPartitions``.
* :class:`OdradekStreamReader` keeps offsets as ``{"topic": {"partition": offset}}``, the form
  Spark writes to the checkpoint's offset log; ``maxOffsetsPerTrigger`` reaches
  :meth:`~OdradekStreamReader.latestOffset` as ``ReadMaxRows`` (docs/spark.md), new partitions
  are read from their earliest offset, and ``Trigger.AvailableNow`` stops at the offsets seen
  when the query started.

Readers hold only plain data (options, planned ranges): Spark pickles them to executors, where
:func:`odradek.spark.fetch.read_range` turns each range into Arrow batches.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.spark.fetch import read_range
from odradek.spark.metadata import (
    Cluster,
    batch_ranges,
    bounds,
    discover,
    report_data_loss,
    resolve,
)
from odradek.spark.option_values import OdradekOptionError, TopicPartition, parse_bool
from odradek.spark.options import ReadOptions, WriteOptions
from odradek.spark.planning import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from odradek.spark.schema import read_schema

__all__ = ["OdradekBatchReader", "OdradekDataSource", "OdradekStreamReader"]

log = logging.getLogger("odradek.spark")


def _connect(options: ReadOptions) -> Cluster:
    from odradek.spark.connection import ClientCluster

    return ClientCluster(options.bootstrap_servers, dict(options.client_options))


class OdradekDataSource(DataSource):
    """``spark.read.format("odradek")``, ``readStream``, ``write`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        # Called by ``load()``: bad read options fail there, naming the option, as with
        # Spark's Kafka source (whether the query is batch or streaming is not known yet).
        _refuse_log_dirs(self.options)
        _check_read_options(self.options)
        return read_schema(parse_bool(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        _refuse_log_dirs(self.options)
        options = ReadOptions.parse(self.options, streaming=False)
        _check_schema(schema, options)
        return OdradekBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _refuse_log_dirs(self.options)
        options = ReadOptions.parse(self.options, streaming=True)
        _check_schema(schema, options)
        return OdradekStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.sink import OdradekBatchWriter, check_write_schema

        options = WriteOptions.parse(self.options)
        check_write_schema(schema, options)
        return OdradekBatchWriter(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.sink import OdradekStreamWriter, check_write_schema

        options = WriteOptions.parse(self.options)
        check_write_schema(schema, options)
        return OdradekStreamWriter(options, schema)


def _refuse_log_dirs(options: dict[str, str]) -> None:
    """``log.dirs`` belongs to the JVM file reader, ``format("odradek-files")``: say so."""
    if "log.dirs" in {k.lower() for k in options}:
        raise OdradekOptionError(
            "log.dirs",
            'log directories are read by format("odradek-files"), the JVM reader (put '
            'odradek.spark.jar_path() on spark.jars; docs/spark.md); format("odradek") '
            "reads through a broker",
        )


def _check_read_options(options: dict[str, str]) -> None:
    """Fail on options that are wrong for a batch and for a streaming read alike."""
    try:
        ReadOptions.parse(options, streaming=True)
    except OdradekOptionError as streaming_error:
        try:
            ReadOptions.parse(options, streaming=False)
        except OdradekOptionError as batch_error:
            ending = {k.lower() for k in options} & {
                "endingoffsets",
                "endingtimestamp",
                "endingoffsetsbytimestamp",
            }
            raise (batch_error if ending else streaming_error) from None


def _check_schema(schema: StructType, options: ReadOptions) -> None:
    expected = read_schema(options.include_headers)
    if schema != expected:
        raise OdradekOptionError(
            "schema",
            "the odradek source has a fixed schema (Spark's Kafka source's): "
            f"{expected.simpleString()}; a user-specified schema is not supported",
        )


def _empty_batch() -> Iterator[pa.RecordBatch]:
    return iter(())


class OdradekBatchReader(DataSourceReader):
    """``spark.read.format("odradek")``: one range per topic-partition, split for minPartitions."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        cluster = _connect(options)
        try:
            tps = discover(cluster, options.subscription, strict=True)
            if not tps:
                return []
            ranges = batch_ranges(cluster, options, tps)
        finally:
            cluster.close()
        return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange) or partition.size == 0:
            return _empty_batch()
        return read_range(self.options, partition)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("odradek")``: micro-batches of offset ranges."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._cluster: Cluster | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow

    # The reader object is pickled to executors: the connection stays behind.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state

    def _connection(self) -> Cluster:
        if self._cluster is None:
            self._cluster = _connect(self.options)
        return self._cluster

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(cluster, ...)``, reconnecting once if the connection broke meanwhile."""
        try:
            return fn(self._connection(), *args, **kwargs)
        except (OSError, ConnectionError):
            self.stop()
            return fn(self._connection(), *args, **kwargs)

    def initialOffset(self) -> dict:
        options = self.options
        tps = self._call(discover, options.subscription, strict=True)
        start = self._call(
            resolve, options.starting, tps, no_match=options.starting_by_timestamp_strategy
        )
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._call(discover, self.options.subscription, strict=False)
        _, latest = self._call(bounds, tps)
        self._target = latest

    def _latest(
        self, begin: dict[TopicPartition, int] | None = None
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Current earliest and latest offsets; under AvailableNow, latest is capped at the
        target (a partition the target does not know stays where it is)."""
        tps = self._call(discover, self.options.subscription, strict=False)
        earliest, latest = self._call(bounds, tps)
        if self._target is not None:
            begin = begin or {}
            capped = {}
            for tp, offset in latest.items():
                if tp in self._target:
                    capped[tp] = min(offset, self._target[tp])
                elif tp in begin:
                    capped[tp] = min(offset, begin[tp])
            latest = capped
        return earliest, latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        earliest, latest = self._latest(begin)
        gone = sorted(set(begin) - set(latest))
        if gone:
            report_data_loss(
                self.options.fail_on_data_loss,
                "Partitions " + ", ".join(f"{t}-{p}" for t, p in gone) + " are gone.",
            )
        for tp in sorted(set(latest) - set(begin)):
            log.info("new partition %s-%d: reading it from its earliest offset", *tp)
        # Where each partition really starts: a new partition (and, without failOnDataLoss, one
        # whose start was deleted) at its earliest offset, never past its latest one.
        effective = {
            tp: min(max(begin.get(tp, earliest[tp]), earliest[tp]), latest[tp]) for tp in latest
        }
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(effective, latest, limit.max_rows)
        else:
            end = dict(latest)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        try:
            _, latest = self._latest()
        except Exception:  # a status report never fails the query
            return None
        return offsets_to_json(latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        until = offsets_from_json(end)
        if begin == until:
            return []
        earliest, _ = self._call(bounds, sorted(until))
        fail = self.options.fail_on_data_loss
        ranges = []
        for tp, high in sorted(until.items()):
            low = begin.get(tp)
            if low is None:  # a partition new in this micro-batch
                low = min(earliest.get(tp, 0), high)
            if high < low:
                report_data_loss(fail, f"{tp[0]}-{tp[1]}: offset went back from {low} to {high}.")
                continue
            if tp in earliest and low < earliest[tp] and high > low:
                report_data_loss(
                    fail,
                    f"{tp[0]}-{tp[1]}: offsets {low} to {min(high, earliest[tp])} were deleted.",
                )
                low = min(earliest[tp], high)
            ranges.append(OffsetRange(tp[0], tp[1], low, high))
        return split_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange) or partition.size == 0:
            return _empty_batch()
        return read_range(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            with contextlib.suppress(OSError):
                cluster.close()
