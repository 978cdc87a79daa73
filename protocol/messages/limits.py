"""The byte limit of strings, checked after a header decodes.

Kafka's strings carry an int16 length: at most 32,767 UTF-8 *bytes*. msgspec's ``max_length``
(the :data:`~odradek.protocol.messages.base.Str` annotation) counts characters, so a group id of
20,000 ``é`` (40,000 bytes) passes it; stored as Kafka's ``__consumer_offsets`` key it cannot be
encoded at all. :func:`oversized_string` finds such a string in a decoded message.

Cost: none for a header of at most 32,767 bytes (the codec skips the walk: no string in it can
be longer); otherwise only the fields whose type can hold a string are visited (a Produce
request's partition items, all integers, are skipped), and only a string longer than
:data:`SAFE_STRING_CHARS` characters is encoded to count its bytes (a UTF-8 code point takes at
most 4 bytes).
"""

from __future__ import annotations

from functools import cache

import msgspec
import msgspec.inspect as mi

__all__ = ["MAX_STRING_BYTES", "SAFE_STRING_CHARS", "oversized_string"]

MAX_STRING_BYTES = 2**15 - 1
SAFE_STRING_CHARS = MAX_STRING_BYTES // 4


def oversized_string(value: object) -> tuple[str, int] | None:
    """``(where, UTF-8 bytes)`` of the first string in ``value`` over :data:`MAX_STRING_BYTES`
    (a struct, list, dict or string as msgspec decodes them), or None."""
    if isinstance(value, str):
        if len(value) > SAFE_STRING_CHARS:
            size = len(value.encode("utf-8", "surrogatepass"))
            if size > MAX_STRING_BYTES:
                return "string", size
        return None
    if isinstance(value, msgspec.Struct):
        for name in _string_fields(type(value)):
            found = oversized_string(getattr(value, name))
            if found is not None:
                return f"{type(value).__name__}.{name}", found[1]
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = oversized_string(key) or oversized_string(item)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for item in value:
            found = oversized_string(item)
            if found is not None:
                return found
    return None


@cache
def _string_fields(cls: type[msgspec.Struct]) -> tuple[str, ...]:
    """The fields of ``cls`` whose type can hold a string, at any depth."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return tuple(f.name for f in info.fields if _holds_string(f.type, frozenset()))


def _holds_string(t: mi.Type, seen: frozenset[type]) -> bool:
    if isinstance(t, mi.StrType):
        return True
    if isinstance(t, mi.StructType):
        if t.cls in seen:
            return False
        return any(_holds_string(f.type, seen | {t.cls}) for f in t.fields)
    if isinstance(t, mi.UnionType):
        return any(_holds_string(member, seen) for member in t.types)
    if isinstance(t, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
        return _holds_string(t.item_type, seen)
    if isinstance(t, mi.TupleType):
        return any(_holds_string(item, seen) for item in t.item_types)
    if isinstance(t, mi.DictType):
        return _holds_string(t.key_type, seen) or _holds_string(t.value_type, seen)
    return isinstance(t, mi.AnyType)
