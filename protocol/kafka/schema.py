"""Message layouts as data, and the rules by which a layout is read and written at a version.

A layout is a tuple of :class:`F` (field) declarations, transcribed from Apache Kafka's message
definitions (``clients/src/main/resources/common/message/*.json``), limited to the versions this
broker speaks. Each field names its type, the versions it exists in (``"3+"``, ``"3-7"``,
``"5"``), the versions in which it may be null, its tag if it is a tagged field, and its default.
Types are the primitive names of :mod:`.primitives`, ``RECORDS`` (bytes carrying record batches),
``ArrayOf(type)`` or ``ArrayOf(F(...), ...)`` (an array of structs) and ``StructOf(F(...), ...)``.

Rules, for one version:

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

:mod:`.compiler` turns a layout at one version into its decoder and encoder.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

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
    "StructOf",
    "parse_versions",
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
    """One Kafka API: key, name, the version range spoken (decoded, encoded and advertised),
    the first flexible version (None if none in range), the request and response layouts, and
    the range *served*. ``served`` is narrower than ``versions`` only where a version must be
    advertised and parsed but refused (Produce v0-v2: librdkafka before 2.11.1 compresses only
    if the advertised Produce range contains v0; Kafka 4.0 does the same, KAFKA-18659). A
    refused request is decoded, then answered in its own version with UNSUPPORTED_VERSION in
    every partition."""

    key: int
    name: str
    versions: tuple[int, int]
    flexible: int | None
    request: tuple[F, ...]
    response: tuple[F, ...]
    served: tuple[int, int] | None = None  # None: all of ``versions``
    # zero bytes a known client writes after a request's end (Kafka's broker ignores
    # trailing bytes; this codec refuses them but for these): see each Api's comment
    trailing_zeros: int = 0

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible

    def is_served(self, version: int) -> bool:
        lo, hi = self.served or self.versions
        return lo <= version <= hi


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
