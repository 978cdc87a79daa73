"""The power-cut file system: a FUSE passthrough over a backing directory, on ``mfusepy``.

Run as its own process (:mod:`tests.powercut.mount` starts it)::

    python -m tests.powercut.fs BACKING GRAVEYARD MOUNTPOINT JOURNAL_OUT

**Trip wire** (a targeted cut): write ``{"kind": K, "glob": G, "skip": N, "report": PATH}`` to
``<JOURNAL_OUT>.trip`` and send the process SIGUSR1. From then on, the ``N+1``-th change of kind
``K`` (``create``, ``mkdir``, ``write``, ``truncate``, ``rename``, ``unlink``, ``rmdir``,
``fsync``, ``fsyncdir`` or ``*``) whose path (for a rename: either path) matches the glob
``G`` is applied, and then the process that asked for it is SIGKILLed before it gets the answer:
the power goes out right after that step. ``PATH`` gets one JSON line naming what tripped.
With ``"then": K2`` in the spec, that match only arms a second wire: the next change of kind
``K2`` to the same file trips (the first append to a segment just created, say).

Every change goes to ``BACKING`` through a :class:`~tests.powercut.journal.Journal`, which
remembers what is not durable yet. When the file system is unmounted the process pickles the
journal to ``JOURNAL_OUT`` and exits; the test then rewinds the backing directory
(:meth:`Journal.rewind`) or discards the journal (a clean stop: nothing to take back).

Choices that let the broker run unchanged on it:

1. No ``direct_io``: reads and writes go through the kernel's page cache for this mount, so
   ``mmap`` (the indexes) and ``os.sendfile`` (fetches) work. The page cache here is write-through
   to this process (no ``writeback_cache``): a ``write`` returns once the backing file has it, and
   dirty ``mmap`` pages arrive as ``write`` calls when the kernel writes them back (``msync``,
   ``munmap``, at the latest at unmount). All of them are pending until an ``fsync``.
2. ``hard_remove``: an unlinked file that is still open is unlinked at once (the journal moves it
   to the graveyard), not renamed to ``.fuse_hidden*``; later calls on it come with no path, so
   every open file is found by its handle.
3. One thread (``nothreads``): the journal's order is the order the kernel sent the requests.
4. ``flock``/``fcntl`` locks are not implemented here, so the kernel keeps them locally, which is
   all one broker process needs (``.lock``). Hard links and symlinks are refused (EPERM).
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import pickle
import signal
import sys
from pathlib import Path
from typing import Any

import mfusepy

from tests.powercut.journal import Journal

__all__ = ["PowerCutFS", "main"]

_STAT_FIELDS = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_blocks", "st_ino")


def _errors(method: Any) -> Any:
    """Turn an ``OSError`` from the backing file system into the FUSE error it names."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except OSError as exc:
            raise mfusepy.FuseOSError(exc.errno or errno.EIO) from None

    wrapper.__name__ = method.__name__
    return wrapper


class PowerCutFS(mfusepy.Operations):
    """Passthrough operations that journal every change (module docstring)."""

    use_ns = True

    def __init__(self, journal: Journal, trip_path: Path | None = None) -> None:
        self.journal = journal
        self.node_of: dict[int, int] = {}  # open handle (a backing descriptor) -> journal node
        self.trip_path = trip_path
        self.trip: dict[str, Any] | None = None

    def arm(self) -> None:
        """Load the trip wire (SIGUSR1; runs between two operations, on the one thread)."""
        if self.trip_path is not None:
            self.trip = json.loads(self.trip_path.read_text())

    def _tripped(self, kind: str, *paths: str | None) -> None:
        trip = self.trip
        if trip is None or trip["kind"] not in ("*", kind):
            return
        if not any(p and fnmatch.fnmatch(p.lstrip("/"), trip["glob"]) for p in paths):
            return
        if trip["skip"] > 0:
            trip["skip"] -= 1
            return
        if trip.get("then"):  # a second step on the same file: that one trips
            trip.update(kind=trip.pop("then"), glob=next(p for p in paths if p).lstrip("/"))
            return
        self.trip = None
        pid = mfusepy.fuse_get_context()[2]
        os.kill(pid, signal.SIGKILL)
        with open(trip["report"], "a") as f:
            f.write(json.dumps({"kind": kind, "paths": [p for p in paths if p]}) + "\n")

    # -- metadata ----------------------------------------------------------------------------

    @_errors
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None and path is None else os.lstat(self.journal.real(path))
        attrs = {k: getattr(st, k) for k in _STAT_FIELDS}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return attrs

    @_errors
    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self.journal.real(path))]

    @_errors
    def statfs(self, path: str) -> dict[str, Any]:
        sv = os.statvfs(self.journal.real(path))
        names = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree")
        return {k: getattr(sv, k) for k in (*names, "f_favail", "f_flag", "f_namemax")}

    @_errors
    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self.journal.real(path), mode)
        return 0

    @_errors
    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self.journal.real(path), uid, gid)
        return 0

    @_errors
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self.journal.real(path), ns=times) if times else os.utime(self.journal.real(path))
        return 0

    def link(self, target: str, source: str) -> int:
        raise mfusepy.FuseOSError(errno.EPERM)

    def symlink(self, target: str, source: str) -> int:
        raise mfusepy.FuseOSError(errno.EPERM)

    # -- directory entries -------------------------------------------------------------------

    @_errors
    def create(self, path: str, mode: int, flags: int = os.O_RDWR) -> int:
        node, fd = self.journal.create(path, mode, flags | os.O_CLOEXEC)
        self.node_of[fd] = node
        self._tripped("create", path)
        return fd

    @_errors
    def mkdir(self, path: str, mode: int) -> int:
        self.journal.mkdir(path, mode)
        self._tripped("mkdir", path)
        return 0

    @_errors
    def unlink(self, path: str) -> int:
        self.journal.unlink(path)
        self._tripped("unlink", path)
        return 0

    @_errors
    def rmdir(self, path: str) -> int:
        self.journal.rmdir(path)
        self._tripped("rmdir", path)
        return 0

    @_errors
    def rename(self, old: str, new: str) -> int:
        self.journal.rename(old, new)
        self._tripped("rename", old, new)
        return 0

    @_errors
    def opendir(self, path: str) -> int:
        self.journal.node(path)
        return 0

    @_errors
    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self.journal.fsync_dir(path)
        self._tripped("fsyncdir", path)
        return 0

    # -- file data ---------------------------------------------------------------------------

    @_errors
    def open(self, path: str, flags: int) -> int:
        node = self.journal.node(path)
        fd = os.open(self.journal.real(path), (flags & ~os.O_TRUNC) | os.O_CLOEXEC)
        self.node_of[fd] = node
        if flags & os.O_TRUNC:  # the kernel normally sends a truncate instead
            self.journal.truncate(node, 0, fd)
        return fd

    @_errors
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    @_errors
    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        written = self.journal.write(self.node_of[fh], fh, data, offset)
        self._tripped("write", path)
        return written

    @_errors
    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        if fh is not None and fh in self.node_of:
            self.journal.truncate(self.node_of[fh], length, fh)
        else:
            self.journal.truncate(self.journal.node(path or ""), length)
        self._tripped("truncate", path)
        return 0

    @_errors
    def fsync(self, path: str, datasync: int, fh: int) -> int:
        # Not passed through: durability is what the journal says, and the backing directory
        # is a test's scratch space (its own fsyncs would only slow the runs down).
        self.journal.fsync_file(self.node_of[fh])
        self._tripped("fsync", path)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    @_errors
    def release(self, path: str, fh: int) -> int:
        self.node_of.pop(fh, None)
        os.close(fh)
        return 0


def main(argv: list[str]) -> int:
    backing, graveyard, mountpoint, journal_out = (Path(a) for a in argv)
    journal = Journal(backing, graveyard)
    operations = PowerCutFS(journal, journal_out.with_name(journal_out.name + ".trip"))
    signal.signal(signal.SIGUSR1, lambda signum, frame: operations.arm())
    try:
        mfusepy.FUSE(
            operations,
            str(mountpoint),
            foreground=True,
            nothreads=True,
            hard_remove=True,
            fsname="powercut",
        )
    finally:
        tmp = journal_out.with_name(journal_out.name + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(journal, f)
        os.replace(tmp, journal_out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
