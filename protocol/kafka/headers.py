"""Kafka request and response headers.

Request header v1: ``api_key int16, api_version int16, correlation_id int32, client_id``
(a *classic* nullable string). v2 = v1 + a tagged-field section; ``client_id`` stays classic.
An API's request uses v2 from its first flexible version on, v1 below it.

Response header v0: ``correlation_id int32``. v1 = v0 + a tagged-field section, used from the
API's first flexible version on, **except ApiVersions, whose response header is always v0** (a
client that does not know the broker's versions yet must be able to read it).

The first 8 bytes of every request header are fixed, so the api key, version and correlation id
can be recovered even from a request this side cannot parse further.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.protocol.kafka import primitives as p
from odradek.protocol.kafka.primitives import KafkaMalformed

__all__ = [
    "API_VERSIONS_KEY",
    "RequestHeader",
    "decode_request_header",
    "decode_response_header",
    "encode_request_header",
    "encode_response_header",
    "peek_request_header",
]

API_VERSIONS_KEY = 18
_FIXED = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")


class RequestHeader(NamedTuple):  # a tuple: built per request, ~4x cheaper than a dataclass
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_request_header(buf: memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the fixed 8 bytes of any request header."""
    if len(buf) < _FIXED.size:
        raise KafkaMalformed(f"request header needs {_FIXED.size} bytes, frame has {len(buf)}")
    return _FIXED.unpack_from(buf, 0)


def decode_request_header(
    buf: memoryview, fixed: tuple[int, int, int], flexible: bool
) -> tuple[RequestHeader, int]:
    """The header (v2 if ``flexible`` else v1), given its fixed part (``peek_request_header``),
    and the position of the body."""
    client_id, pos = p.decode_string(buf, _FIXED.size)
    if flexible:
        pos = p.skip_tagged_fields(buf, pos)
    return RequestHeader(*fixed, client_id), pos


def encode_request_header(out: bytearray, header: RequestHeader, flexible: bool) -> None:
    out += _FIXED.pack(header.api_key, header.api_version, header.correlation_id)
    p.encode_string(out, header.client_id)
    if flexible:
        out += b"\x00"


def encode_response_header(out: bytearray, correlation_id: int, flexible: bool) -> None:
    """v1 if ``flexible`` else v0 (the caller applies ApiVersions' exception)."""
    out += _CORRELATION.pack(correlation_id)
    if flexible:
        out += b"\x00"


def decode_response_header(buf: memoryview, flexible: bool) -> tuple[int, int]:
    """``(correlation_id, body position)``."""
    correlation_id, pos = p.FIXED["int32"][0](buf, 0)
    if flexible:
        pos = p.skip_tagged_fields(buf, pos)
    return correlation_id, pos
