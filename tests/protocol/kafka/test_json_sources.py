"""Every layout, field by field, against Kafka's JSON message definitions.

The definitions are Apache Kafka's ``clients/src/main/resources/common/message/*.json`` as bundled
by kafka-python 3.0.12 (the test-only oracle; checked against apache/kafka, see
docs/kafka-protocol.md). For every API, direction and version spoken here (Produce from v0: the
broker decodes v0-v2 to refuse them), the fields present at that version must match in order,
name (snake_case), type, nullability, tag and default, and the first flexible version must match.
The byte-level differential test (test_differential.py) cannot see names, defaults or
nullability of values it never draws; this one can.
"""

from __future__ import annotations

import importlib.resources
import json
import re
import uuid
from typing import Any

import pytest

from odradek.protocol.kafka import APIS
from odradek.protocol.kafka.schema import ArrayOf, F, StructOf, parse_versions

pytest.importorskip("kafka.protocol.schemas")

_COMMENTS = re.compile(r"(?m)^\s*//.*$")
_PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool"}
_PRIMITIVES |= {"string", "bytes", "records", "uuid"}


def _definition(name: str) -> dict[str, Any]:
    raw = importlib.resources.files("kafka.protocol.schemas.resources").joinpath(f"{name}.json")
    data = json.loads(_COMMENTS.sub("", raw.read_text()))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}

    def resolve(fields: list[dict[str, Any]]) -> None:
        for f in fields:
            struct_name = f["type"].removeprefix("[]")
            if struct_name not in _PRIMITIVES and "fields" not in f:
                f["fields"] = common[struct_name]
            resolve(f.get("fields", []))

    resolve(data["fields"])
    return data


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _in(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    lo, hi = parse_versions(spec)
    return lo <= version <= hi


def _json_default(f: dict[str, Any]) -> Any:
    """Kafka's default for a field, as this codec's dicts spell it."""
    t, raw = f["type"], f.get("default")
    if t.startswith("[]") or ("fields" in f and not t.startswith("[]")):
        return [] if t.startswith("[]") else None
    if raw is None:
        return {"string": "", "bytes": b"", "records": b"", "bool": False, "float64": 0.0}.get(
            t, uuid.UUID(int=0) if t == "uuid" else 0
        )
    if raw == "null":
        return None
    if not isinstance(raw, str):  # a few definitions write JSON numbers or booleans
        return raw
    if t == "bool":
        return raw == "true"
    if t == "string":
        return raw
    return int(raw, 0)


def _type_name(t: Any) -> str:
    if isinstance(t, ArrayOf):
        return "[]" + (t.item if isinstance(t.item, str) else "struct")
    if isinstance(t, StructOf):
        return "struct"
    return t


def _json_type_name(f: dict[str, Any]) -> str:
    t = f["type"]
    if t.startswith("[]"):
        return "[]" + (t[2:] if t[2:] in _PRIMITIVES else "struct")
    return t if t in _PRIMITIVES else "struct"


def _compare(
    ours: tuple[F, ...], theirs: list[dict[str, Any]], version: int, flexible: bool, where: str
) -> list[str]:
    diffs: list[str] = []

    def live(f: F) -> bool:
        return f.present(version) and (f.tag is None or flexible)

    def live_json(f: dict[str, Any]) -> bool:
        tagged = "tag" in f and _in(f.get("taggedVersions"), version)
        return _in(f["versions"], version) and (not tagged or flexible)

    mine = [f for f in ours if live(f)]
    want = [f for f in theirs if live_json(f)]
    if [f.name for f in mine] != [_snake(f["name"]) for f in want]:
        names = ([f.name for f in mine], [_snake(f["name"]) for f in want])
        return [f"{where} v{version}: fields {names[0]} != {names[1]}"]
    for m, j in zip(mine, want, strict=True):
        at = f"{where}.{m.name} v{version}"
        if _type_name(m.type) != _json_type_name(j):
            diffs.append(f"{at}: type {_type_name(m.type)} != {j['type']}")
        if m.is_nullable(version) != _in(j.get("nullableVersions"), version):
            diffs.append(f"{at}: nullable {m.is_nullable(version)} != {j.get('nullableVersions')}")
        tag = j["tag"] if "tag" in j and _in(j.get("taggedVersions"), version) else None
        if m.tag != tag:
            diffs.append(f"{at}: tag {m.tag} != {tag}")
        if "fields" not in j and m.default_value(version) != _json_default(j):
            diffs.append(f"{at}: default {m.default_value(version)!r} != {j.get('default')!r}")
        inner = m.type.item if isinstance(m.type, ArrayOf) else getattr(m.type, "fields", None)
        if isinstance(inner, tuple):
            diffs += _compare(inner, j["fields"], version, flexible, at)
    return diffs


CASES = [
    (api.key, kind, version)
    for api in APIS.values()
    for kind in ("request", "response")
    for version in range(0 if api.key == 0 else api.versions[0], api.versions[1] + 1)
]


@pytest.mark.parametrize(("key", "kind", "version"), CASES)
def test_layout_matches_kafka_json(key: int, kind: str, version: int) -> None:
    api = APIS[key]
    data = _definition(api.name + kind.capitalize())
    assert data["apiKey"] == key
    flexible = data["flexibleVersions"]
    flexible_from, _ = parse_versions(None if flexible == "none" else flexible)
    assert api.flexible == flexible_from or (api.flexible is None and flexible_from > version)
    diffs = _compare(getattr(api, kind), data["fields"], version, api.is_flexible(version), kind)
    assert not diffs, "\n".join(diffs)
