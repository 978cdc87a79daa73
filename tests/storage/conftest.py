"""Helpers for the storage engine tests: batches, logs on real temp dirs, reading regions back."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import validate_batch
from odradek.protocol.records import Record, decode_records
from odradek.storage.checkpoints import CheckpointError
from odradek.storage.config import LogConfig
from odradek.storage.errors import StorageError
from odradek.storage.log import Log
from odradek.storage.segment_file import FileRegion

TOPIC = "orders"


def batch(
    count: int = 1,
    *,
    ts: int | Sequence[int] = 1_000,
    value_bytes: int = 10,
    base_offset: int = 0,
    tag: str = "v",
) -> bytes:
    """A client batch of ``count`` records; ``ts`` is one timestamp or one per record."""
    stamps = [ts] * count if isinstance(ts, int) else list(ts)
    assert len(stamps) == count
    return encode_batch(
        [
            (f"k{i}".encode(), f"{tag}{i}".encode().ljust(value_bytes, b"."), stamps[i])
            for i in range(count)
        ],
        base_offset=base_offset,
    )


def config(**overrides: object) -> LogConfig:
    """Kafka defaults with topic-level ``overrides`` (``segment_bytes=...`` style names)."""
    return LogConfig().with_overrides({k.replace("_", "."): str(v) for k, v in overrides.items()})


def open_log(
    directory: Path,
    cfg: LogConfig | None = None,
    *,
    now_ms: int = 0,
    clean_shutdown: bool = False,
    recovery_point: int = 0,
    log_start_offset: int = 0,
) -> Log:
    return Log.open(
        directory,
        TOPIC,
        0,
        cfg or LogConfig(),
        now_ms=now_ms,
        clean_shutdown=clean_shutdown,
        recovery_point=recovery_point,
        log_start_offset=log_start_offset,
    )


def region_bytes(region: FileRegion) -> bytes:
    return os.pread(region.file.fileno(), region.length, region.position)


def split_batches(data: bytes) -> list[bytes]:
    """Whole v2 batches back to back in ``data``; each is validated (CRC included)."""
    out = []
    position = 0
    while position < len(data):
        header = validate_batch(data, position)
        out.append(data[position : position + header.size_bytes])
        position += header.size_bytes
    return out


def all_records(log: Log, start: int | None = None) -> list[Record]:
    """Every record from ``start`` (default: the log start offset) to the end, via Log.read."""
    offset = log.log_start_offset if start is None else start
    records: list[Record] = []
    while offset < log.next_offset:
        info = log.read(offset, 1 << 30)
        assert info.region is not None
        for raw in split_batches(region_bytes(info.region)):
            records.extend(r for r in decode_records(raw) if r.offset >= offset)
        offset = records[-1].offset + 1
    return records


def segment_files(directory: Path, suffix: str = ".log") -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def append_all(log: Log, batches: Iterable[bytes], now_ms: int = 0) -> None:
    for data in batches:
        log.append(data, now_ms=now_ms)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / f"{TOPIC}-0"


def expect_checkpoint_error(path: Path, line: int | None, read: object) -> CheckpointError:
    """Read ``path`` with ``read``, expecting a CheckpointError that names it and ``line``."""
    with pytest.raises(CheckpointError) as info:
        read(path)  # type: ignore[operator]
    error = info.value
    assert isinstance(error, StorageError)
    assert str(path) in str(error)
    assert error.line == line
    if line is not None:
        assert f"line {line}" in str(error)
    return error
