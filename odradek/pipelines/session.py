"""The Spark session the jobs run in, with the odradek data source registered.

Executors start ``PYSPARK_PYTHON`` (default ``python3`` on ``PATH``); it is pointed at this
interpreter (``sys.executable``) unless already set, so workers import the same packages as
the driver (docs/spark.md). Under ``spark-submit`` the session already exists and is reused.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

import odradek.spark

__all__ = ["spark_session"]


def spark_session(app_name: str, master: str | None = None) -> SparkSession:
    """The active session (``spark-submit``) or a new local one; ``odradek`` registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).config("spark.sql.session.timeZone", "UTC")
    if master is not None:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: run locally
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]"))
    spark = builder.getOrCreate()
    odradek.spark.register(spark)
    return spark
