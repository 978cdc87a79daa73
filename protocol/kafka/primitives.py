"""Kafka's wire primitives: one decoder and one encoder per type, sans-I/O.

Rules of the byte stream (Apache Kafka protocol guide, "Protocol Primitive Types"):

* ``int8/16/32/64``, ``uint16``, ``uint32``, ``float64``: fixed width, big-endian (two's
  complement for the signed ones, IEEE 754 for ``float64``). ``bool`` is one byte, 0 = false,
  anything else = true (encoded as 1). ``uuid`` is 16 raw bytes.
* ``uvarint``: unsigned base-128, low group first, at most 5 bytes (a 32-bit value).
  ``varint`` / ``varlong``: the same after zig-zag mapping ``(n << 1) ^ (n >> 31|63)``, at most
  5 / 10 bytes. Message fields never use them but the headers of tagged fields do.
* classic ``string``: int16 length then UTF-8 bytes; -1 = null. classic ``bytes``: int32 length
  then the bytes; -1 = null. classic array: int32 count then the elements; -1 = null.
* compact ``string`` / ``bytes`` / array (flexible versions): uvarint ``length + 1`` then the
  payload; 0 = null.
* tagged fields (flexible versions, at the end of every struct): uvarint count, then per field
  uvarint tag, uvarint size, ``size`` bytes; tags strictly ascending. Unknown tags are skipped.

Decoders take ``(buf, pos)`` (``buf`` a memoryview) and return ``(value, new_pos)``. Every
decoder bounds-checks; anything out of bounds or out of range raises :class:`KafkaMalformed`.
Encoders append to a ``bytearray``. Bytes fields decode to a memoryview into ``buf`` (no copy).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from odradek.protocol.messages.base import MalformedMessage

__all__ = [
    "FIXED",
    "Decoder",
    "Encoder",
    "KafkaMalformed",
    "array_count",
    "compact_array_count",
    "decode_bool",
    "decode_bytes",
    "decode_compact_bytes",
    "decode_compact_string",
    "decode_string",
    "decode_uuid",
    "decode_uvarint",
    "decode_varint",
    "decode_varlong",
    "encode_bool",
    "encode_bytes",
    "encode_compact_bytes",
    "encode_compact_string",
    "encode_string",
    "encode_uuid",
    "encode_uvarint",
    "encode_varint",
    "encode_varlong",
    "skip_tagged_fields",
]

Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[bytearray, Any], None]


class KafkaMalformed(MalformedMessage):
    """A Kafka frame body that breaks the wire rules: the broker closes the connection."""


MAX_UVARINT_BYTES = 5


# ---- Varints -----------------------------------------------------------------------------
def decode_uvarint(
    buf: memoryview, pos: int, max_bytes: int = MAX_UVARINT_BYTES
) -> tuple[int, int]:
    """An unsigned varint of at most ``max_bytes`` bytes."""
    end = len(buf)
    if pos + 3 <= end:  # unrolled for the 1-3 byte lengths every message is made of
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
        value = byte & 0x7F
        byte = buf[pos + 1]
        if byte < 0x80:
            return value | byte << 7, pos + 2
        value |= (byte & 0x7F) << 7
        byte = buf[pos + 2]
        if byte < 0x80:  # max_bytes is 5 or 10: three bytes always fit
            return value | byte << 14, pos + 3
    value = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise KafkaMalformed("varint runs past the end of the frame")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise KafkaMalformed(f"varint longer than {max_bytes} bytes")


_ONE_BYTE = [bytes((i,)) for i in range(128)]


def encode_uvarint(out: bytearray, value: int) -> None:
    if value < 0x80:
        out += _ONE_BYTE[value]
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def decode_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    raw, pos = decode_uvarint(buf, pos, 5)
    if raw > 0xFFFF_FFFF:
        raise KafkaMalformed("varint out of the 32-bit range")
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varint(out: bytearray, value: int) -> None:
    encode_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFF_FFFF)


def decode_varlong(buf: memoryview, pos: int) -> tuple[int, int]:
    raw, pos = decode_uvarint(buf, pos, 10)
    if raw > 0xFFFF_FFFF_FFFF_FFFF:
        raise KafkaMalformed("varlong out of the 64-bit range")
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varlong(out: bytearray, value: int) -> None:
    encode_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF)


# ---- Fixed-width numbers -----------------------------------------------------------------
def _fixed(fmt: str) -> tuple[Decoder, Encoder, struct.Struct]:
    st = struct.Struct(fmt)
    size, unpack_from, pack = st.size, st.unpack_from, st.pack

    def decode(buf: memoryview, pos: int) -> tuple[Any, int]:
        end = pos + size
        if end > len(buf):
            raise KafkaMalformed(f"{fmt} runs past the end of the frame")
        return unpack_from(buf, pos)[0], end

    def encode(out: bytearray, value: Any) -> None:
        try:
            out += pack(value)
        except struct.error as exc:
            raise KafkaMalformed(f"{value!r} does not fit {fmt}") from exc

    return decode, encode, st


# name -> (decoder, encoder, struct)
FIXED: dict[str, tuple[Decoder, Encoder, struct.Struct]] = {
    name: _fixed(fmt)
    for name, fmt in {
        "int8": ">b",
        "int16": ">h",
        "int32": ">i",
        "int64": ">q",
        "uint16": ">H",
        "uint32": ">I",
        "float64": ">d",
    }.items()
}
_INT16 = FIXED["int16"][2]
_INT32 = FIXED["int32"][2]
_unpack_int16 = _INT16.unpack_from
_unpack_int32 = _INT32.unpack_from


def decode_bool(buf: memoryview, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise KafkaMalformed("bool runs past the end of the frame")
    return buf[pos] != 0, pos + 1


def encode_bool(out: bytearray, value: bool) -> None:
    out += b"\x01" if value else b"\x00"


def decode_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise KafkaMalformed("uuid runs past the end of the frame")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def encode_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


# ---- Strings and bytes -------------------------------------------------------------------
def _payload(buf: memoryview, pos: int, length: int, what: str) -> tuple[memoryview, int]:
    end = pos + length
    if end > len(buf):
        raise KafkaMalformed(f"{what} of {length} bytes runs past the end of the frame")
    return buf[pos:end], end


def _text(raw: memoryview) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise KafkaMalformed("string is not UTF-8") from exc


def decode_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    if pos + 2 > len(buf):
        raise KafkaMalformed("string length runs past the end of the frame")
    (length,) = _unpack_int16(buf, pos)
    pos += 2
    if length < 0:
        if length != -1:
            raise KafkaMalformed(f"negative string length {length}")
        return None, pos
    raw, pos = _payload(buf, pos, length, "string")
    return _text(raw), pos


def decode_compact_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    length, pos = decode_uvarint(buf, pos)
    if length == 0:
        return None, pos
    raw, pos = _payload(buf, pos, length - 1, "string")
    return _text(raw), pos


def encode_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise KafkaMalformed("string longer than 32767 bytes")
    out += _INT16.pack(len(raw))
    out += raw


def encode_compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\x00"
        return
    raw = value.encode()
    encode_uvarint(out, len(raw) + 1)
    out += raw


def decode_bytes(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    if pos + 4 > len(buf):
        raise KafkaMalformed("bytes length runs past the end of the frame")
    (length,) = _unpack_int32(buf, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise KafkaMalformed(f"negative bytes length {length}")
        return None, pos
    end = pos + length
    if end > len(buf):
        raise KafkaMalformed(f"bytes of {length} bytes run past the end of the frame")
    return buf[pos:end], end


def decode_compact_bytes(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    length, pos = decode_uvarint(buf, pos)
    if length == 0:
        return None, pos
    return _payload(buf, pos, length - 1, "bytes")


def encode_bytes(out: bytearray, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += _INT32.pack(len(value))
    out += value


def encode_compact_bytes(out: bytearray, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        out += b"\x00"
        return
    encode_uvarint(out, len(value) + 1)
    out += value


# ---- Arrays and tagged fields ------------------------------------------------------------
def _check_count(buf: memoryview, pos: int, count: int) -> int:
    # every element takes at least one byte: a count beyond the bytes left is a lie
    if count > len(buf) - pos:
        raise KafkaMalformed(f"array count {count} exceeds the {len(buf) - pos} bytes left")
    return count


def array_count(buf: memoryview, pos: int) -> tuple[int, int]:
    """A classic array's element count; -1 = null."""
    count, pos = FIXED["int32"][0](buf, pos)
    if count < 0:
        if count != -1:
            raise KafkaMalformed(f"negative array count {count}")
        return -1, pos
    return _check_count(buf, pos, count), pos


def compact_array_count(buf: memoryview, pos: int) -> tuple[int, int]:
    """A compact array's element count; -1 = null."""
    raw, pos = decode_uvarint(buf, pos)
    return (-1 if raw == 0 else _check_count(buf, pos, raw - 1)), pos


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip a whole tagged-field section (count, then tag/size/bytes per field)."""
    count, pos = decode_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = decode_uvarint(buf, pos)
        size, pos = decode_uvarint(buf, pos)
        _raw, pos = _payload(buf, pos, size, "tagged field")
    return pos
