"""Zig-zag varints as Kafka's record format uses them (protobuf style, little-endian base 128).

A value ``n`` is zig-zag mapped to ``(n << 1) ^ (n >> 63)`` so small negative numbers stay short,
then written seven bits per byte, low group first, with the high bit set on every byte but the
last. ``varint`` fields are 32-bit and take at most 5 bytes; ``varlong`` fields take at most 10.

Encoding of the values a record batch is made of (lengths, offset deltas, small timestamp deltas)
goes through a precomputed table, so the hot path is one list index per field.
"""

from __future__ import annotations

__all__ = [
    "MAX_VARINT_BYTES",
    "MAX_VARLONG_BYTES",
    "VARINT_TRUNCATED",
    "VarintError",
    "decode_varint",
    "encode_varint",
    "encoded_size",
]

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

VARINT_TRUNCATED = "varint runs past the end of the buffer"  # VarintError's message

_TABLE_LIMIT = 1 << 16  # signed values in [-limit, limit) are precomputed


class VarintError(ValueError):
    """A varint ran past the end of its buffer or past its maximum length."""


def _encode_slow(value: int) -> bytes:
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _zigzag_table(limit: int) -> list[bytes]:
    """The LEB128 bytes of every zig-zag value below ``limit`` (at most 2**21: three bytes),
    built from byte groups in value order (low 7 bits vary fastest) — not a loop per value:
    the tables cost ~5 ms at import instead of ~80 ms."""
    assert limit <= 1 << 21
    last = [bytes((b,)) for b in range(128)]  # a final byte
    cont = [bytes((b | 0x80,)) for b in range(128)]  # a continued byte
    two = [c + h for h in last[1:] for c in cont]  # 128 .. 2**14 - 1
    pairs = [c + m for m in cont for c in cont]  # the two continued bytes, in value order
    three = [p + h for h in last[1 : (limit >> 14) + 1] for p in pairs]  # 2**14 ..
    return (last + two + three)[:limit]


# _POSITIVE[n] is the encoding of n (zig-zag 2n); _NEGATIVE[n] of -n (zig-zag 2n - 1).
_ZIGZAG = _zigzag_table(2 * _TABLE_LIMIT + 2)
_POSITIVE: list[bytes] = _ZIGZAG[0 : 2 * _TABLE_LIMIT : 2]
_NEGATIVE: list[bytes] = [b"\x00", *_ZIGZAG[1 : 2 * _TABLE_LIMIT + 1 : 2]]  # [0] unused
del _ZIGZAG


def encode_varint(value: int) -> bytes:
    """The zig-zag varint encoding of ``value`` (valid for varint and varlong fields)."""
    if 0 <= value < _TABLE_LIMIT:
        return _POSITIVE[value]
    if -_TABLE_LIMIT <= value < 0:
        return _NEGATIVE[-value]
    return _encode_slow(value)


def encoded_size(value: int) -> int:
    """How many bytes :func:`encode_varint` writes for ``value``."""
    return len(encode_varint(value))


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode one zig-zag varint/varlong at ``buf[pos]``; returns ``(value, next_pos)``.

    Raises :class:`VarintError` if the buffer ends first or the encoding is longer than
    ten bytes (the longest a 64-bit value needs).
    """
    try:
        byte = buf[pos]
        if byte < 0x80:  # one byte: the common case for lengths and deltas
            return (byte >> 1) ^ -(byte & 1), pos + 1
        result = byte & 0x7F
        shift = 7
        pos += 1
        while True:
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
            if shift >= 7 * MAX_VARLONG_BYTES:
                raise VarintError(f"varint longer than {MAX_VARLONG_BYTES} bytes")
    except IndexError:
        raise VarintError(VARINT_TRUNCATED) from None
