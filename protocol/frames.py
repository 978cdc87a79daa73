"""Length-prefixed framing, sans-I/O: bytes in, complete frame bodies out.

Layout of one frame on the wire::

    offset size    field
    0      4       length    uint32, big-endian: bytes in the body (the prefix not counted)
    4      length  body      see protocol.messages for what a body holds

Rules:

1. ``length`` must be at least 1 and at most the decoder's ``max_frame_bytes``
   (``socket.request.max.bytes`` on the broker). A zero length raises :class:`MalformedFrame`,
   a larger one raises :class:`FrameTooLarge`; both are raised by :meth:`FrameDecoder.feed` as
   soon as the four prefix bytes have been seen, before any byte of that body is buffered.
2. After a :class:`FrameError` the decoder is dead: ``feed`` raises the same error again, and
   ``next_frame`` hands out the frames that were complete before the bad prefix, then raises
   it. A caller that closes the connection on any ``FrameError`` is always correct.
3. Memory is bounded: the decoder holds the complete frames not yet taken, plus at most one
   partial body, which grows only as its bytes arrive (a prefix alone allocates nothing), up to
   ``max_frame_bytes``. Feed it one ``recv`` worth at a time and drain it with ``next_frame``.
4. Feeding a stream in any split (one byte at a time, or many frames per chunk) yields the same
   frames. :meth:`FrameDecoder.end_of_stream` says whether the peer stopped mid-frame.
5. Frames are handed out as ``bytes``. One that arrives whole in one chunk is sliced out of
   it (one copy). The pieces of one that spans chunks are kept and joined once, when the last
   piece arrives: views of ``bytes`` chunks, which cannot change (one copy in all), or copies
   of any other buffer, which the caller may reuse (two). A kept view holds its whole chunk,
   so a partial body holds at most one chunk more than rule 3's bytes.

Protocol preface: a native client writes :data:`NATIVE_PREFACE` once, right after it connects
and before its first frame. Read as a length prefix it is 0xFF6F646B, above
``MAX_FRAME_BYTES_LIMIT`` (Kafka sizes are int32, so no legal Kafka request starts with it):
a broker that also speaks Kafka's protocol on the same port tells the two apart from the first
four bytes of a connection (docs/protocol.md §1). The decoder itself never sees the preface.

Senders never need to concatenate a large body: ``frame_prefix(len(header) + len(raw))``
followed by the header and the raw bytes (a vectored write, or ``os.sendfile`` for the raw part)
is a valid frame. :func:`encode_frame` is the convenience for small frames.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Iterator

__all__ = [
    "FRAME_PREFIX_BYTES",
    "MAX_FRAME_BYTES_LIMIT",
    "NATIVE_PREFACE",
    "Buffer",
    "FrameDecoder",
    "FrameError",
    "FrameTooLarge",
    "MalformedFrame",
    "byte_views",
    "drop_sent",
    "encode_frame",
    "frame_prefix",
]

Buffer = bytes | bytearray | memoryview

FRAME_PREFIX_BYTES = 4
MAX_FRAME_BYTES_LIMIT = 0x7FFF_FFFF  # Kafka sizes are int32; no frame may claim more
_PREFIX = struct.Struct(">I")
NATIVE_PREFACE = b"\xffodk"  # "odk": odradek; 0xFF: no int32 size starts with it


class FrameError(Exception):
    """The byte stream broke the framing or message rules (see docs/protocol.md, section 6)."""


class FrameTooLarge(FrameError):
    """A length prefix above the decoder's ``max_frame_bytes``."""

    def __init__(self, length: int, max_frame_bytes: int) -> None:
        self.length = length
        self.max_frame_bytes = max_frame_bytes
        super().__init__(
            f"frame of {length} bytes exceeds the limit of {max_frame_bytes} bytes "
            "(socket.request.max.bytes)"
        )


class MalformedFrame(FrameError):
    """A zero length prefix, or a stream that ended in the middle of a frame."""


def frame_prefix(body_len: int) -> bytes:
    """The 4-byte length prefix for a body of ``body_len`` bytes (1 .. 2**31 - 1)."""
    if not 0 < body_len <= MAX_FRAME_BYTES_LIMIT:
        raise ValueError(f"frame body length {body_len} is outside 1..{MAX_FRAME_BYTES_LIMIT}")
    return _PREFIX.pack(body_len)


def encode_frame(*parts: Buffer) -> bytes:
    """One complete frame whose body is the concatenation of ``parts``."""
    body_len = sum(memoryview(part).nbytes for part in parts)
    return b"".join([frame_prefix(body_len), *parts])


def byte_views(parts: Iterable[Buffer]) -> list[memoryview]:
    """Byte views of the non-empty ``parts``, for vectored writes (``sendmsg``)."""
    return [memoryview(p).cast("B") for p in parts if len(p)]


def drop_sent(views: list[memoryview], sent: int) -> None:
    """Remove the first ``sent`` bytes from ``views`` in place (after a partial write)."""
    while sent:
        head = views[0]
        if sent >= len(head):
            sent -= len(head)
            views.pop(0)
        else:
            views[0] = head[sent:]
            sent = 0


def _byte_view(data: Buffer) -> memoryview:
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class FrameDecoder:
    """Split a byte stream into frame bodies. Holds no socket; see the module docstring."""

    __slots__ = ("_error", "_filled", "_frames", "_need", "_pieces", "_prefix", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        if not 0 < max_frame_bytes <= MAX_FRAME_BYTES_LIMIT:
            raise ValueError(
                f"max_frame_bytes {max_frame_bytes} is outside 1..{MAX_FRAME_BYTES_LIMIT}"
            )
        self.max_frame_bytes = max_frame_bytes
        self._frames: deque[bytes] = deque()
        self._prefix = bytearray()  # a partial length prefix (0..3 bytes)
        self._pieces: list[Buffer] | None = None  # the partial body, once its prefix is known
        self._filled = 0  # bytes in those pieces
        self._need = 0  # the length of that body
        self._error: FrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes held: complete frames not yet taken plus the partial prefix and body."""
        return sum(map(len, self._frames)) + len(self._prefix) + self._filled

    @property
    def mid_frame(self) -> bool:
        """Whether part of a frame (prefix or body) has arrived but not all of it."""
        return self._pieces is not None or bool(self._prefix)

    def feed(self, data: Buffer) -> None:
        """Take the next bytes of the stream. Raises :class:`FrameError` on a bad prefix."""
        if self._error is not None:
            raise self._error
        view = _byte_view(data)
        keep = type(view.obj) is bytes  # immutable: pieces of it are kept without a copy
        end = len(view)
        pos = 0
        frames = self._frames
        while pos < end:
            pieces = self._pieces
            if pieces is not None:  # continue a partial body
                take = min(self._need - self._filled, end - pos)
                piece = view[pos : pos + take]
                pieces.append(piece if keep else bytes(piece))
                pos += take
                self._filled += take
                if self._filled == self._need:
                    frames.append(b"".join(pieces))
                    self._pieces = None
                    self._filled = 0
                continue
            if not self._prefix and end - pos >= FRAME_PREFIX_BYTES:
                (length,) = _PREFIX.unpack_from(view, pos)
                pos += FRAME_PREFIX_BYTES
            else:
                take = min(FRAME_PREFIX_BYTES - len(self._prefix), end - pos)
                self._prefix += view[pos : pos + take]
                pos += take
                if len(self._prefix) < FRAME_PREFIX_BYTES:
                    break
                (length,) = _PREFIX.unpack(self._prefix)
                self._prefix.clear()
            self._check_length(length)
            if end - pos >= length:  # the whole body is in this chunk: one copy
                frames.append(bytes(view[pos : pos + length]))
                pos += length
            else:
                self._pieces = []
                self._need = length

    def _check_length(self, length: int) -> None:
        error: FrameError | None = None
        if length == 0:
            error = MalformedFrame("zero-length frame")
        elif length > self.max_frame_bytes:
            error = FrameTooLarge(length, self.max_frame_bytes)
        if error is not None:
            self._error = error
            self._prefix.clear()
            self._pieces = None
            self._filled = 0
            raise error

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or ``None`` until more bytes arrive."""
        if self._frames:
            return self._frames.popleft()
        if self._error is not None:
            raise self._error
        return None

    def __iter__(self) -> Iterator[bytes]:
        """Drain the complete frames available now."""
        while (frame := self.next_frame()) is not None:
            yield frame

    def end_of_stream(self) -> None:
        """The peer closed the stream: raise :class:`MalformedFrame` if it stopped mid-frame."""
        if self._pieces is not None:
            raise MalformedFrame(
                f"stream ended {self._filled} bytes into a {self._need}-byte frame"
            )
        if self._prefix:
            raise MalformedFrame(
                f"stream ended after {len(self._prefix)} of {FRAME_PREFIX_BYTES} length bytes"
            )
