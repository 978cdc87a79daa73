"""Helpers of the broker-backed JVM reader's tests (``format("odradek-jvm")``, sources in
odradek/spark/jvm/src/odradek/broker): load a topic through it and through the Python source,
and the rows of a DataFrame in a comparable form."""

from __future__ import annotations

from typing import Any

from tests.broker.wire import Wire


def bootstrap(wire: Wire) -> str:
    return f"127.0.0.1:{wire.sock.getpeername()[1]}"


def load(spark: Any, fmt: str, servers: str, **options: str) -> Any:
    """``spark.read.format(fmt)`` (``odradek-jvm`` or ``odradek``) on ``servers``."""
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", servers)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def all_rows(df: Any) -> list[tuple[Any, ...]]:
    """Every column of every row, headers as lists of pairs, sorted by topic-partition-offset."""
    return sorted(
        (
            (r.topic, r.partition, r.offset),
            r.key,
            r.value,
            r.timestamp,
            r.timestampType,
            *(
                ([None if r.headers is None else [(h.key, h.value) for h in r.headers]])
                if "headers" in df.columns
                else []
            ),
        )
        for r in df.collect()
    )


def both(spark: Any, wire: Wire, **options: str) -> tuple[list[Any], list[Any]]:
    """The rows of the same read through the JVM reader and through the Python source."""
    servers = bootstrap(wire)
    return (
        all_rows(load(spark, "odradek-jvm", servers, **options)),
        all_rows(load(spark, "odradek", servers, **options)),
    )
