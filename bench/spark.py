"""Spark batch read and write through the ``odradek`` data source, against Parquet.

One broker process and one local Spark session (``local[2]``, shuffle partitions 2, UI off,
workers on this interpreter: the session of the Spark tests, docs/spark.md):

1. Fill: ``partitions`` topics of one partition each (``spark-read-<i>``) with ``read_records``
   100-byte random values in all, a fresh random value for every record, as events are
   (``bench.spark_files._fill_distinct``): the Parquet copy is as large as the segments. The
   read subscribes to all of them, so Spark plans one task per topic-partition and reads in
   parallel. ``--set distinct_values=false`` fills with pre-built 16 KiB batches cycling
   through 16 distinct ones instead (:func:`bench.fetch.fill_partition`): Parquet then
   dictionary-encodes the ~2,300 distinct values of its copy, and its count query reads about
   a byte a row where a Kafka-format reader reads all 100 (bench/README.md "spark").
2. Warm-up (untimed): every operation below once on ``warmup_records`` rows, so Python worker
   start-up (~10 s for the first query of a session) and JIT land outside the figures.
3. The read baseline's file (untimed): the topics read through ``odradek`` and written to
   Parquet, so both reads see the same rows and columns.
4. Interleaved, ``repeats`` rounds, each timing one Spark action. Two read queries:
   ``count`` = ``count(*), sum(length(value))`` (every value is materialised) and ``all`` =
   a sum or max over every column (all seven are materialised); each checked against the fill
   (``count``) or against the Parquet copy's answer (``all``):

   * ``odradek batch read``: ``spark.read.format("odradek")`` of the topics.
   * ``Parquet read`` (baseline): the same query on the Parquet copy.
   * ``Python data source ceiling``: the same query on ``bench.spark_ceiling``, a Python data
     source that yields pre-built Arrow batches of the same schema and row count (no fetch,
     no decode): what Spark's Python Data Source path costs by itself.
   * ``odradek-files read``: the same query through ``format("odradek-files")``, the JVM
     reader of the log directories (odradek/spark/jvm), reading the running broker's
     ``log.dirs`` (the topics are complete: nothing is appended during the reads).
   * ``odradek-jvm read``: the same query through ``format("odradek-jvm")``, the JVM reader
     that fetches the topics from the running broker over Kafka's wire protocol
     (odradek/spark/jvm/src/odradek/broker): the broker-backed read with no Python in the
     data path.
   * ``odradek batch write``: ``write_records`` generated rows (``value`` = 100 random
     alphanumeric bytes, ``randstr``; ``write_partitions`` Spark tasks) with
     ``df.write.format("odradek").mode("append")`` into a new topic of ``partitions``
     partitions, ``acks`` as given; checked by the topic's end offsets, then deleted.
   * ``Parquet write`` (baseline): the same DataFrame written to a new Parquet directory
     (snappy, Spark's default), then deleted.

Rows/s = rows / seconds of the action; medians of the repeats; ratio = odradek / Parquet
(and ceiling / Parquet).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import Figure, Figures, Stopwatch, interleaved, median
from bench.fetch import Params as FetchParams
from bench.fetch import fill_partition
from bench.storage import Params as StorageParams
from bench.storage import build_batches
from odradek.protocol import messages as m
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "Spark batch read and write through format('odradek') against Parquet (rows/s)"
VALUE_BYTES = 100  # the fill's values (bench.storage's default) and the written ones
_NO_PROGRESS_BARS = "--conf spark.ui.showConsoleProgress=false pyspark-shell"
_LATEST = -1  # ListOffsets timestamp for the log end offset
QUERIES = ("count", "all")  # count(*) + sum(length(value)); every column

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    read_records: int = 10_000_000
    write_records: int = 10_000_000
    partitions: int = 4  # topic-partitions read (and of each written topic)
    write_partitions: int = 4  # Spark tasks of the written DataFrame
    acks: str = "1"
    repeats: int = 3
    warmup_records: int = 200_000
    distinct_values: bool = True  # every value random (false: 16 pre-built batches, cycled)

    @classmethod
    def quick(cls) -> Params:
        return cls(read_records=1_000_000, write_records=1_000_000, warmup_records=100_000)


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    from pyspark.sql import functions as F

    from tests.spark import spark_support

    # The fill's batches carry a fixed old timestamp (bench.storage): without this, the first
    # retention check (5 minutes in) deletes them in the middle of the run.
    broker = BrokerProcess([scratch / "logs"], overrides=["log.retention.ms=-1"]).start()
    try:
        say(f"filling {params.partitions} topics with {params.read_records:,} records")
        if params.distinct_values:
            from bench.spark_files import _fill_distinct

            read_topics, records = _fill_distinct(broker, params)
        else:
            read_topics, records = _fill(broker, params)
        say("starting Spark (local[2])")
        # No console progress bars (read when the JVM starts) between the runner's lines.
        os.environ.setdefault("PYSPARK_SUBMIT_ARGS", _NO_PROGRESS_BARS)
        spark = spark_support._spark()
        from bench.spark_ceiling import CeilingSource

        spark.dataSource.register(CeilingSource)
        try:
            bench = _SparkBench(spark, F, broker, scratch, params)
            say(f"warm-up: every operation on {params.warmup_records:,} rows")
            bench.warm_up()
            say(f"copying the {records:,} records read to Parquet (the read baseline)")
            read_pq = bench.copy_to_parquet(read_topics, records)
            say(f"{params.repeats} interleaved rounds")
            runs: dict[str, Callable[[], float]] = {}
            for query in QUERIES:
                runs[f"odradek read {query}"] = partial(
                    bench.read_odradek, read_topics, records, query
                )
                runs[f"parquet read {query}"] = partial(bench.read_parquet, read_pq, records, query)
                runs[f"ceiling read {query}"] = partial(bench.read_ceiling, records, query)
                runs[f"files read {query}"] = partial(bench.read_files, read_topics, records, query)
                runs[f"jvm read {query}"] = partial(bench.read_jvm, read_topics, records, query)
            runs["odradek write"] = lambda: bench.write_odradek(params.write_records)
            runs["parquet write"] = lambda: bench.write_parquet(params.write_records)
            samples = interleaved(runs, params.repeats)
        finally:
            spark_support._shared.pop("spark").stop()
    finally:
        broker.stop()
    return _figures(params, records, samples)


def _fill(broker: BrokerProcess, params: Params) -> tuple[list[str], int]:
    """Fill ``partitions`` one-partition topics; returns their names and the record count."""
    batches, per_batch = build_batches(StorageParams(value_bytes=VALUE_BYTES))
    batches_per_topic = -(-params.read_records // (per_batch * params.partitions))
    fill = FetchParams(data_bytes=batches_per_topic * len(batches[0]))
    topics = [f"spark-read-{i}" for i in range(params.partitions)]
    records = sum(fill_partition(broker.port, topic, fill) for topic in topics)  # type: ignore[arg-type]
    return topics, records


def _figures(params: Params, records: int, samples: dict[str, list[float]]) -> list[Figure]:
    """Rows/s per repeat, medians; each odradek figure against its Parquet baseline."""
    figures = Figures()
    what_read = f"{records:,} x {VALUE_BYTES} B from {params.partitions} topic-partitions"
    queries = {"count": "count + sum(length(value))", "all": "every column"}
    for query in QUERIES:
        base = [records / s for s in samples[f"parquet read {query}"]]
        baseline = f"Parquet read, {query}"
        figures.add(baseline, median(base), "rows/s", samples=base, is_baseline=True)
        labels = (
            ("odradek", "odradek batch read"),
            ("ceiling", "ceiling read"),
            ("files", "odradek-files read"),
            ("jvm", "odradek-jvm read"),
        )
        for name, label in labels:
            mine = [records / s for s in samples[f"{name} read {query}"]]
            figures.add(
                f"{label}, {query}",
                median(mine),
                "rows/s",
                baseline=baseline,
                samples=mine,
                note=f"{what_read}, {queries[query]}",
            )
    rows = params.write_records
    base = [rows / s for s in samples["parquet write"]]
    figures.add("Parquet write", median(base), "rows/s", samples=base, is_baseline=True)
    mine = [rows / s for s in samples["odradek write"]]
    figures.add(
        "odradek batch write",
        median(mine),
        "rows/s",
        baseline="Parquet write",
        samples=mine,
        note=f"{rows:,} x {VALUE_BYTES} B in {params.write_partitions} tasks to "
        f"{params.partitions} partitions, acks={params.acks}",
    )
    return figures.items


@dataclass
class _SparkBench:
    """The timed Spark actions; each returns its seconds and checks what it did."""

    spark: Any
    F: Any  # pyspark.sql.functions
    broker: BrokerProcess
    scratch: Path
    params: Params
    _written: int = 0  # topics / directories written so far (unique names)
    _last_topic: str = ""
    _answers: dict[str, tuple] = field(default_factory=dict)  # query -> Parquet's answer

    # -- reads ----------------------------------------------------------------------------

    def _odradek_df(self, topics: list[str]) -> Any:
        return (
            self.spark.read.format("odradek")
            .option("bootstrap.servers", self.broker.bootstrap)
            .option("subscribe", ",".join(topics))
            .load()
        )

    def _query(self, df: Any, rows: int, query: str, check: str | None) -> float:
        """Seconds of one query; ``check``: the name of the answer it must give (``None``:
        only the row count and value bytes are checked, as the ceiling's data differs)."""
        F = self.F
        if query == "count":
            columns = [F.count("*"), F.sum(F.length("value"))]
        else:
            columns = [
                F.count("*"),
                F.sum(F.length("value")),
                F.sum(F.length("key")),
                F.sum(F.length("topic")),
                F.sum("partition"),
                F.sum("offset"),
                F.max("timestamp"),
                F.sum("timestampType"),
            ]
        with Stopwatch() as watch:
            answer = tuple(df.select(*columns).collect()[0])
        if answer[:2] != (rows, rows * VALUE_BYTES):
            raise RuntimeError(f"{query}: read {answer[:2]}; expected {rows} rows")
        if check is not None:
            expected = self._answers.setdefault(check, answer)
            if answer != expected:
                raise RuntimeError(f"{query}: {answer} != {expected}")
        return watch.seconds

    def read_odradek(self, topics: list[str], rows: int, query: str = "count") -> float:
        return self._query(self._odradek_df(topics), rows, query, query)

    def read_parquet(self, path: Path, rows: int, query: str = "count") -> float:
        return self._query(self.spark.read.parquet(str(path)), rows, query, query)

    def _files_df(self, topics: list[str]) -> Any:
        return (
            self.spark.read.format("odradek-files")
            .option("log.dirs", str(self.scratch / "logs"))
            .option("subscribe", ",".join(topics))
            .load()
        )

    def read_files(self, topics: list[str], rows: int, query: str = "count") -> float:
        return self._query(self._files_df(topics), rows, query, query)

    def _jvm_df(self, topics: list[str]) -> Any:
        return (
            self.spark.read.format("odradek-jvm")
            .option("kafka.bootstrap.servers", self.broker.bootstrap)
            .option("subscribe", ",".join(topics))
            .load()
        )

    def read_jvm(self, topics: list[str], rows: int, query: str = "count") -> float:
        return self._query(self._jvm_df(topics), rows, query, query)

    def read_ceiling(self, rows: int, query: str = "count") -> float:
        df = (
            self.spark.read.format("odradek-ceiling")
            .option("rows", str(rows))
            .option("tasks", str(self.params.partitions))
            .load()
        )
        return self._query(df, rows, query, None)

    def copy_to_parquet(self, topics: list[str], rows: int) -> Path:
        path = self.scratch / "read.parquet"
        self._odradek_df(topics).write.parquet(str(path))
        for query in QUERIES:
            self.read_parquet(path, rows, query)  # checks the copy, keeps the answers
        return path

    # -- writes ---------------------------------------------------------------------------

    def _generated(self, rows: int) -> Any:
        F = self.F
        value = F.randstr(F.lit(VALUE_BYTES), F.lit(7)).cast("binary").alias("value")
        return self.spark.range(0, rows, 1, self.params.write_partitions).select(value)

    def _next_name(self, prefix: str) -> str:
        self._written += 1
        return f"{prefix}-{self._written}"

    def write_odradek(self, rows: int, *, keep: bool = False) -> float:
        """Seconds to write ``rows`` generated rows into a new topic (deleted unless ``keep``)."""
        topic = self._last_topic = self._next_name("spark-write")
        partitions = self.params.partitions
        with Wire(self.broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic(topic, partitions=partitions)
            writer = (
                self._generated(rows)
                .write.format("odradek")
                .option("bootstrap.servers", self.broker.bootstrap)
                .option("topic", topic)
                .option("acks", self.params.acks)
                .mode("append")
            )
            with Stopwatch() as watch:
                writer.save()
            written = sum(wire.list_offset(topic, p, _LATEST).offset for p in range(partitions))
            if written != rows:
                raise RuntimeError(f"{topic} holds {written} records; expected {rows}")
            if not keep:
                _delete_topic(wire, topic)
        return watch.seconds

    def write_parquet(self, rows: int, *, path: Path | None = None) -> float:
        """Seconds to write ``rows`` generated rows to a new Parquet directory (deleted unless
        ``path`` is given)."""
        keep = path is not None
        path = path or self.scratch / f"{self._next_name('write')}.parquet"
        writer = self._generated(rows).write.mode("error")
        with Stopwatch() as watch:
            writer.parquet(str(path))
        if not any(path.glob("*.parquet")):
            raise RuntimeError(f"no Parquet file in {path}")
        if not keep:
            shutil.rmtree(path)
        return watch.seconds

    def warm_up(self) -> None:
        """Each operation once on ``warmup_records`` rows (written data is read back)."""
        rows = self.params.warmup_records
        self.write_odradek(rows, keep=True)
        for query in QUERIES:
            self._query(self._odradek_df([self._last_topic]), rows, query, None)
            self.read_ceiling(rows, query)
            self._query(self._files_df([self._last_topic]), rows, query, None)
            self._query(self._jvm_df([self._last_topic]), rows, query, None)
        path = self.scratch / "warm-up.parquet"
        self.write_parquet(rows, path=path)
        # (value only: the "all" query is warmed on the read baseline's copy, when it is made)
        self._query(self.spark.read.parquet(str(path)), rows, "count", None)
        shutil.rmtree(path)


def _delete_topic(wire: Wire, topic: str) -> None:
    response = wire.call(m.DeleteTopicsRequest(correlation_id=0, topic_names=[topic]))
    if response.topics[0].error_code:
        raise RuntimeError(f"deleting {topic}: error {response.topics[0].error_code}")
