"""storage.log_view, the read-only view of a partition directory: its index readers keep the
valid prefix of preallocated files, and ``locate`` ignores an index entry that does not fit the
log. (These lived with the Python file reader's tests, its only user, until that reader moved
to the JVM: odradek/spark/jvm.)"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from odradek.protocol.records import encode_batch
from odradek.storage.log_view import locate, read_offset_index, read_time_index

T0 = 1_700_000_000_000


def write_log(directory: Path, batches: int = 20, per_batch: int = 5) -> Path:
    path = directory / f"{0:020d}.log"
    data = b"".join(
        encode_batch(
            [(b"k", b"v%d" % (i * per_batch + j), T0) for j in range(per_batch)],
            base_offset=i * per_batch,
        )
        for i in range(batches)
    )
    path.write_bytes(data)
    return path


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
    fd = os.open(write_log(tmp_path), os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        good = locate(fd, [], 42, size)
        assert good is not None and good.base_offset == 40
        assert locate(fd, [(40, 7)], 42, size) == good  # a position inside a batch
        assert locate(fd, [(40, good.position)], 42, size) == good
        assert locate(fd, [], 100, size) is None
    finally:
        os.close(fd)
