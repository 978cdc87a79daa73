"""Message layouts as data, and the one generic codec that walks them.

A layout is a tuple of :class:`F` (field) declarations, transcribed from Apache Kafka's message
definitions (``clients/src/main/resources/common/message/*.json``), limited to the versions this
broker speaks. Each field names its type, the versions it exists in (``"3+"``, ``"3-7"``,
``"5"``), the versions in which it may be null, its tag if it is a tagged field, and its default.
Types are the primitive names of :mod:`.primitives`, ``RECORDS`` (bytes carrying record batches),
``ArrayOf(type)`` or ``ArrayOf(F(...), ...)`` (an array of structs) and ``StructOf(F(...), ...)``.

Rules of the walk, for one version:

* Fields absent from the version are neither read nor written; decoding yields their default.
  (Kafka refuses to *send* a non-default value of a non-ignorable absent field; this codec
  drops it silently: the caller picks the version and the values.)
* Flexible versions use compact strings, bytes and arrays, and end every struct (the message
  body included) with a tagged-field section. Tagged fields are written in ascending tag order and
  only when their value differs from the default; unknown tags are skipped on decode.
* ``RECORDS`` decode to a memoryview into the frame (no copy) and encode from any buffer, or from
  a :class:`RecordsSlot` whose bytes the caller writes later (see :mod:`.codec`). A null
  ``RECORDS`` value is written as zero-length bytes: librdkafka rejects null record sets.
* Values are plain dicts keyed by the snake_case field names; arrays are lists.

Each (layout, version, flexible) compiles once into a pair of closures (cached).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from odradek.protocol.kafka import primitives as p
from odradek.protocol.kafka.primitives import Decoder, Encoder, KafkaMalformed

__all__ = [
    "BOOL",
    "BYTES",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "RECORDS",
    "STRING",
    "UINT16",
    "UINT32",
    "UUID",
    "Api",
    "ArrayOf",
    "F",
    "Out",
    "RecordsSlot",
    "StructCodec",
    "StructOf",
    "parse_versions",
    "struct_codec",
]

INT8, INT16, INT32, INT64 = "int8", "int16", "int32", "int64"
UINT16, UINT32, FLOAT64 = "uint16", "uint32", "float64"
BOOL, STRING, BYTES, RECORDS, UUID = "bool", "string", "bytes", "records", "uuid"
NO_VERSION = 0x7FFF


@dataclass(frozen=True, init=False)
class ArrayOf:
    """An array of a primitive (``ArrayOf(INT32)``) or of structs (``ArrayOf(F(...), ...)``)."""

    item: str | tuple[F, ...]

    def __init__(self, *item: str | F) -> None:
        one = item[0] if len(item) == 1 and isinstance(item[0], str) else tuple(item)
        object.__setattr__(self, "item", one)


@dataclass(frozen=True, init=False)
class StructOf:
    """A single nested struct (Kafka uses them for tagged fields)."""

    fields: tuple[F, ...]

    def __init__(self, *fields: F) -> None:
        object.__setattr__(self, "fields", fields)


FieldType = str | ArrayOf | StructOf


def parse_versions(spec: str | None) -> tuple[int, int]:
    """``"3+"`` -> (3, 32767), ``"3-7"`` -> (3, 7), ``"5"`` -> (5, 5), None -> empty."""
    if not spec:
        return NO_VERSION, -1
    if spec.endswith("+"):
        return int(spec[:-1]), NO_VERSION
    lo, _, hi = spec.partition("-")
    return int(lo), int(hi or lo)


UNSET: Any = type("Unset", (), {"__repr__": lambda _self: "UNSET"})()


@dataclass(frozen=True)
class F:
    """One field: name, type, versions; then nullable versions, tag, default."""

    name: str
    type: FieldType
    versions: str
    nullable: str | None = None
    tag: int | None = None
    default: Any = field(default=UNSET)

    def present(self, version: int) -> bool:
        lo, hi = parse_versions(self.versions)
        return lo <= version <= hi

    def is_nullable(self, version: int) -> bool:
        lo, hi = parse_versions(self.nullable)
        return lo <= version <= hi

    def default_value(self, version: int) -> Any:
        """Kafka's default: the declared one, else 0 / false / "" / empty / zero uuid."""
        if self.default is not UNSET:
            return self.default
        t = self.type
        if isinstance(t, ArrayOf):
            return []
        if isinstance(t, StructOf):
            return None  # an absent nested struct: tagged, and left out
        if t == STRING:
            return ""
        if t in (BYTES, RECORDS):
            return b""
        if t == BOOL:
            return False
        if t == UUID:
            return uuid.UUID(int=0)
        if t == FLOAT64:
            return 0.0
        return 0


@dataclass(frozen=True)
class Api:
    """One Kafka API: key, name, the version range spoken, the first flexible version (None if
    none in range) and the request and response layouts."""

    key: int
    name: str
    versions: tuple[int, int]
    flexible: int | None
    request: tuple[F, ...]
    response: tuple[F, ...]

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible


@dataclass(frozen=True)
class RecordsSlot:
    """A hole of ``size`` bytes in an encoded response, filled by the caller (e.g. sendfile).
    ``source`` is the caller's own handle (a file region, say); the codec never reads it."""

    size: int
    source: Any = None


class Out(bytearray):
    """An encode buffer that also notes where :class:`RecordsSlot` holes go."""

    __slots__ = ("slots",)

    def __init__(self) -> None:
        super().__init__()
        self.slots: list[tuple[int, RecordsSlot]] = []


@dataclass(frozen=True)
class StructCodec:
    decode: Decoder
    encode: Encoder


# ---- Compiling one type ------------------------------------------------------------------
_STRINGS = {
    False: (p.decode_string, p.encode_string),
    True: (p.decode_compact_string, p.encode_compact_string),
}
_BYTES = {
    False: (p.decode_bytes, p.encode_bytes),
    True: (p.decode_compact_bytes, p.encode_compact_bytes),
}
_SIMPLE: dict[str, tuple[Decoder, Encoder]] = {
    BOOL: (p.decode_bool, p.encode_bool),
    UUID: (p.decode_uuid, p.encode_uuid),
    **{name: (dec, enc) for name, (dec, enc, _st) in p.FIXED.items()},
}


def _records(flexible: bool) -> tuple[Decoder, Encoder]:
    decode, _ = _BYTES[flexible]
    length = p.encode_uvarint if flexible else None
    int32 = p.FIXED["int32"][2].pack

    def encode(out: bytearray, value: Any) -> None:
        if isinstance(value, RecordsSlot):
            if flexible:
                p.encode_uvarint(out, value.size + 1)
            else:
                out += int32(value.size)
            out.slots.append((len(out), value))  # type: ignore[attr-defined]
            return
        if value is None:
            value = b""
        if length is not None:
            length(out, len(value) + 1)
        else:
            out += int32(len(value))
        out += value

    return decode, encode


def _array(
    item: Decoder, item_enc: Encoder, fixed: struct.Struct | None, flexible: bool
) -> tuple[Decoder, Encoder]:
    count_of = p.compact_array_count if flexible else p.array_count
    int32 = p.FIXED["int32"][2].pack
    code = fixed.format[1:] if fixed is not None else ""
    width = fixed.size if fixed is not None else 0

    def decode(buf: memoryview, pos: int) -> tuple[list[Any] | None, int]:
        count, pos = count_of(buf, pos)
        if count < 0:
            return None, pos
        if width:
            end = pos + count * width
            if end > len(buf):
                raise KafkaMalformed("array runs past the end of the frame")
            return list(struct.unpack_from(f">{count}{code}", buf, pos)), end
        items = []
        append = items.append
        for _ in range(count):
            value, pos = item(buf, pos)
            append(value)
        return items, pos

    def encode(out: bytearray, values: Any) -> None:
        if values is None:
            out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            return
        if flexible:
            p.encode_uvarint(out, len(values) + 1)
        else:
            out += int32(len(values))
        if width:
            try:
                out += struct.pack(f">{len(values)}{code}", *values)
            except struct.error as exc:
                raise KafkaMalformed(f"array item does not fit {code}") from exc
            return
        for value in values:
            item_enc(out, value)

    return decode, encode


def _type_codec(t: FieldType, version: int, flexible: bool) -> tuple[Decoder, Encoder]:
    if isinstance(t, ArrayOf):
        if isinstance(t.item, str):
            dec, enc = _type_codec(t.item, version, flexible)
            fixed = p.FIXED[t.item][2] if t.item in p.FIXED and t.item != "float64" else None
            return _array(dec, enc, fixed, flexible)
        sc = struct_codec(t.item, version, flexible)
        return _array(sc.decode, sc.encode, None, flexible)
    if isinstance(t, StructOf):
        sc = struct_codec(t.fields, version, flexible)
        return sc.decode, sc.encode
    if t == STRING:
        return _STRINGS[flexible]
    if t == BYTES:
        return _BYTES[flexible]
    if t == RECORDS:
        return _records(flexible)
    return _SIMPLE[t]


# ---- Compiling one struct ----------------------------------------------------------------
@cache
def struct_codec(fields: tuple[F, ...], version: int, flexible: bool) -> StructCodec:
    """The decoder and encoder of ``fields`` at ``version``."""
    plain: list[tuple[str, Decoder, Encoder, Any]] = []
    tagged: dict[int, tuple[str, Decoder, Encoder, Any]] = {}
    absent: list[tuple[str, Any]] = []
    for f in fields:
        default = f.default_value(version)
        if not f.present(version) or (f.tag is not None and not flexible):
            absent.append((f.name, default))
            continue
        dec, enc = _type_codec(f.type, version, flexible)
        if f.tag is not None:
            if isinstance(f.type, StructOf):
                default = {g.name: g.default_value(version) for g in f.type.fields}
            tagged[f.tag] = (f.name, dec, enc, default)
        else:
            plain.append((f.name, dec, enc, default))
    tags = sorted(tagged.items())
    mutable = tuple((name, d) for name, d in absent if isinstance(d, list))
    frozen = {name: d for name, d in absent if not isinstance(d, list)}
    # a tagged struct left out decodes to None (its default dict only serves the encode check)
    frozen.update({n: None if isinstance(d, dict) else d for n, _dec, _enc, d in tagged.values()})
    mutable_tags = tuple(
        (name, d) for name, _dec, _enc, d in tagged.values() if isinstance(d, list)
    )

    def decode(buf: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        value = dict(frozen)
        for name, _ in mutable:
            value[name] = []
        for name, _ in mutable_tags:
            value[name] = []
        for name, dec, _enc, _d in plain:
            value[name], pos = dec(buf, pos)
        if flexible:
            pos = _decode_tagged(buf, pos, tagged, value)
        return value, pos

    def encode(out: bytearray, value: Mapping[str, Any]) -> None:
        get = value.get
        for name, _dec, enc, default in plain:
            enc(out, get(name, default))
        if flexible:
            _encode_tagged(out, tags, get)

    return StructCodec(decode, encode)


def _decode_tagged(
    buf: memoryview,
    pos: int,
    tagged: dict[int, tuple[str, Decoder, Encoder, Any]],
    value: dict[str, Any],
) -> int:
    count, pos = p.decode_uvarint(buf, pos)
    last = -1
    for _ in range(count):
        tag, pos = p.decode_uvarint(buf, pos)
        size, pos = p.decode_uvarint(buf, pos)
        if tag <= last:
            raise KafkaMalformed(f"tagged field {tag} out of order")
        last = tag
        end = pos + size
        if end > len(buf):
            raise KafkaMalformed("tagged field runs past the end of the frame")
        known = tagged.get(tag)
        if known is not None:
            name, dec, _enc, _d = known
            value[name], used = dec(buf[:end], pos)
            if used != end:
                raise KafkaMalformed(f"tagged field {tag} is {size} bytes but holds {used - pos}")
        pos = end
    return pos


def _encode_tagged(
    out: bytearray, tags: list[tuple[int, tuple[str, Decoder, Encoder, Any]]], get: Any
) -> None:
    if not tags:
        out += b"\x00"
        return
    written = []
    for tag, (name, _dec, enc, default) in tags:
        v = get(name, default)
        if v is None or v == default:
            continue
        one = Out()
        enc(one, v)
        written.append((tag, one))
    p.encode_uvarint(out, len(written))
    for tag, raw in written:
        p.encode_uvarint(out, tag)
        p.encode_uvarint(out, len(raw))
        out += raw
