"""Streaming reads with a real Spark session from a real broker: rate limits, AvailableNow,
checkpoint restarts, new partitions and data loss."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.broker.wire import Wire
from tests.spark.spark_support import add_partitions, delete_records, produce

pytestmark = pytest.mark.slow


def bootstrap(wire: Wire) -> str:
    return f"127.0.0.1:{wire.sock.getpeername()[1]}"


def stream(spark: Any, wire: Wire, **options: str) -> Any:
    reader = spark.readStream.format("odradek").option("bootstrap.servers", bootstrap(wire))
    for name, value in {"startingOffsets": "earliest", **options}.items():
        reader = reader.option(name, value)
    return reader.load()


class Batches:
    """A foreachBatch sink that keeps, per micro-batch, the (partition, offset) it saw."""

    def __init__(self) -> None:
        self.seen: list[list[tuple[int, int]]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = df.select("partition", "offset").collect()
        self.seen.append(sorted((r.partition, r.offset) for r in rows))

    @property
    def non_empty(self) -> list[list[tuple[int, int]]]:
        return [b for b in self.seen if b]

    @property
    def all(self) -> list[tuple[int, int]]:
        return sorted(x for b in self.seen for x in b)


def fill(wire: Wire, topic: str, counts: list[int]) -> None:
    wire.create_topic(topic, partitions=len(counts))
    for p, n in enumerate(counts):
        if n:
            produce(wire, topic, p, [(None, f"{p}:{i}".encode(), 1000 + i) for i in range(n)])


def test_max_offsets_per_trigger_splits_proportionally(
    spark: Any, wire: Wire, topic: str, tmp_path: Path
) -> None:
    fill(wire, topic, [30, 10])
    sink = Batches()
    query = (
        stream(spark, wire, subscribe=topic, maxOffsetsPerTrigger="8")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert [len(b) for b in sink.non_empty] == [8, 8, 8, 8, 8]
    # 30:10 available → 6 from partition 0 and 2 from partition 1 in every batch
    for batch in sink.non_empty:
        assert sum(1 for p, _ in batch if p == 0) == 6
    assert sink.all == [(0, o) for o in range(30)] + [(1, o) for o in range(10)]
    # the checkpoint's offset log holds Spark's Kafka form: {"topic": {"partition": offset}}
    offsets_dir = tmp_path / "cp" / "offsets"
    last = max(offsets_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    assert json.loads(last.read_text().splitlines()[-1]) == {topic: {"0": 30, "1": 10}}


def test_available_now_stops_after_the_data_present_at_start(
    spark: Any, wire: Wire, topic: str, tmp_path: Path
) -> None:
    fill(wire, topic, [11, 9])
    sink = Batches()
    query = (
        stream(spark, wire, subscribe=topic, maxOffsetsPerTrigger="6")
        .writeStream.foreachBatch(sink)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    assert query.awaitTermination(120)
    assert [len(b) for b in sink.non_empty] == [6, 6, 6, 2]
    assert len(sink.all) == 20
    # later data goes to the next run
    produce(wire, topic, 1, [(None, b"later", 5000)])
    again = Batches()
    query = (
        stream(spark, wire, subscribe=topic)
        .writeStream.foreachBatch(again)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    assert query.awaitTermination(120)
    assert again.all == [(1, 9)]


def test_restart_from_checkpoint_no_loss_no_duplicate(
    spark: Any, wire: Wire, topic: str, tmp_path: Path
) -> None:
    fill(wire, topic, [5, 5])
    output, checkpoint = tmp_path / "out", tmp_path / "cp"

    def run() -> None:
        query = (
            stream(spark, wire, subscribe=topic)
            .selectExpr("partition", "offset", "cast(value as string) as value")
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    run()
    for p in range(2):
        produce(wire, topic, p, [(None, f"{p}:{i}".encode(), 2000) for i in range(5, 12)])
    run()
    rows = spark.read.parquet(str(output)).collect()
    got = sorted((r.partition, r.offset, r.value) for r in rows)
    assert got == [(p, o, f"{p}:{o}") for p in range(2) for o in range(12)]


def test_new_partitions_are_read_from_their_start(
    spark: Any, wire: Wire, topic: str, tmp_path: Path
) -> None:
    fill(wire, topic, [3])
    sink = Batches()
    query = (
        stream(spark, wire, subscribe=topic)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
        add_partitions(wire, topic, 3)
        produce(wire, topic, 2, [(None, b"new", 1) for _ in range(4)])
        produce(wire, topic, 0, [(None, b"old", 1)])
        query.processAllAvailable()
    finally:
        query.stop()
    assert sink.all == [(0, o) for o in range(4)] + [(2, o) for o in range(4)]


def test_fail_on_data_loss(spark: Any, wire: Wire, topic: str, tmp_path: Path) -> None:
    fill(wire, topic, [10])
    checkpoint = tmp_path / "cp"

    def run(fail: str, cp: Path) -> Batches:
        sink = Batches()
        query = (
            stream(spark, wire, subscribe=topic, failOnDataLoss=fail)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(cp))
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        return sink

    assert run("true", checkpoint).all == [(0, o) for o in range(10)]
    produce(wire, topic, 0, [(None, b"more", 1) for _ in range(10)])  # offsets 10-19
    assert delete_records(wire, topic, 0, 15) == 15
    shutil.copytree(checkpoint, tmp_path / "cp2")
    with pytest.raises(Exception, match="failOnDataLoss"):
        run("true", checkpoint)
    assert run("false", tmp_path / "cp2").all == [(0, o) for o in range(15, 20)]
