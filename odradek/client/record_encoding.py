"""The pure-Python encoding of a batch's *records section*, for
:class:`~odradek.client.record_buffer.PyRecordBuffer` (see that module; the C buffer encodes
each record as it is appended): one record at a time, varints of 0..32767 from a table built
once.
"""

from __future__ import annotations

from odradek.protocol.varint import encode_varint

__all__ = ["encode_records"]


_TABLE = [encode_varint(n) for n in range(1 << 15)]
_TABLE_LIMIT = len(_TABLE)
_NULL = encode_varint(-1)
_ZERO = b"\x00"
_NO_HEADERS = encode_varint(0)


def encode_records(
    keys: list[bytes | None],
    values: list[bytes | None],
    timestamps: list[int],
    headers: dict[int, list[tuple[str, bytes | None]]],
) -> bytes:
    """The records section of records given as columns (``headers``: index -> headers, for
    the records that have some)."""
    if not values:
        return b""
    base_ts = timestamps[0]
    table = _TABLE
    limit = _TABLE_LIMIT
    null = _NULL
    zero = _ZERO
    no_headers = _NO_HEADERS
    parts: list[bytes] = []
    extend = parts.extend
    for i in range(len(values)):
        key = keys[i]
        value = values[i]
        delta = timestamps[i] - base_ts
        ts_b = table[delta] if 0 <= delta < limit else encode_varint(delta)
        off_b = table[i] if i < limit else encode_varint(i)
        if key is None:
            key_b = null
            key = b""
        else:
            n = len(key)
            key_b = table[n] if n < limit else encode_varint(n)
        if value is None:
            value_b = null
            value = b""
        else:
            n = len(value)
            value_b = table[n] if n < limit else encode_varint(n)
        h = no_headers if i not in headers else _encode_headers(headers[i])
        length = (
            1 + len(ts_b) + len(off_b) + len(key_b) + len(key) + len(value_b) + len(value) + len(h)
        )
        extend(
            (
                table[length] if length < limit else encode_varint(length),
                zero,
                ts_b,
                off_b,
                key_b,
                key,
                value_b,
                value,
                h,
            )
        )
    return b"".join(parts)


def _encode_headers(headers: list[tuple[str, bytes | None]]) -> bytes:
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        key_bytes = key.encode()
        parts += (encode_varint(len(key_bytes)), key_bytes)
        if value is None:
            parts.append(_NULL)
        else:
            parts += (encode_varint(len(value)), value)
    return b"".join(parts)
