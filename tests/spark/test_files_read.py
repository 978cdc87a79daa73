"""``format("odradek-files").option("log.dirs", ...)`` (the JVM reader) against a real broker's
directories, after the broker stopped: rows, compression, bounds, several roots, splitting,
column pruning, options, read-only."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.record_batch import Compression
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess
from tests.spark.files_support import load_files, produce_batches, rows, snapshot

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000
SEGMENT_BYTES = 64 * 1024


class Stopped:
    """A broker with two roots that wrote known topics, then stopped cleanly."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="odradek-files-"))
        self.roots = [self.base / "a", self.base / "b"]
        self.batches: dict[tuple[str, int], list[tuple[int, int]]] = {}
        broker = BrokerProcess(self.roots).start()
        try:
            with Wire(broker.port) as wire:  # type: ignore[arg-type]
                wire.create_topic("plain", partitions=3, configs={"segment.bytes": "65536"})
                for p in range(3):
                    self.batches["plain", p] = produce_batches(wire, "plain", p, 40, 20, t0_ms=T0)
                wire.create_topic("packed", partitions=1)
                packed = []
                for i, codec in enumerate(list(Compression) * 2):
                    packed += produce_batches(
                        wire, "packed", 0, 1, 50, t0_ms=T0 + 100 * i, compression=codec
                    )
                self.batches["packed", 0] = packed
                wire.create_topic("empty", partitions=1)
        finally:
            assert broker.stop() == 0

    def expected(self, topic: str, partition: int) -> list[tuple[str, int, int, bytes, bytes]]:
        result = []
        for i, (base, count) in enumerate(self.batches[topic, partition]):
            for j in range(count):
                value = f"v{0 if topic == 'packed' else i}.{j}.".encode().ljust(100, b"x")
                key = f"k{0 if topic == 'packed' else i}".encode()
                result.append((topic, partition, base + j, key, value))
        return result


@pytest.fixture(scope="module")
def stopped() -> Iterator[Stopped]:
    yield Stopped()


def test_reads_every_record_of_a_stopped_broker_across_roots_and_segments(
    spark: Any, stopped: Stopped
) -> None:
    before = snapshot(stopped.roots)
    segments = list((stopped.roots[0].parent).rglob("plain-0/*.log"))
    assert len(segments) > 1  # the partition rolled: the read crosses segments
    homes = {p.parent.name for p in stopped.base.rglob("plain-*/")}
    assert len(homes) == 2  # partitions were spread over both roots
    df = load_files(spark, stopped.roots, subscribe="plain")
    got = rows(df)
    assert got == sorted(r for p in range(3) for r in stopped.expected("plain", p))
    first = df.where("partition = 0 AND offset = 0").collect()[0]
    assert first.timestampType == 0
    assert int(first.timestamp.timestamp() * 1000) == T0
    assert snapshot(stopped.roots) == before  # nothing written, created or touched


def test_compressed_batches_of_every_codec(spark: Any, stopped: Stopped) -> None:
    df = load_files(spark, stopped.roots, subscribe="packed")
    assert rows(df) == stopped.expected("packed", 0)


def test_offset_and_timestamp_bounds(spark: Any, stopped: Stopped) -> None:
    expected = stopped.expected("plain", 1)
    starting = '{"plain":{"1":25}}'
    ending = '{"plain":{"1":610}}'
    df = load_files(
        spark, stopped.roots, assign='{"plain":[1]}', startingOffsets=starting, endingOffsets=ending
    )
    assert rows(df) == [r for r in expected if 25 <= r[2] < 610]
    # count(*) reads no column: whole batches count their header's record count, the two
    # batches cut by the bounds are decoded for their offsets.
    assert df.count() == 610 - 25
    # Batch i has timestamp T0 + i and offsets 20 i .. 20 i + 19.
    df = load_files(spark, stopped.roots, assign='{"plain":[1]}', startingTimestamp=str(T0 + 33))
    assert rows(df) == [r for r in expected if r[2] >= 660]
    df = load_files(
        spark,
        stopped.roots,
        assign='{"plain":[1]}',
        startingOffsetsByTimestamp=f'{{"plain":{{"1":{T0 + 5}}}}}',
        endingOffsetsByTimestamp=f'{{"plain":{{"1":{T0 + 7}}}}}',
    )
    assert rows(df) == [r for r in expected if 100 <= r[2] < 140]


def test_splits_segments_by_bytes_and_for_min_partitions(spark: Any, stopped: Stopped) -> None:
    whole = load_files(spark, stopped.roots, subscribe="plain")
    per_segment = whole.rdd.getNumPartitions()
    segments = len(list(stopped.base.rglob("plain-*/*.log")))
    assert per_segment == segments  # one task per segment
    split = load_files(spark, stopped.roots, subscribe="plain", maxPartitionBytes="8192")
    assert split.rdd.getNumPartitions() > 4 * segments
    assert rows(split) == rows(whole)
    more = load_files(spark, stopped.roots, subscribe="packed", minPartitions="4")
    assert more.rdd.getNumPartitions() == 4
    assert rows(more) == stopped.expected("packed", 0)


def test_a_query_reads_only_the_columns_it_needs(spark: Any, stopped: Stopped) -> None:
    df = load_files(spark, stopped.roots, subscribe="plain")
    assert _scan_columns(df.groupBy().count()) == set()
    assert _scan_columns(df.selectExpr("sum(length(value))")) == {"value"}
    answer = df.selectExpr("count(*)", "sum(length(value))", "max(offset)").collect()[0]
    assert tuple(answer) == (3 * 40 * 20, 3 * 40 * 20 * 100, 40 * 20 - 1)


def _scan_columns(df: Any) -> set[str]:
    """The columns the ``BatchScan`` of ``df``'s physical plan reads."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    (scan,) = [line for line in plan.splitlines() if "BatchScan odradek-files" in line]
    listed = scan.split("[", 1)[1].split("]", 1)[0]
    return {c.split("#")[0] for c in listed.split(", ") if c}


def test_pattern_headers_and_empty_topic(spark: Any, stopped: Stopped) -> None:
    df = load_files(spark, stopped.roots, subscribePattern="pl.*|emp.*", includeHeaders="true")
    assert "headers" in df.columns
    assert df.count() == 3 * 40 * 20
    assert load_files(spark, stopped.roots, subscribe="empty").count() == 0


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"log.dirs": " , "}, "log.dirs"),
        ({"log.dirs": "/nonexistent/odradek-logs"}, "log.dirs"),
        ({"bootstrap.servers": "127.0.0.1:9092"}, "log.dirs"),
        ({"isolation.level": "dirty"}, "isolation.level"),
        ({"maxPartitionBytes": "0"}, "maxPartitionBytes"),
        ({"subscribe": "no-such-topic"}, "subscribe"),
        ({"assign": '{"plain":[7]}'}, "assign"),
        ({"startingOffsets": '{"plain":{"0":5}}'}, "startingOffsets"),
        ({"endingOffsets": '{"plain":{"0":999999,"1":-1,"2":-1}}'}, "endingOffsets"),
    ],
)
def test_bad_options_fail_naming_the_option(
    spark: Any, stopped: Stopped, options: dict[str, str], named: str
) -> None:
    reader = spark.read.format("odradek-files").option(
        "log.dirs", ",".join(str(r) for r in stopped.roots)
    )
    if "subscribe" not in options and "assign" not in options:
        reader = reader.option("subscribe", "plain")
    for name, value in options.items():
        reader = reader.option(name, value)
    with pytest.raises(Exception, match=re.escape(f"option '{named}'")):
        reader.load().count()


def test_streaming_from_log_dirs_is_refused(spark: Any, stopped: Stopped) -> None:
    stream = (
        spark.readStream.format("odradek-files")
        .option("log.dirs", str(stopped.roots[0]))
        .option("subscribe", "plain")
    )
    with pytest.raises(Exception, match="odradek-files does not support streamed reading"):
        stream.load()


def test_the_python_source_points_at_the_file_reader(spark: Any, stopped: Stopped) -> None:
    reader = spark.read.format("odradek").option("log.dirs", str(stopped.roots[0]))
    with pytest.raises(Exception, match=r"option 'log\.dirs'.*format\(\"odradek-files\"\)"):
        reader.option("subscribe", "plain").load()
