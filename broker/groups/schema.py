"""Kafka's schema primitives as ``__consumer_offsets`` and the consumer protocol lay them out.

Every integer is big-endian (``I16``, ``I32``, ``I64``); a ``string`` is an int16 length then
UTF-8 bytes (``-1`` = null, only where the schema allows it); ``bytes`` is an int32 length then
the bytes; an array is an int32 count then the elements. A reader refuses any overrun, a count
larger than the buffer, a string that is not UTF-8 and trailing bytes, as
:class:`RecordFormatError`: a stored record never decodes into garbage.
"""

from __future__ import annotations

import struct

__all__ = ["I16", "I32", "I64", "Reader", "RecordFormatError", "bytes_field", "string_field"]

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not decode under the schema its version names."""


def string_field(text: str | None) -> bytes:
    """A (nullable) string; over the int16 length is a :class:`RecordFormatError`."""
    if text is None:
        return I16.pack(-1)
    data = text.encode()
    if len(data) > 0x7FFF:
        raise RecordFormatError(f"string of {len(data)} bytes exceeds the int16 length")
    return I16.pack(len(data)) + data


def bytes_field(data: bytes) -> bytes:
    """Bytes with their int32 length."""
    return I32.pack(len(data)) + data


class Reader:
    """Reads the primitives above from one buffer; any overrun is a RecordFormatError."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise RecordFormatError(f"record cut short: need {size} bytes at {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def i16(self) -> int:
        return int(I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(I64.unpack(self._take(8))[0])

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.data):
            raise RecordFormatError(f"invalid array length {n}")
        return n

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise RecordFormatError("null where the schema requires a string")
        return text

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self._take(n)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(f"{len(self.data) - self.pos} trailing bytes")
