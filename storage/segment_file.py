"""A segment's ``.log`` descriptor, shared by its segment and the reads and sends that use it.

A fetch response's bytes leave with ``os.sendfile(socket, fd, ...)`` over many event-loop turns.
If the segment's file were closed meanwhile (DeleteTopics, retention after
``file.delete.delay.ms``, a log dir going offline), its descriptor number would be free for the
next ``open`` of any file, and the rest of the send would read *that* file: another topic's
records. So the descriptor is shared with a count of holders:

1. A reader calls :meth:`SegmentFile.hold` before it uses the descriptor across a wait (a send)
   and :meth:`SegmentFile.release` when done. ``hold`` raises :class:`SegmentClosedError` once
   the file was closed.
2. The owner's :meth:`SegmentFile.close` (the segment's: deletion, shutdown, offline) marks the
   file closed at once; the descriptor itself is closed by whichever of ``close`` and the last
   ``release`` comes last, exactly once. A held descriptor of an unlinked file keeps its inode
   and its bytes readable: a send in progress finishes with the bytes it started with.
3. :meth:`fileno` of a closed file raises ``ValueError`` (as ``io.FileIO`` does), even while a
   holder still uses the descriptor: only holders may use it then.
4. A file that becomes garbage unclosed (a segment whose constructor failed after opening it)
   closes its descriptor when collected, as ``io.FileIO`` does. A held file is never garbage:
   its holders' regions reference it.

Threads, without a lock (storage uses none): holds are one-element appends to and pops from a
list, each atomic under the GIL, so concurrent holders in several threads never lose a count.
``close`` writes the mark, then reads the count; ``release`` pops, then reads the mark: in every
interleaving at least one of them sees both, and the descriptor number lives in a one-element
list whose ``pop`` hands it to exactly one of them.
"""

from __future__ import annotations

import contextlib
import os
from typing import NamedTuple

from odradek.storage.errors import SegmentClosedError

__all__ = ["FileRegion", "SegmentFile"]


class SegmentFile:
    """An open descriptor closed only when its owner closed it and nobody holds it."""

    __slots__ = ("_closed", "_fd", "_holds", "name")

    def __init__(self, fd: int, name: str) -> None:
        self._fd = [fd]  # emptied (atomically) by the one call that closes the descriptor
        self._holds: list[None] = []  # one item per hold
        self._closed = False
        self.name = name  # for error messages: the path the file was opened under

    @property
    def closed(self) -> bool:
        """The owner closed it (the descriptor may stay open until the last release)."""
        return self._closed

    @property
    def holders(self) -> int:
        return len(self._holds)

    def fileno(self) -> int:
        if self._closed:
            raise ValueError(f"I/O operation on closed segment file {self.name}")
        return self._fd[0]

    def held_fileno(self) -> int:
        """The descriptor, for a caller that holds the file: valid until its release, even
        after :meth:`close`."""
        if not self._holds:
            raise ValueError(f"segment file {self.name} is not held")
        return self._fd[0]

    def hold(self) -> int:
        """Keep the descriptor open until :meth:`release`; returns it."""
        self._holds.append(None)
        if self._closed:
            self.release()
            raise SegmentClosedError(
                f"segment file {self.name} was closed: its partition was deleted or went offline"
            )
        return self._fd[0]

    def release(self) -> None:
        """Give back one :meth:`hold`; the last one closes a file its owner closed."""
        self._holds.pop()
        if self._closed and not self._holds:
            self._close_descriptor()

    def close(self) -> None:
        """The owner is done (idempotent): the descriptor closes now, or at the last release."""
        self._closed = True
        if not self._holds:
            self._close_descriptor()

    def _close_descriptor(self) -> None:
        try:
            fd = self._fd.pop()
        except IndexError:
            return  # the other side of a close/release race closed it
        os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # a finalizer must not raise (interpreter exit)
            self._close_descriptor()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"SegmentFile({self.name}, {state}, holders={len(self._holds)})"


class FileRegion(NamedTuple):
    """Bytes ``[position, position + length)`` of a segment file, for ``os.sendfile``.

    Whoever sends it across waits must ``file.hold()`` it first and ``file.release()`` it
    after: a held file stays open (and its bytes readable) even if the segment is deleted and
    closed meanwhile (the rules at the top of this module).
    """

    file: SegmentFile
    position: int
    length: int
