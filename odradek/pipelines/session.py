"""The Spark session the jobs run in: settings sized to the data, ``odradek`` registered once.

Executors start ``PYSPARK_PYTHON`` (default ``python3`` on ``PATH``); it is pointed at this
interpreter (``sys.executable``) unless already set, so workers import the same packages as
the driver (docs/spark.md). Under ``spark-submit`` the session already exists and is reused.

Settings (:func:`job_settings`), each overridable with ``--conf KEY=VALUE`` on the jobs'
command lines (``--shuffle-partitions N`` is short for ``spark.sql.shuffle.partitions``):

* ``spark.sql.shuffle.partitions``: Spark's default, 200, makes a job over a few thousand
  records run 200 tiny tasks per shuffle (for a streaming aggregation, per micro-batch, and the
  number is then fixed in the checkpoint). The jobs use the number of topic-partitions they
  read, at least 1 and at most 4 tasks per core: the data arrives partitioned that way.
* ``spark.sql.adaptive.enabled`` and ``...coalescePartitions.enabled``: on (Spark's default
  since 3.2, set so a cluster default cannot turn it off): batch shuffles are coalesced to
  what the data needs. Spark does not apply AQE to streaming queries; there the shuffle
  partitions above are what counts.
* ``spark.sql.session.timeZone`` = UTC (event times and export dates are UTC).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession

import odradek.spark
from odradek.client import Admin, KafkaError

__all__ = [
    "add_spark_arguments",
    "cores",
    "job_settings",
    "overrides_from",
    "spark_session",
    "topic_partitions",
]

TASKS_PER_CORE_MAX = 4


def topic_partitions(bootstrap: str, topics: Sequence[str]) -> int:
    """How many partitions ``topics`` have together (0 when they cannot be described: the
    query then fails on its own, naming the topic)."""
    try:
        with Admin(bootstrap) as admin:
            described = admin.describe_topics(list(topics))
    except (KafkaError, OSError):
        return 0
    return sum(len(t.partitions) for t in described)


def job_settings(partitions: int, cores: int, overrides: Mapping[str, str]) -> dict[str, str]:
    """The settings above for a job reading ``partitions`` topic-partitions on ``cores``."""
    shuffle = min(max(partitions, 1), TASKS_PER_CORE_MAX * max(cores, 1))
    settings = {
        "spark.sql.shuffle.partitions": str(shuffle),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    settings.update(overrides)
    return settings


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", default=None, help="default: local[*] (or spark-submit's)")
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=None,
        help="spark.sql.shuffle.partitions (default: the topic-partitions read, at most "
        f"{TASKS_PER_CORE_MAX} per core)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any Spark setting (repeatable); wins over the job's defaults",
    )


def overrides_from(args: argparse.Namespace) -> dict[str, str]:
    """``--conf`` and ``--shuffle-partitions`` as settings (``--conf`` wins)."""
    result = {}
    if args.shuffle_partitions is not None:
        result["spark.sql.shuffle.partitions"] = str(args.shuffle_partitions)
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--conf {item!r}: expected KEY=VALUE")
        result[key.strip()] = value.strip()
    return result


def spark_session(
    app_name: str, master: str | None = None, settings: Mapping[str, str] | None = None
) -> SparkSession:
    """The active session (``spark-submit``) or a new local one, with ``settings`` applied
    (at build time, and again at run time for a session that already existed) and
    ``odradek`` registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = dict(settings or {"spark.sql.session.timeZone": "UTC"})
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    if master is not None:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: run locally
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]"))
    spark = builder.getOrCreate()
    for key, value in settings.items():
        if key.startswith("spark.sql."):  # runtime settings of a session that existed
            spark.conf.set(key, value)
    odradek.spark.register(spark)
    return spark


def cores(master: str | None) -> int:
    """Cores of a ``local[N]`` / ``local[*]`` master (this machine's for anything else)."""
    spec = master or os.environ.get("SPARK_MASTER", "local[*]")
    if spec.startswith("local[") and spec[6:-1].isdigit():
        return int(spec[6:-1])
    return os.cpu_count() or 1
