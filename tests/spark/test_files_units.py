"""The file-backed reader's planning and tasks driven one by one through the DataSource V2
interfaces (py4j, the test session's JVM): planned ranges, and what a task does when
retention or compaction changed its segment after planning."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.batch_builder import encode_batch
from tests.spark import jvm_support
from tests.spark.jvm_support import read

T0 = 1_700_000_000_000


def batch(base: int, count: int) -> bytes:
    records = [(b"k", b"v%d" % (base + j), T0 + base + j) for j in range(count)]
    return encode_batch(records, base_offset=base)


def write_partition(root: Path, batches: int = 20, per_batch: int = 5) -> Path:
    part = root / "t-0"
    part.mkdir(parents=True)
    data = b"".join(batch(i * per_batch, per_batch) for i in range(batches))
    (part / f"{0:020d}.log").write_bytes(data)
    return part


def plan(spark: Any, root: Path, **options: str) -> tuple[Any, list[Any]]:
    """The scan's batch and its planned tasks (``FileRange``)."""
    options = {"log.dirs": str(root), "subscribe": "t", **options}
    return jvm_support.plan(spark, "odradek.files.FilesSource", options)


def test_planned_ranges_are_disjoint_and_cover_the_range(spark: Any, tmp_path: Path) -> None:
    write_partition(tmp_path)
    scan_batch, tasks = plan(
        spark, tmp_path, startingOffsets='{"t":{"0":3}}', endingOffsets='{"t":{"0":97}}'
    )
    assert len(tasks) == 1  # no index: no cut points, one task for the segment
    (task,) = tasks
    assert (task.fromOffset(), task.untilOffset(), task.startPosition()) == (3, 97, 0)
    assert read(scan_batch, task) == list(range(3, 97))
    _, split = plan(spark, tmp_path, maxRecordsPerPartition="30")
    assert [(t.fromOffset(), t.untilOffset()) for t in split] == [
        (0, 25),
        (25, 50),
        (50, 75),
        (75, 100),
    ]


def test_a_segment_renamed_deleted_or_replaced_after_planning(spark: Any, tmp_path: Path) -> None:
    part = write_partition(tmp_path)
    scan_batch, (task,) = plan(
        spark, tmp_path, startingOffsets='{"t":{"0":10}}', endingOffsets='{"t":{"0":60}}'
    )
    live = part / f"{0:020d}.log"
    # Retention renames before it deletes: the task finds its file by inode.
    os.rename(live, live.with_name(live.name + ".deleted"))
    assert read(scan_batch, task) == list(range(10, 60))
    # Compaction replaced it (a new inode, other positions): read by offsets.
    live.write_bytes(batch(12, 1) + batch(33, 2) + batch(80, 1))
    assert read(scan_batch, task) == [12, 33, 34]
    # Gone altogether: data loss, an error unless failOnDataLoss=false.
    os.unlink(live)
    os.unlink(live.with_name(live.name + ".deleted"))
    with pytest.raises(Exception, match="deleted after the read was planned"):
        read(scan_batch, task)
    lenient, _ = plan_after_loss(spark, tmp_path, task)
    assert read(lenient, task) == []


def plan_after_loss(spark: Any, root: Path, task: Any) -> tuple[Any, None]:
    """A scan with failOnDataLoss=false over a directory whose partition is now empty."""
    scan_batch, tasks = plan(spark, root, failOnDataLoss="false")
    assert tasks == []  # nothing left to plan
    return scan_batch, None


def test_an_index_entry_that_does_not_fit_the_log_is_ignored(spark: Any, tmp_path: Path) -> None:
    part = write_partition(tmp_path)
    # Offset 40 indexed at position 7, inside the first batch: no scan may start there.
    (part / f"{0:020d}.index").write_bytes(struct.pack(">ii", 40, 7))
    scan_batch, (task,) = plan(spark, tmp_path, startingOffsets='{"t":{"0":42}}')
    assert task.startPosition() > 7
    assert read(scan_batch, task) == list(range(42, 100))
