"""The power-cut journal: what a file system has made durable, and how to rewind to it.

The FUSE layer (:mod:`tests.powercut.fs`) performs every change on a backing directory through
this journal, which records what a power cut would take back. The rules, after POSIX (and the
LazyFS idea, in our own words):

1. **File data** is durable up to the last ``fsync``/``fdatasync`` of that file. Every write and
   truncate since is kept as an undo entry (the bytes it overwrote, the old size).
2. **Directory entries** (a creation, ``mkdir``, ``unlink``, ``rmdir``, ``rename``) are durable
   once every directory they changed was fsynced after them. Until then they are pending.
   An ``fsync`` of a *file* never makes its name durable.
3. An entry that became durable makes every earlier pending entry on the same name durable too
   (a journal never commits a later change of a name without the earlier ones), so rewinding
   never has to put two files under one name.
4. An unlinked file (or a file a rename replaced) is kept in the graveyard, a directory outside
   the backing tree, until its unlink is durable: the rewind may have to bring it back.

A power cut (:meth:`Journal.rewind`), with the broker dead and the file system unmounted:

1. For each file, keep the first ``k`` of its pending writes (``k`` random), tear write ``k+1``
   at a random byte (its first bytes reach the disk, the rest keep their old contents) and undo
   the rest, newest first. With ``tear=False`` every pending write is undone; ``written_back``
   says exactly how many pending bytes of a file reached the disk (one crash state, on purpose).
2. Undo every pending directory entry, newest first: creations removed (a directory with its
   whole subtree), unlinks and replaced files brought back from the graveyard, renames moved
   back, removed directories made again. An entry whose parent directory is gone is dropped with
   it (it was inside a creation that did not survive).
3. Empty the graveyard: every file left there is gone for good.

Node ids, not paths, name files and directories: a durable rename of a directory moves its
pending children with it. Not supported (refused by the FUSE layer): hard links, symlinks.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DirEntryOp", "Journal", "RewindReport", "WriteUndo"]


@dataclass
class WriteUndo:
    """One pending change of a file's data: ``pwrite`` (``data_bytes`` > 0) or a truncate."""

    offset: int  # where the write started; for a truncate: the new size
    data_bytes: int  # bytes written (0 for a truncate)
    old_bytes: bytes  # what the change overwrote or cut off (a truncate: less trailing zeros)
    old_size: int


@dataclass
class DirEntryOp:
    """A pending directory change. ``kind``: create, mkdir, unlink, rmdir, rename."""

    kind: str
    node: int
    parent: int
    name: str
    new_parent: int = -1  # rename only
    new_name: str = ""  # rename only
    replaced: int = -1  # rename over an existing file: that file's node
    pending_dirs: set[int] = field(default_factory=set)

    def names(self) -> set[tuple[int, str]]:
        found = {(self.parent, self.name)}
        if self.kind == "rename":
            found.add((self.new_parent, self.new_name))
        return found


@dataclass
class RewindReport:
    files_rewound: int = 0
    bytes_dropped: int = 0
    writes_torn: int = 0
    entries_undone: dict[str, int] = field(default_factory=dict)
    files_revived: int = 0

    def summary(self) -> str:
        undone = ", ".join(f"{k} {v}" for k, v in sorted(self.entries_undone.items())) or "none"
        return (
            f"{self.files_rewound} files rewound ({self.bytes_dropped} bytes dropped, "
            f"{self.writes_torn} writes torn); entries undone: {undone}; "
            f"{self.files_revived} unlinked files revived"
        )


class Journal:
    """Applies changes to ``root`` and remembers what is not durable yet (module docstring).

    Thread-safe: every method takes one lock. Paths are relative to ``root`` ("" is the root).
    """

    ROOT = 0

    def __init__(self, root: Path, graveyard: Path) -> None:
        self.root = Path(root)
        self.graveyard = Path(graveyard)
        self.graveyard.mkdir(parents=True, exist_ok=True)
        self._paths: dict[int, str] = {self.ROOT: ""}  # node -> path ("\0<n>": in the graveyard)
        self._nodes: dict[str, int] = {"": self.ROOT}
        self._dirs: set[int] = {self.ROOT}  # the nodes that are directories
        self._next_node = 1
        self._undo: dict[int, list[WriteUndo]] = {}
        self._ops: list[DirEntryOp] = []
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- naming ------------------------------------------------------------------------------

    def node(self, path: str) -> int:
        """The node at ``path`` (one that existed at mount time gets an id on first use)."""
        path = path.strip("/")
        with self._lock:
            return self._node(path)

    def _node(self, path: str) -> int:
        node = self._nodes.get(path)
        if node is None:
            node = self._next_node
            self._next_node += 1
            self._nodes[path] = node
            self._paths[node] = path
            if (self.root / path).is_dir():
                self._dirs.add(node)
        return node

    def real(self, node_or_path: int | str) -> Path:
        """The backing path of a node (its graveyard path if unlinked) or of a relative path."""
        if isinstance(node_or_path, str):
            return self.root / node_or_path.strip("/")
        path = self._paths[node_or_path]
        return self.graveyard / path[1:] if path.startswith("\0") else self.root / path

    def _split(self, path: str) -> tuple[int, str]:
        parent, _, name = path.strip("/").rpartition("/")
        return self._node(parent), name

    def _move(self, node: int, new_path: str) -> None:
        """Record that ``node`` (and, for a directory, everything under it) is at ``new_path``."""
        old = self._paths[node]
        prefix = old + "/"
        is_dir = node in self._dirs
        moving = list(self._paths.items()) if is_dir else [(node, old)]
        for other, path in moving:
            if other == node or (old and is_dir and path.startswith(prefix)):
                moved = new_path + path[len(old) :]
                if self._nodes.get(path) == other:
                    del self._nodes[path]
                self._paths[other] = moved
                if not moved.startswith("\0"):
                    self._nodes[moved] = other

    def _bury(self, node: int) -> None:
        os.replace(self.real(node), self.graveyard / str(node))
        self._move(node, f"\0{node}")

    # -- file data ---------------------------------------------------------------------------

    def write(self, node: int, fd: int, data: bytes, offset: int) -> int:
        """``pwrite`` through ``fd`` (a backing descriptor of ``node``), remembering what it
        overwrote."""
        with self._lock:
            size = os.fstat(fd).st_size
            old = (
                os.pread(fd, min(len(data), max(0, size - offset)), offset)
                if offset < size
                else b""
            )
            self._undo.setdefault(node, []).append(WriteUndo(offset, len(data), old, size))
            return os.pwrite(fd, data, offset)

    def truncate(self, node: int, length: int, fd: int | None = None) -> None:
        with self._lock:
            path = self.real(node)
            size = os.fstat(fd).st_size if fd is not None else os.stat(path).st_size
            old = b""
            if length < size:  # trailing zeros are not kept: growing the file back makes them
                with open(path, "rb") as f:
                    f.seek(length)
                    old = f.read(size - length).rstrip(b"\0")
            self._undo.setdefault(node, []).append(WriteUndo(length, 0, old, size))
            if fd is not None:
                os.ftruncate(fd, length)
            else:
                os.truncate(path, length)

    def fsync_file(self, node: int) -> None:
        """Every change of ``node``'s data so far is durable (not its name: rule 2)."""
        with self._lock:
            self._undo.pop(node, None)

    # -- directory entries -------------------------------------------------------------------

    def create(self, path: str, mode: int, flags: int) -> tuple[int, int]:
        """Create a file; returns (node, backing descriptor)."""
        with self._lock:
            parent, name = self._split(path)
            fd = os.open(self.real(path), flags | os.O_CREAT, mode)
            node = self._node(path.strip("/"))
            self._ops.append(DirEntryOp("create", node, parent, name, pending_dirs={parent}))
            return node, fd

    def mkdir(self, path: str, mode: int) -> None:
        with self._lock:
            parent, name = self._split(path)
            os.mkdir(self.real(path), mode)
            node = self._node(path.strip("/"))
            self._ops.append(DirEntryOp("mkdir", node, parent, name, pending_dirs={parent}))

    def unlink(self, path: str) -> None:
        with self._lock:
            parent, name = self._split(path)
            node = self._node(path.strip("/"))
            self._bury(node)
            self._ops.append(DirEntryOp("unlink", node, parent, name, pending_dirs={parent}))

    def rmdir(self, path: str) -> None:
        with self._lock:
            parent, name = self._split(path)
            node = self._node(path.strip("/"))
            os.rmdir(self.real(path))
            del self._nodes[self._paths[node]]
            self._paths[node] = f"\0{node}"
            self._ops.append(DirEntryOp("rmdir", node, parent, name, pending_dirs={parent}))

    def rename(self, old: str, new: str) -> None:
        with self._lock:
            parent, name = self._split(old)
            new_parent, new_name = self._split(new)
            node = self._node(old.strip("/"))
            replaced = -1
            target = self.real(new)
            if target.exists() and not target.is_dir():
                replaced = self._node(new.strip("/"))
                self._bury(replaced)
            os.replace(self.real(old), target)  # an empty directory target is replaced too
            self._move(node, new.strip("/"))
            op = DirEntryOp(
                "rename", node, parent, name, new_parent, new_name, replaced, {parent, new_parent}
            )
            self._ops.append(op)

    def fsync_dir(self, path: str) -> None:
        """Every pending entry change in directory ``path`` is durable (rules 2 and 3)."""
        with self._lock:
            directory = self._node(path.strip("/"))
            durable_names: set[tuple[int, str]] = set()
            for op in reversed(self._ops):
                op.pending_dirs.discard(directory)
                if not op.pending_dirs or op.names() & durable_names:
                    op.pending_dirs.clear()
                    durable_names |= op.names()
            for op in [op for op in self._ops if not op.pending_dirs]:
                if op.kind == "unlink" or op.replaced >= 0:
                    gone = op.node if op.kind == "unlink" else op.replaced
                    self.real(gone).unlink(missing_ok=True)
                    self._undo.pop(gone, None)
            self._ops = [op for op in self._ops if op.pending_dirs]

    # -- the power cut -----------------------------------------------------------------------

    def pending_writes(self) -> int:
        return sum(len(u) for u in self._undo.values())

    def pending_entries(self) -> int:
        return len(self._ops)

    def rewind(
        self,
        rng: random.Random,
        *,
        tear: bool = True,
        written_back: Mapping[str, int | None] | None = None,
    ) -> RewindReport:
        """Put the backing directory in the state a power cut leaves (module docstring).

        ``written_back`` replaces chance for the files it names (paths as they are now): how
        many bytes of that file's pending writes reached the disk, in the order they were
        written (None: all of them), so a test can build one exact crash state.
        """
        with self._lock:
            report = RewindReport()
            chosen = written_back or {}
            for node, undo in self._undo.items():
                path = self._paths[node]
                if path in chosen:
                    keep, kept = _plan(undo, chosen[path])
                elif tear:
                    keep = rng.randint(0, len(undo))
                    torn = keep < len(undo) and undo[keep].data_bytes
                    kept = rng.randint(0, undo[keep].data_bytes - 1) if torn else 0
                else:
                    keep, kept = 0, 0
                self._rewind_file(node, undo, keep, kept, report)
            self._undo.clear()
            for op in reversed(self._ops):
                self._undo_entry(op, report)
            self._ops.clear()
            shutil.rmtree(self.graveyard, ignore_errors=True)
            self.graveyard.mkdir(parents=True, exist_ok=True)
            return report

    def _rewind_file(
        self, node: int, undo: list[WriteUndo], keep: int, kept: int, report: RewindReport
    ) -> None:
        """Keep the first ``keep`` changes and ``kept`` bytes of the next; undo the rest."""
        path = self.real(node)
        if not path.is_file():
            return
        report.files_rewound += 1
        report.writes_torn += kept > 0
        with open(path, "r+b") as f:
            for i in range(len(undo) - 1, keep - 1, -1):
                change = undo[i]
                reached = kept if i == keep else 0  # the torn write's first bytes stay
                report.bytes_dropped += change.data_bytes - reached
                start = change.offset + reached
                if change.data_bytes:  # restore what the write's lost part overwrote
                    f.seek(start)
                    f.write(change.old_bytes[reached:])
                    f.truncate(max(change.old_size, start))
                else:  # a truncate: grow back and restore the cut-off bytes
                    f.truncate(change.old_size)
                    f.seek(change.offset)
                    f.write(change.old_bytes)

    def _undo_entry(self, op: DirEntryOp, report: RewindReport) -> None:
        parent_path = self._paths.get(op.parent, "\0")
        if parent_path.startswith("\0") or not self.real(op.parent).is_dir():
            return  # inside a directory that did not survive
        report.entries_undone[op.kind] = report.entries_undone.get(op.kind, 0) + 1
        here = f"{parent_path}/{op.name}".strip("/")
        if op.kind in ("create", "mkdir"):
            target = self.real(op.node)
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
            self._move(op.node, f"\0{op.node}")
        elif op.kind == "unlink":
            os.replace(self.real(op.node), self.root / here)
            self._move(op.node, here)
            report.files_revived += 1
        elif op.kind == "rmdir":
            os.mkdir(self.root / here)
            self._paths[op.node] = here
            self._nodes[here] = op.node
        elif op.kind == "rename":
            os.replace(self.real(op.node), self.root / here)
            self._move(op.node, here)
            if op.replaced >= 0:
                new_here = f"{self._paths[op.new_parent]}/{op.new_name}".strip("/")
                os.replace(self.real(op.replaced), self.root / new_here)
                self._move(op.replaced, new_here)
                report.files_revived += 1


def _plan(undo: list[WriteUndo], budget_bytes: int | None) -> tuple[int, int]:
    """``(changes kept whole, bytes kept of the next)`` when ``budget_bytes`` of the pending
    writes reached the disk in order (None: all)."""
    if budget_bytes is None:
        return len(undo), 0
    for i, change in enumerate(undo):
        if change.data_bytes > budget_bytes:
            return i, budget_bytes
        budget_bytes -= change.data_bytes
    return len(undo), 0
