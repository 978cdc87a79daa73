"""Differential tests against kafka-python 3.0.12's ``kafka.protocol`` (the test-only oracle,
generated from the same Kafka message definitions): for every declared (api, version, direction),
random values encoded here are decoded by kafka-python, which re-encodes them byte for byte; and
kafka-python's own frames (headers included) decode here to the same values."""

from __future__ import annotations

import importlib
import pkgutil
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.kafka import (
    APIS,
    api_version_ranges,
    decode_request,
    decode_response,
    unsupported_version_response,
)
from odradek.protocol.kafka.compiler import struct_codec
from odradek.protocol.kafka.schema import Out
from tests.protocol.kafka.strategies import fields_strategy
from tests.protocol.kafka.test_layouts import CASES

kafka_protocol = pytest.importorskip("kafka.protocol")


def _oracle_classes() -> dict[tuple[int, str], type]:
    found: dict[tuple[int, str], type] = {}
    for mod in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        try:
            module = importlib.import_module(mod.name)
        except ImportError:  # optional extras of the oracle
            continue
        for value in vars(module).values():
            schema = getattr(value, "_json", None)
            if (
                isinstance(value, type)
                and isinstance(schema, dict)
                and schema.get("type") in ("request", "response")
            ):
                found[(schema["apiKey"], schema["type"])] = value
    return found


ORACLE = _oracle_classes()
_SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
@_SETTINGS
@given(data=st.data())
def test_same_bytes_as_kafka_python(key: int, version: int, kind: str, data: st.DataObject) -> None:
    api = APIS[key]
    flexible = api.is_flexible(version)
    layout = getattr(api, kind)
    codec = struct_codec(layout, version, flexible)
    sent = data.draw(fields_strategy(layout, version, flexible))
    if (key, kind) == (18, "response"):
        sent["error_code"] = 0  # kafka-python reads any failed ApiVersionsResponse as v0
    ours = Out()
    codec.encode(ours, sent)
    theirs = ORACLE[(key, kind)].decode(bytes(ours), version=version)
    theirs._header = None  # decode() skips __init__, which encode() relies on
    assert bytes(theirs.encode(version=version)) == bytes(ours)
    mine, _ = codec.decode(memoryview(bytes(ours)), 0)
    assert_same_values(theirs.to_dict(json=False), mine)


# kafka-python turns Kafka's int32 "authorized operations" fields into a set of operations
# (None for -2**31) and renames Metadata's ClusterAuthorizedOperations: compared as bytes only.
_RETYPED = {"authorized_operations", "topic_authorized_operations"}


def assert_same_values(theirs: object, mine: object) -> None:
    """kafka-python's decoded values (its dicts hold the fields of the version) equal ours."""
    if isinstance(theirs, dict):
        assert isinstance(mine, dict)
        for name, value in theirs.items():
            if name in _RETYPED:
                continue
            assert name in mine, (name, sorted(mine))
            assert_same_values(value, mine[name])
    elif isinstance(theirs, list):
        assert isinstance(mine, list) and len(mine) == len(theirs)
        for a, b in zip(theirs, mine, strict=True):
            assert_same_values(a, b)
    elif isinstance(mine, memoryview):
        assert bytes(mine) == theirs
    elif isinstance(mine, uuid.UUID):
        assert mine == (theirs or uuid.UUID(int=0))  # kafka-python reads the zero uuid as None
    else:
        assert mine == theirs, (mine, theirs)


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
def test_kafka_python_frames_decode_here(key: int, version: int, kind: str) -> None:
    """kafka-python's default-valued message, with its header, decodes here and re-encodes
    identically (defaults, header versions and ApiVersions' header-v0 exception agree)."""
    oracle = ORACLE[(key, kind)]
    message = oracle(version=version)
    message.with_header(
        correlation_id=12345, **({"client_id": "oracle"} if kind == "request" else {})
    )
    frame = bytes(message.encode(header=True))
    if kind == "request":
        header, fields = decode_request(frame)
        assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 12345)
        assert header.client_id == "oracle"
    else:
        correlation_id, fields = decode_response(key, version, frame)
        assert correlation_id == 12345
    ours = Out()
    struct_codec(getattr(APIS[key], kind), version, APIS[key].is_flexible(version)).encode(
        ours, fields
    )
    assert frame.endswith(bytes(ours))


@pytest.mark.parametrize("asked", [3, 4])
def test_kafka_python_reads_the_v0_fallback_whatever_it_asked(asked: int) -> None:
    ranges = api_version_ranges()
    body = unsupported_version_response(18, 31, ranges)
    reply = ORACLE[(18, "response")].decode(body, version=asked, header=True)
    assert reply.header.correlation_id == 31 and reply.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in reply.api_keys] == ranges
