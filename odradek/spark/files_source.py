"""``format("odradek").option("log.dirs", ...)``: a batch read of the log directories, no broker.

:class:`FilesBatchReader` is what :meth:`OdradekDataSource.reader` returns when the
``log.dirs`` option is given. It takes the broker-backed reader's options and rules
(:class:`~odradek.spark.options.ReadOptions`; ``discover`` / ``bounds`` / ``resolve`` of
:mod:`odradek.spark.metadata` over :class:`~odradek.spark.files_layout.LogDirs`;
``split_ranges`` for ``minPartitions``), plus:

- ``log.dirs``: comma-separated roots (Kafka's ``log.dirs``); each must be a directory.
- ``maxPartitionBytes``: a task reads at most about this many bytes of one segment
  (default 128 MiB, Spark's ``spark.sql.files.maxPartitionBytes``).
- ``isolation.level`` (or ``kafka.isolation.level``): ``read_committed`` (default) leaves out
  the batches of aborted transactions listed in ``.txnindex`` files; ``read_uncommitted``
  keeps them. Control batches are never rows.

``bootstrap.servers`` together with ``log.dirs`` is refused (one source or the other), as are
streaming reads and writes of ``log.dirs`` (the files are read as they are at planning time).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from odradek.spark.files_layout import LogDirs
from odradek.spark.files_plan import DEFAULT_MAX_PARTITION_BYTES, FileRange, plan_file_ranges
from odradek.spark.files_read import read_file_range
from odradek.spark.metadata import batch_ranges, discover
from odradek.spark.options import OdradekOptionError, ReadOptions, _get, _parse_int
from odradek.spark.planning import split_ranges

__all__ = ["FilesBatchReader", "FilesOptions", "has_log_dirs"]

LOG_DIRS = "log.dirs"


def has_log_dirs(options: Mapping[str, str]) -> bool:
    return _get(options, LOG_DIRS) is not None


@dataclass(frozen=True)
class FilesOptions:
    read: ReadOptions
    log_dirs: tuple[str, ...]
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    read_committed: bool = True

    @staticmethod
    def parse(options: Mapping[str, str]) -> FilesOptions:
        raw = _get(options, LOG_DIRS) or ""
        roots = tuple(dict.fromkeys(r.strip() for r in raw.split(",") if r.strip()))
        if not roots:
            raise OdradekOptionError(LOG_DIRS, f"no directory in {raw!r}")
        for name in ("bootstrap.servers", "kafka.bootstrap.servers"):
            if _get(options, name) is not None:
                raise OdradekOptionError(
                    LOG_DIRS, f"reads the files without a broker; do not give '{name}' with it"
                )
        isolation = _get(options, "isolation.level") or _get(options, "kafka.isolation.level")
        isolation = (isolation or "read_committed").strip().lower()
        if isolation not in ("read_committed", "read_uncommitted"):
            raise OdradekOptionError(
                "isolation.level", f"expected read_committed or read_uncommitted, got {isolation!r}"
            )
        max_bytes = _parse_int(options, "maxPartitionBytes", minimum=1)
        return FilesOptions(
            read=ReadOptions.parse(options, streaming=False),
            log_dirs=roots,
            max_partition_bytes=max_bytes or DEFAULT_MAX_PARTITION_BYTES,
            read_committed=isolation == "read_committed",
        )


class FilesBatchReader(DataSourceReader):
    """Plans on the driver from the files; each task reads one :class:`FileRange`."""

    def __init__(self, options: FilesOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        files = self.options
        options = files.read
        dirs = LogDirs(files.log_dirs)
        tps = discover(dirs, options.subscription, strict=True)
        for tp in tps:
            dirs.partition_log(tp)  # a missing partition directory fails here, naming log.dirs
        if not tps:
            return []
        ranges = batch_ranges(dirs, options, tps)
        tasks: list[FileRange] = []
        splits = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
        for offset_range in splits:
            plog = dirs.partition_log(offset_range.topic_partition)
            tasks.extend(plan_file_ranges(plog, offset_range, files.max_partition_bytes))
        if not files.read_committed:
            tasks = [_keep_aborted(t) for t in tasks]
        return tasks

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FileRange):
            return iter(())
        options = self.options.read
        return read_file_range(
            partition,
            include_headers=options.include_headers,
            chunk_bytes=options.fetch_max_bytes,
            fail_on_data_loss=options.fail_on_data_loss,
        )


def _keep_aborted(task: FileRange) -> FileRange:
    from dataclasses import replace

    return replace(task, aborted=())
