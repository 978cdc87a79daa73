"""The pipelines tests share the data source tests' Spark session and broker (one each per
pytest run; see tests/spark/spark_support.py)."""

from tests.spark.spark_support import spark, spark_broker, topic, wire

__all__ = ["spark", "spark_broker", "topic", "wire"]
