"""Kafka frame bodies: the registry of supported APIs, request decoding, response encoding.

A frame is ``int32 size`` then the body; this module works on bodies (``frames.py`` style: the
caller cuts frames). A request body is a request header (:mod:`.headers`) then the request
struct; a response body is a response header then the response struct. Bodies must be consumed
exactly: trailing bytes are malformed (but for the zero bytes
``Api.trailing_zeros`` lets through, where a known client writes them).

Errors: :class:`KafkaMalformed` for anything that breaks the wire rules (the broker closes the
connection); :class:`KafkaUnsupported` for an unknown api key or a version outside the range
spoken here: the header's fixed part was read, so the caller can answer UNSUPPORTED_VERSION
(``unsupported_version_response`` for ApiVersions) with the right correlation id and go on.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.protocol import native
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka import apis_admin, apis_data, apis_groups, apis_security, headers
from odradek.protocol.kafka.compiler import StructCodec, struct_codec
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
    "served_version_ranges",
    "unsupported_version_response",
]


def _collect(*modules: Any) -> dict[int, Api]:
    found = [v for m in modules for v in vars(m).values() if isinstance(v, Api)]
    return {api.key: api for api in sorted(found, key=lambda a: a.key)}


APIS: Mapping[int, Api] = _collect(apis_data, apis_groups, apis_admin, apis_security)

# The compiled ProduceRequest v3-v9 decoder (protocol/_kafka_produce.c), or None: it returns what
# the generated decoder returns, or raises KafkaMalformed where it does (same inputs).
_produce = native.load("odradek.protocol._kafka_produce")
_NATIVE_PRODUCE_VERSIONS = range(3, 10)


class KafkaUnsupported(UnsupportedVersion):
    """An unknown api key (``known_api`` false) or a version outside the range spoken here."""

    def __init__(
        self, reason: str, *, api_key: int, version: int, correlation_id: int, known_api: bool
    ) -> None:
        super().__init__(reason, api_key=api_key, version=version, correlation_id=correlation_id)
        self.known_api = known_api


def api_version_ranges() -> list[tuple[int, int, int]]:
    """``(api_key, min_version, max_version)`` for every supported API, by key: what the codec
    decodes and encodes, and what the broker advertises in ApiVersions."""
    return [(key, *api.versions) for key, api in APIS.items()]


def served_version_ranges() -> list[tuple[int, int, int]]:
    """``(api_key, min_version, max_version)`` the broker serves; a request outside it but inside
    :func:`api_version_ranges` (Produce v0-v2) decodes, and is refused with UNSUPPORTED_VERSION
    per partition in a response of its own version (the broker's Produce adapter)."""
    return [(key, *(api.served or api.versions)) for key, api in APIS.items()]


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


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one (api, version, direction) needs, looked up once: hashing a layout is slow."""

    api: Api
    codec: StructCodec
    flexible: bool  # the body's encoding, and the request header's version
    header_flexible: bool  # the response header's version (ApiVersions: always v0)
    native_produce: bool = False  # a ProduceRequest body the compiled decoder takes


_PLANS: dict[tuple[int, int, bool], _Plan] = {}


def _plan(api_key: int, version: int, request: bool, correlation_id: int = 0) -> _Plan:
    plan = _PLANS.get((api_key, version, request))
    if plan is None:
        api = _api(api_key, version, correlation_id)
        flexible = api.is_flexible(version)
        codec = struct_codec(api.request if request else api.response, version, flexible)
        header_flexible = flexible and api_key != API_VERSIONS_KEY
        native_produce = (
            _produce is not None
            and request
            and api_key == apis_data.PRODUCE.key
            and version in _NATIVE_PRODUCE_VERSIONS
        )
        plan = _PLANS[(api_key, version, request)] = _Plan(
            api, codec, flexible, header_flexible, native_produce
        )
    return plan


def _decode_body(plan: _Plan, buf: memoryview, pos: int) -> dict[str, Any]:
    if plan.native_produce:
        value, end = _produce.decode_produce(buf, pos, plan.flexible)  # type: ignore[union-attr]
    else:
        value, end = plan.codec.decode(buf, pos)
    if end != len(buf) and (len(buf) - end > plan.api.trailing_zeros or any(buf[end:])):
        raise KafkaMalformed(f"{len(buf) - end} trailing bytes after {plan.api.name}")
    return value


# ---- Requests ----------------------------------------------------------------------------
def decode_request(body: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """A request frame body: its header and its fields (records stay views into ``body``)."""
    buf = memoryview(body)
    fixed = headers.peek_request_header(buf)
    plan = _PLANS.get((fixed[0], fixed[1], True)) or _plan(fixed[0], fixed[1], True, fixed[2])
    try:
        header, pos = headers.decode_request_header(buf, fixed, plan.flexible)
        return header, _decode_body(plan, buf, pos)
    except KafkaMalformed as exc:
        exc.api_key, exc.version, exc.correlation_id = fixed
        raise


def encode_request(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    fields: Mapping[str, Any],
) -> bytes:
    """A request frame body (for tests and clients)."""
    plan = _plan(api_key, version, True, correlation_id)
    out = Out()
    header = RequestHeader(api_key, version, correlation_id, client_id)
    headers.encode_request_header(out, header, plan.flexible)
    plan.codec.encode(out, fields)
    return bytes(out)


# ---- Responses ---------------------------------------------------------------------------
def encode_response_parts(
    api_key: int, version: int, correlation_id: int, fields: Mapping[str, Any]
) -> list[bytes | RecordsSlot]:
    """A response frame body in pieces: encoded bytes, and a :class:`RecordsSlot` wherever a
    ``records`` value was a slot (its length prefix is already in the preceding bytes; the
    caller writes ``slot.size`` bytes in its place, e.g. with sendfile)."""
    plan = _plan(api_key, version, False, correlation_id)
    out = Out()
    headers.encode_response_header(out, correlation_id, plan.header_flexible)
    plan.codec.encode(out, fields)
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
    plan = _plan(api_key, version, False)
    buf = memoryview(body)
    correlation_id, pos = headers.decode_response_header(buf, plan.header_flexible)
    try:
        return correlation_id, _decode_body(plan, buf, pos)
    except KafkaMalformed as exc:
        exc.api_key, exc.version, exc.correlation_id = api_key, version, correlation_id
        raise


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
    out = bytearray(struct.pack(">ihi", correlation_id, ErrorCode.UNSUPPORTED_VERSION, len(ranges)))
    for key, lo, hi in ranges:
        out += _RANGE.pack(key, lo, hi)
    return bytes(out)
