"""Batch job: export a topic (an offset range or a time range) to Parquet partitioned by date.

    odradek topic ──(batch read, odradek source)──▶ <output>/date=YYYY-MM-DD/part-*.parquet

Columns: the Kafka source's (``key``, ``value``, ``topic``, ``partition``, ``offset``,
``timestamp``, ``timestampType``, ``headers`` with ``--include-headers``) plus the partition
column ``date`` (the record timestamp's UTC date). The range is either offsets
(``--starting-offsets`` / ``--ending-offsets``: ``earliest``, ``latest`` or the source's JSON
``{"topic":{"0":23}}``) or times (``--start-ms`` / ``--end-ms``: the first offset whose
timestamp is at or after each, per partition). Re-running an export over the same output
replaces the dates it writes and keeps the others (dynamic partition overwrite); with
``--mode append`` it adds files instead.

    python -m odradek.pipelines.export --bootstrap-server 127.0.0.1:9092 --topic page-views \\
        --output /tmp/page-views-export --start-ms 1700000000000
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from odradek.pipelines.session import (
    add_spark_arguments,
    cores,
    job_settings,
    overrides_from,
    spark_session,
    topic_partitions,
)

__all__ = ["export", "read_topic"]


def read_topic(
    spark: SparkSession,
    *,
    bootstrap: str,
    topic: str,
    starting_offsets: str = "earliest",
    ending_offsets: str = "latest",
    start_ms: int | None = None,
    end_ms: int | None = None,
    include_headers: bool = False,
    min_partitions: int | None = None,
) -> DataFrame:
    """The records of the range, with a ``date`` column."""
    reader = (
        spark.read.format("odradek")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
        .option("endingOffsets", ending_offsets)
        .option("includeHeaders", str(include_headers).lower())
    )
    if start_ms is not None:
        reader = reader.option("startingTimestamp", str(start_ms))
    if end_ms is not None:
        reader = reader.option("endingTimestamp", str(end_ms))
    if min_partitions is not None:
        reader = reader.option("minPartitions", str(min_partitions))
    records = reader.load()
    return records.withColumn("date", F.to_date(F.col("timestamp")))


def export(records: DataFrame, output: str, *, mode: str = "overwrite") -> None:
    """Write ``records`` under ``output``, one directory per date."""
    spark = records.sparkSession
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    records.write.mode(mode).partitionBy("date").parquet(output)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odradek.pipelines.export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--ending-offsets", default="latest")
    parser.add_argument("--start-ms", type=int, default=None, help="first record time (ms)")
    parser.add_argument("--end-ms", type=int, default=None, help="records before this time (ms)")
    parser.add_argument("--include-headers", action="store_true")
    parser.add_argument("--min-partitions", type=int, default=None)
    parser.add_argument("--mode", choices=("overwrite", "append"), default="overwrite")
    add_spark_arguments(parser)
    args = parser.parse_args(argv)
    partitions = topic_partitions(args.bootstrap_server, [args.topic])
    settings = job_settings(partitions, cores(args.master), overrides_from(args))
    spark = spark_session("odradek-export", args.master, settings)
    records = read_topic(
        spark,
        bootstrap=args.bootstrap_server,
        topic=args.topic,
        starting_offsets=args.starting_offsets,
        ending_offsets=args.ending_offsets,
        start_ms=args.start_ms,
        end_ms=args.end_ms,
        include_headers=args.include_headers,
        min_partitions=args.min_partitions,
    )
    records = records.cache()
    export(records, args.output, mode=args.mode)
    print(f"exported {records.count()} records of {args.topic} to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
