"""Spark batch read of the log directories themselves (``format("odradek-files")``, the JVM
reader of odradek/spark/jvm) against Parquet, same session, same rows.

One broker process fills the topics, then stops cleanly (the read needs no broker), and one
local Spark session (``local[2]``, the session of the Spark tests, docs/spark.md) reads:

1. Fill: ``partitions`` one-partition topics with ``read_records`` 100-byte random values in
   all, pre-built 16 KiB batches over the native protocol (``bench.spark._fill``, the broker
   read benchmark's fill), into the shipped config's 1 GiB segments; then the broker stops.
   Every record has a fresh random value (a Parquet copy as large as the segments), built
   batch by batch as it is sent. ``--set distinct_values=false`` cycles 16 distinct batches
   instead: their ~2,300 distinct values repeat and Parquet dictionary-encodes them (its copy
   is a small fraction of the segments' size).
2. The Parquet baseline's file (untimed): the topics read from ``log.dirs`` and written to
   Parquet with every column, so both reads see the same rows and columns.
3. One untimed round (Python worker start-up, JIT, page cache), then ``repeats`` interleaved
   rounds, each timing one Spark action per query and source:

   * ``count + sum(length(value))``: ``count(*), sum(length(value))``, checked against the fill.
   * ``all columns``: an aggregate over every column (``count(*)``, ``sum(length(key))``,
     ``sum(length(value))``, ``sum(length(topic))``, ``sum(partition)``, ``sum(offset)``,
     ``max(timestamp)``, ``sum(timestampType)``), so each one is materialised; checked against
     the Parquet answer.

The file-backed read plans one task per 128 MiB of segment (``maxPartitionBytes``); each task
reads its bytes sequentially and decodes them into Spark column vectors in the JVM
(``RangeReader``); ``count(*)`` prunes every column, so the count query decodes only ``value``.
Rows/s = rows / seconds of the action; medians of the repeats; ratio = log.dirs / Parquet.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Figure, Figures, Stopwatch, interleaved, median
from bench.spark import _NO_PROGRESS_BARS, VALUE_BYTES, _fill
from bench.spark import Params as BrokerParams
from bench.storage import Params as StorageParams
from bench.storage import build_batches
from bench.storage_io import NOW_MS
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "Spark batch read of log.dirs (odradek-files, no broker) against Parquet (rows/s)"
QUERIES = ("count + sum(length(value))", "all columns")

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    read_records: int = 10_000_000
    partitions: int = 4  # one-partition topics
    max_partition_bytes: int = 128 << 20  # the reader's maxPartitionBytes option
    repeats: int = 3
    distinct_values: bool = True  # every value random (false: the repeating 16 batches)

    @classmethod
    def quick(cls) -> Params:
        return cls(read_records=1_000_000)


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    from tests.spark import spark_support

    logs = scratch / "logs"
    broker = BrokerProcess([logs]).start()
    try:
        say(f"filling {params.partitions} topics with {params.read_records:,} records")
        fill = BrokerParams(read_records=params.read_records, partitions=params.partitions)
        if params.distinct_values:
            topics, records = _fill_distinct(broker, fill)
        else:
            topics, records = _fill(broker, fill)
    finally:
        broker.stop()
    say(f"{sum(f.stat().st_size for f in logs.rglob('*.log')) / 1e9:.2f} GB of segments")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", _NO_PROGRESS_BARS)
    spark = spark_support._spark()
    try:
        bench = _FilesBench(spark, logs, topics, records, params)
        say("copying the records to Parquet (the baseline), every column")
        parquet = bench.copy_to_parquet(scratch / "read.parquet")
        runs = {}
        for query in QUERIES:
            runs[f"files {query}"] = lambda q=query: bench.time(bench.files(), q)
            runs[f"parquet {query}"] = lambda q=query: bench.time(bench.parquet(parquet), q)
        say(f"1 untimed round, then {params.repeats} interleaved rounds")
        samples = interleaved(runs, params.repeats, warmup=1)
    finally:
        spark_support._shared.pop("spark").stop()
    return _figures(params, records, samples)


def _fill_distinct(broker: BrokerProcess, params: BrokerParams) -> tuple[list[str], int]:
    """``bench.spark._fill``'s topics and batch size, but every value drawn afresh."""
    import random

    from bench.fetch import produce_batches
    from odradek.protocol.batch_builder import encode_batch
    from tests.broker.wire import Wire

    _, per_batch = build_batches(StorageParams(value_bytes=VALUE_BYTES))
    per_topic = -(-params.read_records // (per_batch * params.partitions))
    rng = random.Random(1)
    topics = [f"spark-read-{i}" for i in range(params.partitions)]
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        for topic in topics:
            wire.create_topic(topic, partitions=1)
            for first in range(0, per_topic, 64):
                batches = [
                    encode_batch(_records(rng, per_batch))
                    for _ in range(min(64, per_topic - first))
                ]
                produce_batches(wire, topic, batches, len(batches), pipeline=8)
    return topics, per_topic * per_batch * params.partitions


def _records(rng: Any, count: int) -> list[tuple[None, bytes, int]]:
    blob = rng.randbytes(VALUE_BYTES * count)
    return [(None, blob[i * VALUE_BYTES : (i + 1) * VALUE_BYTES], NOW_MS) for i in range(count)]


def _figures(params: Params, records: int, samples: dict[str, list[float]]) -> list[Figure]:
    figures = Figures()
    for query in QUERIES:
        base = [records / s for s in samples[f"parquet {query}"]]
        mine = [records / s for s in samples[f"files {query}"]]
        baseline = f"Parquet read, {query}"
        figures.add(baseline, median(base), "rows/s", samples=base, is_baseline=True)
        figures.add(
            f"odradek-files read, {query}",
            median(mine),
            "rows/s",
            baseline=baseline,
            samples=mine,
            note=f"{records:,} x {VALUE_BYTES} B, {params.partitions} partitions, stopped broker"
            + (", every value distinct" if params.distinct_values else ", ~2,300 distinct values"),
        )
    return figures.items


@dataclass
class _FilesBench:
    spark: Any
    logs: Path
    topics: list[str]
    records: int
    params: Params
    _answers: dict[str, tuple[Any, ...]] | None = None

    def files(self) -> Any:
        return (
            self.spark.read.format("odradek-files")
            .option("log.dirs", str(self.logs))
            .option("subscribe", ",".join(self.topics))
            .option("maxPartitionBytes", str(self.params.max_partition_bytes))
            .load()
        )

    def parquet(self, path: Path) -> Any:
        return self.spark.read.parquet(str(path))

    def copy_to_parquet(self, path: Path) -> Path:
        self.files().write.parquet(str(path))
        self._answers = {q: self._answer(self.parquet(path), q) for q in QUERIES}
        return path

    def _answer(self, df: Any, query: str) -> tuple[Any, ...]:
        from pyspark.sql import functions as F

        if query == QUERIES[0]:
            columns = [F.count("*"), F.sum(F.length("value"))]
        else:
            columns = [
                F.count("*"),
                F.sum(F.length("key")),
                F.sum(F.length("value")),
                F.sum(F.length("topic")),
                F.sum("partition"),
                F.sum("offset"),
                F.max("timestamp"),
                F.sum("timestampType"),
            ]
        return tuple(df.select(*columns).collect()[0])

    def time(self, df: Any, query: str) -> float:
        """Seconds of one action; its answer must be the Parquet copy's (and the fill's)."""
        with Stopwatch() as watch:
            answer = self._answer(df, query)
        assert self._answers is not None
        if answer != self._answers[query] or answer[0] != self.records:
            raise RuntimeError(f"{query}: got {answer}, expected {self._answers[query]}")
        if query == QUERIES[0] and answer[1] != self.records * VALUE_BYTES:
            raise RuntimeError(
                f"{query}: {answer[1]} value bytes, expected {self.records * VALUE_BYTES}"
            )
        return watch.seconds
