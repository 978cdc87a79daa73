"""The page-view streaming job end to end: generated events → counts in a topic and Parquet."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from odradek.pipelines.generate import PageView, generate_events, produce_events
from odradek.pipelines.pageviews import start
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess
from tests.spark.spark_support import produce

pytestmark = pytest.mark.slow

MINUTE_MS = 60_000
T0 = 1_700_000_040_000  # a whole minute


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_page_view_counts_end_to_end(
    spark: Any, spark_broker: BrokerProcess, wire: Wire, topic: str, tmp_path: Path
) -> None:
    source, sink = f"{topic}-views", f"{topic}-counts"
    wire.create_topic(source, partitions=2)
    wire.create_topic(sink, partitions=1)
    events = generate_events(400, start_ms=T0, duration_ms=5 * MINUTE_MS, jitter_ms=3_000, seed=7)
    assert produce_events(spark_broker.bootstrap, source, events) == 400
    produce(wire, source, 0, [(None, b"not json", T0), (None, b'{"ts": 1}', T0)])  # dropped
    expected = Counter(((e.ts_ms // MINUTE_MS) * MINUTE_MS, e.page) for e in events)
    query = start(
        spark,
        bootstrap=spark_broker.bootstrap,
        output=str(tmp_path / "counts"),
        checkpoint=str(tmp_path / "checkpoint"),
        source_topic=source,
        sink_topic=sink,
        trigger_interval="0 seconds",
    )
    try:
        query.processAllAvailable()
        # nothing is final until the watermark (max event time - 1 minute) passes a window
        closing = PageView(T0 + 10 * MINUTE_MS, "u0", "/home", None)
        produce_events(spark_broker.bootstrap, source, [closing])
        query.processAllAvailable()
    finally:
        query.stop()

    parquet = spark.read.parquet(str(tmp_path / "counts")).collect()
    from_parquet = Counter()
    for r in parquet:
        start_ms = int(r.window_start.replace(tzinfo=UTC).timestamp() * 1000)
        assert r.window_end.replace(tzinfo=UTC).timestamp() * 1000 == start_ms + MINUTE_MS
        from_parquet[(start_ms, r.page)] += r.views
    assert from_parquet == expected

    records = (
        spark.read.format("odradek")
        .option("bootstrap.servers", spark_broker.bootstrap)
        .option("subscribe", sink)
        .load()
        .collect()
    )
    from_topic = {}
    for r in records:
        value = json.loads(r.value)
        assert r.key.decode() == value["page"]
        from_topic[(value["window_start"], value["page"])] = value["views"]
    assert from_topic == {(iso(ms), page): n for (ms, page), n in expected.items()}
