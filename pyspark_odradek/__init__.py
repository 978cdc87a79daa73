"""``pyspark_odradek``: a PySpark Python Data Source for odradek topics, format ``"odradek"``.

It mirrors Spark's built-in Kafka source (same schema, options and checkpoint offsets), for
batch and streaming reads and writes::

    import pyspark_odradek
    pyspark_odradek.register(spark)
    df = (spark.read.format("odradek")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "page-views")
          .load())

Installed in the Python environment the Spark workers use (``pip install odradek[spark]``),
the package is also found by PySpark's automatic lookup of Python data sources (a top-level
module named ``pyspark_*`` exposing ``DefaultSource``), so ``format("odradek")`` works without
the ``register`` call. See docs/spark.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark_odradek.metadata import DataLossError
from pyspark_odradek.options import OdradekOptionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pyspark_odradek.source import OdradekDataSource

__all__ = ["DataLossError", "DefaultSource", "OdradekDataSource", "OdradekOptionError", "register"]


def __getattr__(name: str) -> Any:
    """``OdradekDataSource`` and ``DefaultSource`` (the name PySpark's automatic data source
    lookup asks for) are imported on first use, so the pure modules (options, planning,
    decode) import without pyspark's data source machinery or a client."""
    if name in ("OdradekDataSource", "DefaultSource"):
        from pyspark_odradek.source import OdradekDataSource

        return OdradekDataSource
    raise AttributeError(f"module 'pyspark_odradek' has no attribute {name!r}")


def register(spark: SparkSession) -> None:
    """Make ``format("odradek")`` available in ``spark`` (idempotent)."""
    from pyspark_odradek.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
