"""Atomic file replacement: the one way odradek writes a file that already may exist.

Every checkpoint, ``meta.properties``, ``partition.metadata`` and the clean-shutdown marker is
written through :func:`write_atomically` (docs/architecture.md §4); nothing else rewrites such a
file in place.

Layout: ``<dir>/<name>`` is the live file; ``<dir>/<name>.tmp`` is the scratch copy, the name
Kafka uses too (``CheckpointFile`` writes ``<file>.tmp``). Readers only ever open ``<name>``.

Invariants:
- ``<name>`` is always absent, the complete old contents or the complete new contents; it is never
  empty or partial because of a write (it is never opened for writing).
- A ``<name>.tmp`` left by a crash is garbage: no reader looks at it, and the next write
  truncates and reuses it.
- One writer per file (storage is single-writer): two concurrent writers of the same name would
  share the ``.tmp``.

Crash safety, step by step (a crash after step N leaves):
1. Write the bytes to ``<name>.tmp`` (created or truncated). Crash: old ``<name>`` intact, a
   partial ``.tmp`` is left behind.
2. ``fsync`` the ``.tmp``. Its data is durable *before* the rename, so a power loss can never
   expose the new name with missing data. Crash: old ``<name>`` intact.
3. ``os.replace(<name>.tmp, <name>)``: an atomic rename. Crash: the directory entry points at
   either the old or the new complete file.
4. ``fsync`` the directory, making the rename itself durable. After this returns the new contents
   survive a power loss.
If a step fails with an exception (not a crash), the ``.tmp`` is removed and the old file is
untouched; the exception propagates.

New directories (:func:`make_directories`, a log dir on its first start) follow the same rule:
1. ``mkdir`` each missing directory, outermost first;
2. ``fsync`` its parent, so its entry survives a power loss before anything written inside it
   is acknowledged (a file's own fsync never makes the names above it durable).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["TMP_SUFFIX", "fsync_directory", "make_directories", "write_atomically"]

TMP_SUFFIX = ".tmp"


def fsync_directory(path: Path) -> None:
    """Flush the directory ``path`` itself, so renames, creations and deletions in it persist."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(path: Path) -> None:
    """``mkdir -p path``, durably: every directory it creates is fsynced into its parent."""
    path = Path(path)
    missing = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        fsync_directory(directory.parent)


def write_atomically(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data``; a crash leaves either the old or the new file whole.
    ``mode`` (0o600 for a file of secrets) is set before a byte is written."""
    path = Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode or 0o666)
    try:
        try:
            if mode is not None:  # a .tmp left by a crash keeps its old mode: set it
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_directory(path.parent)
