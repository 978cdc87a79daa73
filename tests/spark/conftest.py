"""Fixtures of the Spark data source tests: one Spark session and one broker per pytest run."""

from tests.spark.spark_support import spark, spark_broker, topic, wire

__all__ = ["spark", "spark_broker", "topic", "wire"]
