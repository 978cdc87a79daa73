"""A Python data source that does no work: the ceiling of Spark's Python Data Source path.

``spark.read.format("odradek-ceiling").option("rows", N).option("tasks", T).load()`` yields, in
each of ``T`` tasks, the same pre-built Arrow batch (the ``odradek`` schema, 100-byte values,
null keys, ``batch_rows`` rows) until the task's share of ``N`` rows is out. Nothing is fetched
or decoded, so a query over it measures what Spark itself spends to move Arrow batches from
Python workers into the JVM and turn them into rows — the part of the ``odradek`` read no
decoder can remove (bench/README.md, ``spark``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from odradek.spark.schema import read_schema

__all__ = ["CeilingSource"]


class CeilingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek-ceiling"

    def schema(self) -> StructType:
        return read_schema(False)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(
            int(self.options["rows"]),
            int(self.options.get("tasks", "4")),
            int(self.options.get("batch_rows", "20000")),
        )


class _Reader(DataSourceReader):
    def __init__(self, rows: int, tasks: int, batch_rows: int) -> None:
        self.rows, self.tasks, self.batch_rows = rows, tasks, batch_rows

    def partitions(self) -> list[InputPartition]:
        share = [self.rows // self.tasks + (i < self.rows % self.tasks) for i in range(self.tasks)]
        return [InputPartition(n) for n in share]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import numpy as np

        from odradek.spark.decode import _constant_string
        from odradek.spark.schema import arrow_schema

        total = partition.value
        n = min(self.batch_rows, total)
        if n == 0:
            return
        values = pa.Array.from_buffers(
            pa.binary(),
            n,
            [
                None,
                pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 100),
                pa.py_buffer(b"v" * 100 * n),
            ],
        )
        batch = pa.RecordBatch.from_arrays(
            [
                pa.nulls(n, pa.binary()),
                values,
                _constant_string("spark-read-0", n),
                pa.array(np.zeros(n, dtype=np.int32)),
                pa.array(np.arange(n, dtype=np.int64)),
                pa.array(np.zeros(n, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(n, dtype=np.int32)),
            ],
            schema=arrow_schema(False),
        )
        left = total
        while left >= n:
            yield batch
            left -= n
        if left:
            yield batch.slice(0, left)
