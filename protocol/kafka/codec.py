"""Kafka frame bodies: the registry of supported APIs, request decoding, response encoding.

A frame is ``int32 size`` then the body; this module works on bodies (``frames.py`` style: the
caller cuts frames). A request body is a request header (:mod:`.headers`) then the request
struct; a response body is a response header then the response struct. Bodies must be consumed
exactly: trailing bytes are malformed.

Errors: :class:`KafkaMalformed` for anything that breaks the wire rules (the broker closes the
connection); :class:`KafkaUnsupported` for an unknown api key or a version outside the range
spoken here: the header's fixed part was read, so the caller can answer UNSUPPORTED_VERSION
(``unsupported_version_response`` for ApiVersions) with the right correlation id and go on.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.protocol.kafka import apis_admin, apis_data, apis_groups, headers
from odradek.protocol.kafka.compiler import struct_codec
from odradek.protocol.kafka.headers import API_VERSIONS_KEY, RequestHeader
from odradek.protocol.kafka.primitives import KafkaMalformed
from odradek.protocol.kafka.schema import Api, Out, RecordsSlot
from odradek.protocol.messages.base import UnsupportedVersion

__all__ = [
    "APIS",
    "KafkaUnsupported",
    "api_version_ranges",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "unsupported_version_response",
]

UNSUPPORTED_VERSION = 35


def _collect(*modules: Any) -> dict[int, Api]:
    found = [v for m in modules for v in vars(m).values() if isinstance(v, Api)]
    return {api.key: api for api in sorted(found, key=lambda a: a.key)}


APIS: Mapping[int, Api] = _collect(apis_data, apis_groups, apis_admin)


class KafkaUnsupported(UnsupportedVersion):
    """An unknown api key (``known_api`` false) or a version outside the range spoken here."""

    def __init__(
        self, reason: str, *, api_key: int, version: int, correlation_id: int, known_api: bool
    ) -> None:
        super().__init__(reason, api_key=api_key, version=version, correlation_id=correlation_id)
        self.known_api = known_api


def api_version_ranges() -> list[tuple[int, int, int]]:
    """``(api_key, min_version, max_version)`` for every supported API, by key."""
    return [(key, *api.versions) for key, api in APIS.items()]


def _api(api_key: int, version: int, correlation_id: int = 0) -> Api:
    api = APIS.get(api_key)
    if api is None:
        raise KafkaUnsupported(
            f"unknown api key {api_key}",
            api_key=api_key,
            version=version,
            correlation_id=correlation_id,
            known_api=False,
        )
    lo, hi = api.versions
    if not lo <= version <= hi:
        raise KafkaUnsupported(
            f"{api.name} v{version} is outside v{lo}-v{hi}",
            api_key=api_key,
            version=version,
            correlation_id=correlation_id,
            known_api=True,
        )
    return api


def _decode_body(
    api: Api, version: int, request: bool, buf: memoryview, pos: int
) -> dict[str, Any]:
    flexible = api.is_flexible(version)
    layout = api.request if request else api.response
    try:
        value, end = struct_codec(layout, version, flexible).decode(buf, pos)
    except KafkaMalformed as exc:
        exc.api_key, exc.version = api.key, version
        raise
    if end != len(buf):
        raise KafkaMalformed(
            f"{len(buf) - end} trailing bytes after {api.name} v{version}",
            api_key=api.key,
            version=version,
        )
    return value


# ---- Requests ----------------------------------------------------------------------------
_REQUEST_DECODERS: dict[tuple[int, int], tuple[Api, Any, bool]] = {}


def _request_decoder(api_key: int, version: int, correlation_id: int) -> tuple[Api, Any, bool]:
    api = _api(api_key, version, correlation_id)
    flexible = api.is_flexible(version)
    entry = (api, struct_codec(api.request, version, flexible).decode, flexible)
    _REQUEST_DECODERS[(api_key, version)] = entry
    return entry


def decode_request(body: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """A request frame body: its header and its fields (records stay views into ``body``)."""
    buf = memoryview(body)
    fixed = headers.peek_request_header(buf)
    entry = _REQUEST_DECODERS.get(fixed[:2]) or _request_decoder(*fixed)
    api, decode, flexible = entry
    try:
        header, pos = headers.decode_request_header(buf, fixed, flexible)
        value, end = decode(buf, pos)
        if end != len(buf):
            raise KafkaMalformed(f"{len(buf) - end} trailing bytes after {api.name} v{fixed[1]}")
    except KafkaMalformed as exc:
        exc.api_key, exc.version, exc.correlation_id = fixed
        raise
    return header, value


def encode_request(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    fields: Mapping[str, Any],
) -> bytes:
    """A request frame body (for tests and clients)."""
    api = _api(api_key, version, correlation_id)
    flexible = api.is_flexible(version)
    out = Out()
    headers.encode_request_header(
        out, RequestHeader(api_key, version, correlation_id, client_id), flexible
    )
    struct_codec(api.request, version, flexible).encode(out, fields)
    return bytes(out)


# ---- Responses ---------------------------------------------------------------------------
def _response_header_flexible(api: Api, version: int) -> bool:
    return api.key != API_VERSIONS_KEY and api.is_flexible(version)


def encode_response_parts(
    api_key: int, version: int, correlation_id: int, fields: Mapping[str, Any]
) -> list[bytes | RecordsSlot]:
    """A response frame body in pieces: encoded bytes, and a :class:`RecordsSlot` wherever a
    ``records`` value was a slot (its length prefix is already in the preceding bytes; the
    caller writes ``slot.size`` bytes in its place, e.g. with sendfile)."""
    api = _api(api_key, version, correlation_id)
    flexible = api.is_flexible(version)
    out = Out()
    headers.encode_response_header(out, correlation_id, _response_header_flexible(api, version))
    struct_codec(api.response, version, flexible).encode(out, fields)
    if not out.slots:
        return [bytes(out)]
    parts: list[bytes | RecordsSlot] = []
    view, start = memoryview(out), 0
    for at, slot in out.slots:
        parts += (bytes(view[start:at]), slot)
        start = at
    parts.append(bytes(view[start:]))
    return parts


def encode_response(
    api_key: int, version: int, correlation_id: int, fields: Mapping[str, Any]
) -> bytes:
    """A response frame body, whole (records given as buffers, not slots)."""
    parts = encode_response_parts(api_key, version, correlation_id, fields)
    if len(parts) != 1:
        raise ValueError("records slots need encode_response_parts")
    return parts[0]  # type: ignore[return-value]


def decode_response(
    api_key: int, version: int, body: bytes | bytearray | memoryview
) -> tuple[int, dict[str, Any]]:
    """``(correlation_id, fields)`` of a response frame body (for tests and clients)."""
    api = _api(api_key, version)
    buf = memoryview(body)
    correlation_id, pos = headers.decode_response_header(
        buf, _response_header_flexible(api, version)
    )
    return correlation_id, _decode_body(api, version, False, buf, pos)


_RANGE = struct.Struct(">hhh")


def unsupported_version_response(
    api_key: int, correlation_id: int, supported_ranges: Iterable[tuple[int, int, int]]
) -> bytes:
    """The ApiVersions answer to a version this side does not speak, whatever that version was:
    response header v0, then the v0 body: ``error_code int16 = 35``, ``int32`` count, and per
    API ``api_key, min_version, max_version`` (int16 each). librdkafka reads it, then retries
    with a version from the ranges."""
    if api_key != API_VERSIONS_KEY:
        raise ValueError("only ApiVersions has a version-independent error layout")
    ranges = list(supported_ranges)
    out = bytearray(struct.pack(">ihi", correlation_id, UNSUPPORTED_VERSION, len(ranges)))
    for key, lo, hi in ranges:
        out += _RANGE.pack(key, lo, hi)
    return bytes(out)
