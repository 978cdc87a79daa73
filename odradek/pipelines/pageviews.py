"""Streaming job: page views → views per page per minute, to a topic and to Parquet.

    page-views (JSON, see pipelines.generate)
      → parse; event time = ``ts`` (ms); watermark ``--watermark`` (default 1 minute)
      → tumbling 1-minute windows, count per (window, page), output mode *append*: each
        window is emitted once, when the watermark passes its end
      → topic ``page-view-counts``: key = page, value =
        {"window_start": "...", "window_end": "...", "page": "/home", "views": 42}
      → Parquet under ``--output``, one directory per micro-batch (``batch_id=N``, overwritten
        when Spark replays that batch, so a replay leaves no duplicate files)

Malformed events (not JSON, no ``ts`` or ``page``) are dropped. Offsets and the aggregation
state live in ``--checkpoint``: a restarted job goes on where it stopped.

    python -m odradek.pipelines.pageviews --bootstrap-server 127.0.0.1:9092 \\
        --output /tmp/pv/counts --checkpoint /tmp/pv/checkpoint
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from odradek.pipelines.session import (
    add_spark_arguments,
    cores,
    job_settings,
    overrides_from,
    spark_session,
    topic_partitions,
)

__all__ = ["EVENT_SCHEMA", "count_views", "start"]

EVENT_SCHEMA = StructType(
    [
        StructField("ts", LongType()),
        StructField("user", StringType()),
        StructField("page", StringType()),
        StructField("referrer", StringType()),
    ]
)


def count_views(records: DataFrame, watermark: str = "1 minute") -> DataFrame:
    """Kafka-schema rows of page-view JSON → (window_start, window_end, page, views)."""
    events = (
        records.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.*")
        .where(F.col("ts").isNotNull() & F.col("page").isNotNull())
        .withColumn("event_time", F.timestamp_millis(F.col("ts")))
    )
    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", "1 minute"), F.col("page"))
        .agg(F.count(F.lit(1)).alias("views"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "views",
        )
    )


def _writer(bootstrap: str, sink_topic: str, output: str):
    def write(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            if batch.isEmpty():
                return
            (
                batch.select(
                    F.col("page").alias("key"),
                    F.to_json(
                        F.struct(
                            F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias(
                                "window_start"
                            ),
                            F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias(
                                "window_end"
                            ),
                            "page",
                            "views",
                        )
                    ).alias("value"),
                )
                .write.format("odradek")
                .option("bootstrap.servers", bootstrap)
                .option("topic", sink_topic)
                .mode("append")
                .save()
            )
            batch.write.mode("overwrite").parquet(f"{output}/batch_id={batch_id}")
        finally:
            batch.unpersist()

    return write


def start(
    spark: SparkSession,
    *,
    bootstrap: str,
    output: str,
    checkpoint: str,
    source_topic: str = "page-views",
    sink_topic: str = "page-view-counts",
    starting_offsets: str = "earliest",
    watermark: str = "1 minute",
    max_offsets_per_trigger: int | None = None,
    available_now: bool = False,
    trigger_interval: str = "10 seconds",
) -> StreamingQuery:
    """Start the query (it runs until stopped, or, with ``available_now``, until caught up)."""
    reader = (
        spark.readStream.format("odradek")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source_topic)
        .option("startingOffsets", starting_offsets)
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    counts = count_views(reader.load(), watermark)
    writer = (
        counts.writeStream.queryName("page-view-counts")
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(_writer(bootstrap, sink_topic, output))
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger_interval)
    return writer.start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odradek.pipelines.pageviews",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--source-topic", default="page-views")
    parser.add_argument("--sink-topic", default="page-view-counts")
    parser.add_argument("--output", required=True, help="Parquet output directory")
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--watermark", default="1 minute")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--trigger-interval", default="10 seconds")
    parser.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    add_spark_arguments(parser)
    args = parser.parse_args(argv)
    partitions = topic_partitions(args.bootstrap_server, [args.source_topic])
    settings = job_settings(partitions, cores(args.master), overrides_from(args))
    spark = spark_session("odradek-page-views", args.master, settings)
    query = start(
        spark,
        bootstrap=args.bootstrap_server,
        output=args.output,
        checkpoint=args.checkpoint,
        source_topic=args.source_topic,
        sink_topic=args.sink_topic,
        starting_offsets=args.starting_offsets,
        watermark=args.watermark,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        available_now=args.available_now,
        trigger_interval=args.trigger_interval,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
