"""Round trips for every declared (api, version, request/response), values drawn from the layout."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.kafka import APIS
from odradek.protocol.kafka.compiler import struct_codec
from odradek.protocol.kafka.schema import Out, parse_versions
from tests.protocol.kafka.strategies import assert_decoded, fields_strategy

CASES = [
    (api.key, version, kind)
    for api in APIS.values()
    for version in range(api.versions[0], api.versions[1] + 1)
    for kind in ("request", "response")
]
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def codec_case(key: int, version: int, kind: str):
    api = APIS[key]
    flexible = api.is_flexible(version)
    layout = getattr(api, kind)
    return layout, flexible, struct_codec(layout, version, flexible)


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
@_SETTINGS
@given(data=st.data())
def test_round_trip(key: int, version: int, kind: str, data: st.DataObject) -> None:
    layout, flexible, codec = codec_case(key, version, kind)
    sent = data.draw(fields_strategy(layout, version, flexible))
    out = Out()
    codec.encode(out, sent)
    got, end = codec.decode(memoryview(bytes(out)), 0)
    assert end == len(out)
    assert_decoded(layout, version, flexible, sent, got)
    again = Out()
    codec.encode(again, got)
    assert again == out


def test_the_scope_is_the_briefed_one() -> None:
    spoken = {api.name: api.versions for api in APIS.values()}
    assert spoken["Produce"] == (0, 9) and spoken["Fetch"] == (4, 12)
    assert spoken["Metadata"] == (0, 9) and spoken["ApiVersions"] == (0, 3)
    assert spoken["DeleteTopics"] == (1, 5)  # v6 brings topic ids
    assert spoken["SaslHandshake"] == (1, 1)  # v0 sends bare tokens after it (pre-KIP-152)
    assert len(spoken) == 32
    assert spoken["OffsetDelete"] == (0, 0)  # KIP-496: kafka-consumer-groups --delete-offsets


def test_every_field_lives_inside_its_api_range() -> None:
    def walk(fields, lo):
        for f in fields:
            flo, _ = parse_versions(f.versions)
            assert flo >= lo, f
            inner = getattr(f.type, "fields", None) or getattr(f.type, "item", None)
            if isinstance(inner, tuple):
                walk(inner, lo)

    for api in APIS.values():
        walk(api.request, api.versions[0])
        walk(api.response, api.versions[0])
