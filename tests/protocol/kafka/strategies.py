"""Hypothesis strategies generated from the layout declarations themselves, and the check that a
decoded value is what was encoded (defaults filled in, records as views, tagged rules)."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from odradek.protocol.kafka.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
    F,
    StructOf,
)

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _scalar(t: str) -> st.SearchStrategy[Any]:
    if t in _INTS:
        lo, hi = _INTS[t]
        return st.one_of(st.sampled_from([lo, hi, 0, -1 if lo else 1]), st.integers(lo, hi))
    if t == STRING:
        return st.text(max_size=8)
    if t in (BYTES, RECORDS):
        return st.binary(max_size=12)
    if t == BOOL:
        return st.booleans()
    if t == UUID:
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    if t == FLOAT64:
        return st.floats(allow_nan=False)
    raise AssertionError(t)


def _type(t: Any, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if isinstance(t, ArrayOf):
        item = (
            _scalar(t.item)
            if isinstance(t.item, str)
            else fields_strategy(t.item, version, flexible)
        )
        return st.lists(item, max_size=3)
    if isinstance(t, StructOf):
        return fields_strategy(t.fields, version, flexible)
    return _scalar(t)


def _in_use(f: F, version: int, flexible: bool) -> bool:
    return f.present(version) and (f.tag is None or flexible)


def fields_strategy(
    fields: tuple[F, ...], version: int, flexible: bool
) -> st.SearchStrategy[dict[str, Any]]:
    """Random values for every field of ``fields`` present at ``version``."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        if not _in_use(f, version, flexible):
            continue
        s = _type(f.type, version, flexible)
        # records are never null on the wire from this codec (null is written as empty)
        if f.is_nullable(version) and f.type != RECORDS:
            s = st.none() | s
        if f.tag is not None:
            s = (
                st.none() | s
                if isinstance(f.type, StructOf)
                else st.just(f.default_value(version)) | s
            )
        parts[f.name] = s
    return st.fixed_dictionaries(parts)


def assert_decoded(
    fields: tuple[F, ...], version: int, flexible: bool, sent: dict[str, Any], got: dict[str, Any]
) -> None:
    """``got`` (decoded) holds what ``sent`` (encoded) said, field by field."""
    assert set(got) == {f.name for f in fields}, (set(got), fields)
    for f in fields:
        want = (
            sent.get(f.name, f.default_value(version))
            if _in_use(f, version, flexible)
            else f.default_value(version)
        )
        have = got[f.name]
        if isinstance(f.type, StructOf):
            default = {g.name: g.default_value(version) for g in f.type.fields}
            if want is None or want == default:
                assert have is None, (f.name, have)
            else:
                assert_decoded(f.type.fields, version, flexible, want, have)
        elif isinstance(f.type, ArrayOf) and not isinstance(f.type.item, str) and want is not None:
            assert have is not None and len(have) == len(want), f.name
            for w, h in zip(want, have, strict=True):
                assert_decoded(f.type.item, version, flexible, w, h)
        elif (f.type in (BYTES, RECORDS) and want is not None) or f.type == RECORDS:
            assert have is not None and bytes(have) == bytes(want or b""), f.name
        else:
            assert have == want, (f.name, have, want)
