"""Registration: PySpark's automatic lookup finds the source; the explicit call is idempotent."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pyspark.sql.datasource import DataSource

import pyspark_odradek


def test_default_source_is_what_pysparks_lookup_wants() -> None:
    # pyspark.sql.worker.lookup_data_sources: every top-level module named pyspark_* whose
    # DefaultSource is a DataSource is registered under DefaultSource.name().
    module = importlib.import_module("pyspark_odradek")
    assert module.__name__.startswith("pyspark_")
    assert issubclass(module.DefaultSource, DataSource)
    assert module.DefaultSource.name() == "odradek"
    assert module.DefaultSource is pyspark_odradek.OdradekDataSource
    with pytest.raises(AttributeError):
        _ = pyspark_odradek.NoSuchThing  # type: ignore[attr-defined]


@pytest.mark.slow
def test_register_twice(spark: Any) -> None:
    pyspark_odradek.register(spark)
    pyspark_odradek.register(spark)
    schema = spark.read.format("odradek").option("subscribe", "x").load().schema
    assert schema.fieldNames()[:2] == ["key", "value"]
