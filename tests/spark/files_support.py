"""Helpers of the file-backed reader's tests (``format("odradek-files")``, the JVM reader in
odradek/spark/jvm): load log directories, snapshot them, produce."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import Compression
from tests.broker.wire import Wire


def load_files(spark: Any, roots: Sequence[Path], **options: str) -> Any:
    reader = spark.read.format("odradek-files").option("log.dirs", ",".join(str(r) for r in roots))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows(df: Any) -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    return sorted(
        (r.topic, r.partition, r.offset, r.key, r.value)
        for r in df.select("topic", "partition", "offset", "key", "value").collect()
    )


def produce_batches(
    wire: Wire,
    topic: str,
    partition: int,
    batches: int,
    per_batch: int,
    *,
    value_bytes: int = 100,
    t0_ms: int = 1_700_000_000_000,
    compression: Compression = Compression.NONE,
) -> list[tuple[int, int]]:
    """Append ``batches`` batches; record ``j`` of batch ``i`` has key ``k{i}`` and a value
    starting ``v{i}.{j}.``, timestamp ``t0_ms + i``. Returns ``(base offset, count)`` each."""
    result = []
    for i in range(batches):
        records = [
            (f"k{i}".encode(), f"v{i}.{j}.".encode().ljust(value_bytes, b"x"), t0_ms + i)
            for j in range(per_batch)
        ]
        answer = wire.produce(topic, partition, encode_batch(records, compression=compression))
        assert answer.error_code == 0, answer
        result.append((answer.base_offset, per_batch))
    return result


def snapshot(roots: Sequence[Path]) -> dict[str, tuple[int, int, int]]:
    """Every file under ``roots``: (size, mtime_ns, inode) — to show a read changed nothing."""
    found = {}
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                path = os.path.join(directory, name)
                st = os.stat(path)
                found[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found
