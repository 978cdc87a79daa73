"""The file-backed reader's parts without Spark: index readers, planning, and what a task does
when retention or compaction changed its segment after planning."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from odradek.protocol.records import encode_batch
from odradek.spark.files_layout import LogDirs
from odradek.spark.files_plan import plan_file_ranges
from odradek.spark.files_read import read_file_range
from odradek.spark.metadata import DataLossError
from odradek.spark.planning import OffsetRange
from odradek.storage.log_view import locate, read_offset_index, read_time_index

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


def read_all(task: object, fail: bool = True) -> list[int]:
    out: list[int] = []
    for rb in read_file_range(
        task, include_headers=False, chunk_bytes=1024, fail_on_data_loss=fail
    ):  # type: ignore[arg-type]
        out += rb.column("offset").to_pylist()
    return out


def test_index_readers_keep_the_valid_prefix_of_preallocated_files(tmp_path: Path) -> None:
    index = tmp_path / "0.index"
    index.write_bytes(struct.pack(">iiii", 4, 100, 9, 250) + bytes(8 * 1000))
    assert read_offset_index(index, 1000) == [(1004, 100), (1009, 250)]
    index.write_bytes(bytes(8 * 1000))  # an empty, preallocated index
    assert read_offset_index(index, 1000) == []
    assert read_offset_index(tmp_path / "missing.index", 0) == []
    timeindex = tmp_path / "0.timeindex"
    timeindex.write_bytes(struct.pack(">qiqi", T0, 4, T0 + 5, 9) + bytes(12 * 10) + b"\x01")
    assert read_time_index(timeindex, 1000) == [(T0, 1004), (T0 + 5, 1009)]
    assert not (tmp_path / "missing.index").exists()  # reading never creates a file


def test_locate_ignores_an_index_entry_that_does_not_fit_the_log(tmp_path: Path) -> None:
    part = write_partition(tmp_path)
    fd = os.open(part / f"{0:020d}.log", os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        good = locate(fd, [], 42, size)
        assert good is not None and good.base_offset == 40
        assert locate(fd, [(40, 7)], 42, size) == good  # a position inside a batch
        assert locate(fd, [(40, good.position)], 42, size) == good
        assert locate(fd, [], 100, size) is None
    finally:
        os.close(fd)


def test_planned_ranges_are_disjoint_and_cover_the_range(tmp_path: Path) -> None:
    write_partition(tmp_path)
    plog = LogDirs([str(tmp_path)]).partition_log(("t", 0))
    assert (plog.log_start_offset, plog.log_end_offset) == (0, 100)
    tasks = plan_file_ranges(plog, OffsetRange("t", 0, 3, 97), max_partition_bytes=1 << 30)
    assert len(tasks) == 1  # no index: no cut points, one task for the segment
    assert read_all(tasks[0]) == list(range(3, 97))


def test_a_segment_renamed_deleted_or_replaced_after_planning(tmp_path: Path) -> None:
    part = write_partition(tmp_path)
    plog = LogDirs([str(tmp_path)]).partition_log(("t", 0))
    (task,) = plan_file_ranges(plog, OffsetRange("t", 0, 10, 60), 1 << 30)
    live = part / f"{0:020d}.log"
    # Retention renames before it deletes: the task finds its file by inode.
    os.rename(live, live.with_name(live.name + ".deleted"))
    assert read_all(task) == list(range(10, 60))
    # Compaction replaced it (a new inode, other positions): read by offsets.
    live.write_bytes(batch(12, 1) + batch(33, 2) + batch(80, 1))
    assert read_all(task) == [12, 33, 34]
    # Gone altogether: data loss, an error unless failOnDataLoss=false.
    os.unlink(live)
    os.unlink(live.with_name(live.name + ".deleted"))
    with pytest.raises(DataLossError, match="deleted after the read was planned"):
        read_all(task)
    assert read_all(task, fail=False) == []
