"""The registry of message types and the frame-body codec (layout: see the package doc)."""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Union

import msgspec
from msgspec import Struct

from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import MAX_FRAME_BYTES_LIMIT, Buffer

# The message modules must all be imported before the registry below is built.
from odradek.protocol.messages import admin, data, groups, security  # noqa: F401
from odradek.protocol.messages.admin import (
    ApiVersionRange,
)
from odradek.protocol.messages.base import (
    ACKS_NONE,
    ApiKey,
    MalformedMessage,
    Message,
    Request,
    Response,
    UnsupportedVersion,
)
from odradek.protocol.messages.data import (
    FetchPartitionResponse,
    FetchResponse,
    ProducePartitionData,
    ProduceRequest,
)
from odradek.protocol.messages.limits import MAX_STRING_BYTES, oversized_string


# ---- Registry ----------------------------------------------------------------------------
def _by_tag(base: type[Message]) -> dict[ApiKey, type]:
    found = {ApiKey(cls.__struct_config__.tag): cls for cls in base.__subclasses__()}
    return dict(sorted(found.items()))


REQUEST_TYPES: Mapping[ApiKey, type[Request]] = _by_tag(Request)
RESPONSE_TYPES: Mapping[ApiKey, type[Response]] = _by_tag(Response)
SUPPORTED_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {key: (0, 0) for key in ApiKey}


def supported_api_versions() -> list[ApiVersionRange]:
    """The body of an ApiVersions response."""
    return [
        ApiVersionRange(api_key=key, min_version=lo, max_version=hi)
        for key, (lo, hi) in SUPPORTED_VERSIONS.items()
    ]


_API_KEY_OF: dict[type, ApiKey] = {
    cls: key for types in (REQUEST_TYPES, RESPONSE_TYPES) for key, cls in types.items()
}


def api_key_of(msg: Message) -> ApiKey:
    """The api of a request or response (a dict lookup: building the enum costs ~1 µs)."""
    key = _API_KEY_OF.get(type(msg))
    return ApiKey(msg.__struct_config__.tag) if key is None else key


def expects_response(request: Request) -> bool:
    """Whether the broker answers: every request but a Produce with ``acks=0``."""
    return not (isinstance(request, ProduceRequest) and request.acks == ACKS_NONE)


def error_response(
    api_key: int,
    correlation_id: int,
    error_code: ErrorCode,
    error_message: str | None = None,
    version: int = 0,
) -> Response:
    """A response of ``api_key``'s type carrying only a top-level error."""
    cls = RESPONSE_TYPES[ApiKey(api_key)]
    return cls(
        version=version,
        correlation_id=correlation_id,
        error_code=int(error_code),
        error_message=error_message,
    )


def record_sections(
    msg: ProduceRequest | FetchResponse, raw: Buffer
) -> Iterator[tuple[str, ProducePartitionData | FetchPartitionResponse, memoryview]]:
    """``(topic, partition item, its record bytes)`` in header order, slicing the raw tail."""
    view = memoryview(raw)
    pos = 0
    for topic in msg.topics:
        for part in topic.partitions:
            end = pos + part.records_bytes
            yield topic.name, part, view[pos:end]
            pos = end


# ---- Codec -------------------------------------------------------------------------------
HEADER_LENGTH_BYTES = 4
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_HEAD = struct.Struct(">II")  # frame length, header length
_HEADER_LENGTH = struct.Struct(">I")
_ENCODER = msgspec.msgpack.Encoder()
_REQUEST_DECODER = msgspec.msgpack.Decoder(Union[tuple(REQUEST_TYPES.values())])  # noqa: UP007
_RESPONSE_DECODER = msgspec.msgpack.Decoder(Union[tuple(RESPONSE_TYPES.values())])  # noqa: UP007


class _Envelope(Struct, array_like=True):
    """The first three header fields of any message; used only to explain a failed decode."""

    api_key: int
    version: int
    correlation_id: int


_ENVELOPE_DECODER = msgspec.msgpack.Decoder(_Envelope)


def _raw_parts(raw: Buffer | Sequence[Buffer]) -> list[Buffer]:
    if isinstance(raw, bytes | bytearray | memoryview):
        return [raw] if raw else []
    return [part for part in raw if part]


def encode_head(msg: Message, raw_bytes: int = 0) -> bytes:
    """Frame prefix + header length + header, for a body whose raw tail of ``raw_bytes`` the
    caller writes itself (``os.sendfile`` for a Fetch response). ``raw_bytes`` must equal the
    lengths the header declares."""
    declared = msg.declared_raw_bytes()
    if raw_bytes != declared:
        raise ValueError(
            f"{type(msg).__name__} declares {declared} raw bytes but {raw_bytes} are supplied"
        )
    header = _ENCODER.encode(msg)
    frame_len = HEADER_LENGTH_BYTES + len(header) + raw_bytes
    if frame_len > MAX_FRAME_BYTES_LIMIT:
        raise ValueError(f"{type(msg).__name__} frame of {frame_len} bytes is too large")
    return _HEAD.pack(frame_len, len(header)) + header


def _encode(msg: Message, raw: Buffer | Sequence[Buffer]) -> list[Buffer]:
    parts = _raw_parts(raw)
    return [encode_head(msg, sum(memoryview(p).nbytes for p in parts)), *parts]


def encode_request(msg: Request, raw: Buffer | Sequence[Buffer] = b"") -> list[Buffer]:
    """The frame for ``msg`` as parts for a vectored write: ``[prefix+header, *raw]``.

    ``raw`` (one buffer or one per partition) is the Produce records, in header order.
    """
    if not isinstance(msg, Request):
        raise TypeError(f"{type(msg).__name__} is not a request")
    return _encode(msg, raw)


def encode_response(msg: Response, raw: Buffer | Sequence[Buffer] = b"") -> list[Buffer]:
    """The frame for ``msg`` as parts for a vectored write; ``raw`` is the Fetch records."""
    if not isinstance(msg, Response):
        raise TypeError(f"{type(msg).__name__} is not a response")
    return _encode(msg, raw)


def decode_request(body: Buffer) -> tuple[Request, memoryview]:
    """Decode one frame body from a client: the request and its raw tail (Produce records)."""
    return _decode(body, _REQUEST_DECODER, REQUEST_TYPES, "request")  # type: ignore[return-value]


def decode_response(body: Buffer) -> tuple[Response, memoryview]:
    """Decode one frame body from the broker: the response and its raw tail (Fetch records)."""
    return _decode(body, _RESPONSE_DECODER, RESPONSE_TYPES, "response")  # type: ignore[return-value]


def _decode(
    body: Buffer,
    decoder: msgspec.msgpack.Decoder,
    types: Mapping[ApiKey, type[Message]],
    kind: str,
) -> tuple[Message, memoryview]:
    view = memoryview(body)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    size = len(view)
    if size < HEADER_LENGTH_BYTES:
        raise MalformedMessage(f"{kind} body of {size} bytes has no header length")
    (header_len,) = _HEADER_LENGTH.unpack_from(view, 0)
    if not 0 < header_len <= size - HEADER_LENGTH_BYTES:
        raise MalformedMessage(
            f"{kind} header length {header_len} does not fit a body of {size} bytes"
        )
    end = HEADER_LENGTH_BYTES + header_len
    header = view[HEADER_LENGTH_BYTES:end]
    try:
        msg: Message = decoder.decode(header)
    except (msgspec.DecodeError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise _explain(header, types, kind, exc) from None
    key = api_key_of(msg)
    lo, hi = SUPPORTED_VERSIONS[key]
    if not lo <= msg.version <= hi:
        raise _unsupported(kind, key, msg.version, msg.correlation_id)
    # A header of at most MAX_STRING_BYTES bytes cannot hold a longer string: skip the walk.
    oversized = oversized_string(msg) if header_len > MAX_STRING_BYTES else None
    if oversized is not None:
        where, size = oversized
        raise MalformedMessage(
            f"{where} is {size} UTF-8 bytes, over the {MAX_STRING_BYTES}-byte limit of a "
            "Kafka string",
            api_key=key,
            version=msg.version,
            correlation_id=msg.correlation_id,
        )
    tail = view[end:]
    declared = msg.declared_raw_bytes()
    if declared != len(tail):
        raise MalformedMessage(
            f"{type(msg).__name__} declares {declared} raw bytes but the body carries {len(tail)}",
            api_key=key,
            version=msg.version,
            correlation_id=msg.correlation_id,
        )
    return msg, tail


def _unsupported(kind: str, key: ApiKey, version: int, correlation_id: int) -> UnsupportedVersion:
    lo, hi = SUPPORTED_VERSIONS[key]
    return UnsupportedVersion(
        f"{kind} {key.name} v{version} is not supported (versions {lo}..{hi})",
        api_key=key,
        version=version,
        correlation_id=correlation_id,
    )


def _explain(
    header: memoryview, types: Mapping[ApiKey, type[Message]], kind: str, exc: BaseException
) -> MalformedMessage:
    """Turn a failed decode into the clearest MalformedMessage the header allows."""
    try:
        env = _ENVELOPE_DECODER.decode(header)
    except Exception as env_exc:
        return MalformedMessage(
            f"{kind} header is not a msgpack array [api_key, version, correlation_id, ...]: "
            f"{env_exc}"
        )
    ids = {"api_key": env.api_key, "version": env.version, "correlation_id": env.correlation_id}
    try:
        key = ApiKey(env.api_key)
    except ValueError:
        return MalformedMessage(f"unknown api key {env.api_key} in {kind} header", **ids)
    if key not in types:
        return MalformedMessage(f"unknown api key {env.api_key} in {kind} header", **ids)
    if not INT32_MIN <= env.correlation_id <= INT32_MAX:  # never echoed, whatever the version
        return MalformedMessage(
            f"invalid {types[key].__name__} v{env.version}: correlation id "
            f"{env.correlation_id} is outside int32"
        )
    lo, hi = SUPPORTED_VERSIONS[key]
    if not lo <= env.version <= hi:
        return _unsupported(kind, key, env.version, env.correlation_id)
    return MalformedMessage(f"invalid {types[key].__name__} v{env.version}: {exc}", **ids)
