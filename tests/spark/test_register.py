"""Registration: the explicit call is what makes ``format("odradek")`` work, and it is
idempotent."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.datasource import DataSource

import odradek.spark


def test_the_source_is_a_data_source_named_odradek() -> None:
    source = odradek.spark.OdradekDataSource
    assert issubclass(source, DataSource)
    assert source.name() == "odradek"
    assert source.__module__ == "odradek.spark.source"
    with pytest.raises(AttributeError):
        _ = odradek.spark.NoSuchThing  # type: ignore[attr-defined]


@pytest.mark.slow
def test_register_twice(spark: Any) -> None:
    odradek.spark.register(spark)
    odradek.spark.register(spark)
    schema = spark.read.format("odradek").option("subscribe", "x").load().schema
    assert schema.fieldNames()[:2] == ["key", "value"]


@pytest.mark.slow
def test_register_registers_once(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second ``register`` leaves the session alone: Spark would log that the data source
    "replaced a previously registered data source" on every re-registration."""
    from pyspark.sql.datasource import DataSourceRegistration

    calls = []
    monkeypatch.setattr(DataSourceRegistration, "register", lambda self, cls: calls.append(cls))
    odradek.spark.register(spark)
    assert calls == []  # the session fixture registered it already
