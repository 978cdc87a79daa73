"""SegmentFile: a held descriptor outlives its owner's close; it closes exactly once; a closed
file is never handed to a new holder (issue 14, finding 2, below the broker)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from odradek.storage.errors import SegmentClosedError, UnknownTopicOrPartitionError
from odradek.storage.segment_file import SegmentFile


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _file(path: Path, data: bytes = b"segment bytes") -> tuple[SegmentFile, int]:
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    return SegmentFile(fd, str(path)), fd


def test_close_without_holders_closes_at_once(tmp_path: Path) -> None:
    file, fd = _file(tmp_path / "a.log")
    file.close()
    assert file.closed and not _is_open(fd)
    file.close()  # idempotent
    with pytest.raises(ValueError):
        file.fileno()


def test_a_held_file_stays_readable_after_close_and_unlink(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    file, fd = _file(path)
    assert file.hold() == fd
    file.close()
    path.unlink()  # DeleteTopics removes the directory meanwhile
    assert file.closed and _is_open(fd)
    assert os.pread(file.held_fileno(), 7, 0) == b"segment"
    other = os.open(tmp_path, os.O_RDONLY)  # a new open cannot get this number
    assert other != fd
    os.close(other)
    file.release()
    assert not _is_open(fd)
    with pytest.raises(ValueError):
        file.held_fileno()


def test_hold_after_close_raises_unknown_partition(tmp_path: Path) -> None:
    file, _ = _file(tmp_path / "a.log")
    file.hold()
    file.close()
    with pytest.raises(SegmentClosedError) as caught:
        file.hold()
    assert isinstance(caught.value, UnknownTopicOrPartitionError)
    assert file.holders == 1  # the refused hold left no count behind
    file.release()


def test_the_last_of_many_holders_closes(tmp_path: Path) -> None:
    file, fd = _file(tmp_path / "a.log")
    for _ in range(3):
        file.hold()
    file.close()
    file.release()
    file.release()
    assert _is_open(fd)
    file.release()
    assert not _is_open(fd)


def test_holds_from_threads_are_never_lost(tmp_path: Path) -> None:
    file, fd = _file(tmp_path / "a.log")
    barrier = threading.Barrier(4)

    def churn() -> None:
        barrier.wait()
        for _ in range(20_000):
            file.hold()
            file.release()

    threads = [threading.Thread(target=churn) for _ in range(4)]
    file.hold()  # the owner's reader keeps one throughout
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert file.holders == 1 and _is_open(fd)
    file.close()
    assert _is_open(fd)
    file.release()
    assert not _is_open(fd)


def test_an_unclosed_file_closes_its_descriptor_when_collected(tmp_path: Path) -> None:
    file, fd = _file(tmp_path / "a.log")
    del file  # e.g. a segment whose index could not be opened (out of descriptors)
    assert not _is_open(fd)
