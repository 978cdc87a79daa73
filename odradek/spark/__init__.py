"""``odradek.spark``: a PySpark Python Data Source for odradek topics, format ``"odradek"``.

It mirrors Spark's built-in Kafka source (same schema, options and checkpoint offsets), for
batch and streaming reads and writes::

    import odradek.spark
    odradek.spark.register(spark)
    df = (spark.read.format("odradek")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "page-views")
          .load())

Install it in the Python environment the Spark workers use (``pip install 'odradek[spark]'``)
and call ``register`` once per session: odradek installs one top-level name, ``odradek``, so
PySpark's automatic lookup (top-level modules named ``pyspark_*``) does not see it. See
docs/spark.md.

Two JVM data sources ship in the same package (sources in ``odradek/spark/jvm``), batch reads
only: ``format("odradek-jvm")`` reads topics through the broker (Kafka's wire protocol,
columnar), ``format("odradek-files")`` reads log directories with no broker. Put
:func:`jar_path` on ``spark.jars`` when the session starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.spark.metadata import DataLossError
from odradek.spark.option_values import OdradekOptionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from odradek.spark.source import OdradekDataSource

__all__ = ["DataLossError", "OdradekDataSource", "OdradekOptionError", "jar_path", "register"]

JAR_NAME = "odradek-spark.jar"


def jar_path() -> str:
    """The jar of the JVM data sources ``format("odradek-jvm")`` (reading through the broker)
    and ``format("odradek-files")`` (reading log directories with no broker): give it to
    Spark before the session starts, e.g.
    ``SparkSession.builder.config("spark.jars", odradek.spark.jar_path())`` or
    ``spark-submit --jars $(python -c 'import odradek.spark as s; print(s.jar_path())')``.

    Raises FileNotFoundError when the jar was not built (no ``javac`` at install time: see
    docs/spark.md, "Building the jar")."""
    from pathlib import Path

    path = Path(__file__).resolve().parent / "jars" / JAR_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: odradek was installed without a JDK 17 (javac); "
            "install one and reinstall odradek, or run `make install` in a checkout"
        )
    return str(path)


def __getattr__(name: str) -> Any:
    """``OdradekDataSource`` is imported on first use, so the pure modules (options, planning,
    decode) import without pyspark's data source machinery or a client."""
    if name == "OdradekDataSource":
        from odradek.spark.source import OdradekDataSource

        return OdradekDataSource
    raise AttributeError(f"module 'odradek.spark' has no attribute {name!r}")


def register(spark: SparkSession) -> None:
    """Make ``format("odradek")`` available in ``spark`` (idempotent: a session that has it
    already is left alone, so Spark logs no "replaced a ... registered data source" warning)."""
    from odradek.spark.source import OdradekDataSource

    if _registered(spark):
        return
    spark.dataSource.register(OdradekDataSource)


def _registered(spark: SparkSession) -> bool:
    """Whether ``spark`` already knows a data source named ``odradek`` (classic sessions; a
    Spark Connect session has no JVM handle here and is registered every time)."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()  # type: ignore[attr-defined]
        return bool(manager.dataSourceExists("odradek"))
    except Exception:  # no JVM session object (Spark Connect) or another Spark version
        return False
