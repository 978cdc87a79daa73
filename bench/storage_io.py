"""The timed operations of ``bench.storage``, on a log and on plain files.

Each call does one thing and returns the seconds of only that thing (``Stopwatch``): opening,
closing and deleting what it made happen outside the timing. ``bench.storage`` decides which
to run, interleaves their repeats and turns the seconds into figures.

* :func:`raw_write` / :func:`log_append`: the same pre-built batches ``os.write``-n to a new
  file, or appended through ``Log.append`` to a new partition, with no flush, one final flush,
  or one every ``every`` batches (``flush`` = ``"none"``, ``"final"``, ``"every"``); the file
  or the partition is deleted afterwards.
* :func:`timed_open`: ``Log.open`` of an existing partition, clean or unclean with recovery
  point 0 (every batch re-validated, the indexes rebuilt); the opened log must end where it
  ended when written.
* :func:`read_files`: files read front to back in 128 KiB ``readv`` calls (what GNU ``cat``
  does); :func:`evict` first drops a partition's pages from this machine's page cache
  (``posix_fadvise(DONTNEED)``), for the cold-cache runs.

Every partition is ``bench-0`` with Kafka's default topic config but ``segment.bytes``, and
sees one fixed clock, :data:`NOW_MS` (also the timestamp of ``bench.storage.build_batches``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bench.common import Stopwatch
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

__all__ = [
    "NOW_MS",
    "PARTITION",
    "TOPIC",
    "evict",
    "log_append",
    "open_log",
    "raw_write",
    "read_files",
    "timed_open",
]

TOPIC = "bench"
PARTITION = 0
NOW_MS = 1_700_000_000_000
_READ_CHUNK_BYTES = 128 * 1024  # GNU cat's buffer


def open_log(
    directory: Path, segment_bytes: int, *, clean: bool = False, recovery_point: int = 0
) -> Log:
    """The partition in ``directory`` (created if missing); ``clean`` and ``recovery_point``
    are ``Log.open``'s ``clean_shutdown`` and ``recovery_point``."""
    return Log.open(
        directory,
        TOPIC,
        PARTITION,
        LogConfig(segment_bytes=segment_bytes),
        now_ms=NOW_MS,
        clean_shutdown=clean,
        recovery_point=recovery_point,
    )


def raw_write(path: Path, seq: list[bytes], flush: str, every: int) -> float:
    """Seconds to write ``seq`` with ``os.write`` (flush: "none", "final" or "every")."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    write, fsync = os.write, os.fsync
    try:
        with Stopwatch() as sw:
            if flush == "every":
                for i, batch in enumerate(seq, 1):
                    write(fd, batch)
                    if i % every == 0:
                        fsync(fd)
                fsync(fd)
            else:
                for batch in seq:
                    write(fd, batch)
                if flush == "final":
                    fsync(fd)
    finally:
        os.close(fd)
        path.unlink()
    return sw.seconds


def log_append(
    directory: Path, seq: list[bytes], flush: str, every: int, segment_bytes: int
) -> float:
    """Seconds to append ``seq`` through ``Log.append`` (flush as in :func:`raw_write`)."""
    log = open_log(directory, segment_bytes)
    append = log.append
    try:
        with Stopwatch() as sw:
            if flush == "every":
                for i, batch in enumerate(seq, 1):
                    append(batch, now_ms=NOW_MS)
                    if i % every == 0:
                        log.flush()
                log.flush()
            else:
                for batch in seq:
                    append(batch, now_ms=NOW_MS)
                if flush == "final":
                    log.flush()
    finally:
        log.close()
        shutil.rmtree(directory)
    return sw.seconds


def timed_open(
    directory: Path, segment_bytes: int, *, clean: bool, next_offset: int, size: int
) -> float:
    """Seconds of a clean open, or of an unclean one recovering from offset 0; the log must
    end at ``next_offset`` / ``size`` bytes."""
    with Stopwatch() as sw:
        log = open_log(
            directory, segment_bytes, clean=clean, recovery_point=next_offset if clean else 0
        )
    try:
        if log.next_offset != next_offset or log.size_bytes != size:
            raise AssertionError(
                f"reopened log ends at offset {log.next_offset} / {log.size_bytes} B, "
                f"expected {next_offset} / {size} B"
            )
    finally:
        log.close()
    return sw.seconds


def evict(directory: Path) -> None:
    """Drop the partition's (clean, fsynced) pages from the page cache."""
    for path in directory.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_files(paths: list[Path]) -> float:
    """Seconds to read ``paths`` front to back in 128 KiB ``readv`` calls."""
    buffer = bytearray(_READ_CHUNK_BYTES)
    with Stopwatch() as sw:
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                while os.readv(fd, [buffer]):
                    pass
            finally:
                os.close(fd)
    return sw.seconds
