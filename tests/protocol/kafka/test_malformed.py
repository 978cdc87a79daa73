"""Hostile input: truncations, flipped bytes, garbage. Decoding either succeeds or raises the one
error type (``KafkaMalformed``, or ``KafkaUnsupported`` for a header naming an unknown api or
version); nothing else ever escapes."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.kafka import (
    APIS,
    KafkaMalformed,
    KafkaUnsupported,
    decode_request,
    encode_request,
)
from odradek.protocol.kafka.compiler import struct_codec
from odradek.protocol.kafka.schema import Out
from odradek.protocol.messages.base import MalformedMessage
from tests.protocol.kafka.strategies import fields_strategy
from tests.protocol.kafka.test_layouts import CASES

_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
@_SETTINGS
@given(data=st.data())
def test_truncated_and_mutated_bodies(
    key: int, version: int, kind: str, data: st.DataObject
) -> None:
    api = APIS[key]
    flexible = api.is_flexible(version)
    layout = getattr(api, kind)
    codec = struct_codec(layout, version, flexible)
    out = Out()
    codec.encode(out, data.draw(fields_strategy(layout, version, flexible)))
    wire = bytes(out)
    if not wire:  # an empty layout (ListGroups v0-v2 requests): nothing to cut
        assert codec.decode(memoryview(b""), 0)[1] == 0
        return
    cut = data.draw(st.integers(0, len(wire) - 1))
    with pytest.raises(KafkaMalformed):
        codec.decode(memoryview(wire[:cut]), 0)
    at = data.draw(st.integers(0, len(wire) - 1))
    mutated = bytearray(wire)
    mutated[at] = data.draw(st.integers(0, 255))
    with contextlib.suppress(KafkaMalformed):
        codec.decode(memoryview(bytes(mutated)), 0)


@pytest.mark.parametrize(
    "count",
    [b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00", b"\x7f\xff\xff\xff", b"\x00\x10\x00\x00"],
    ids=["-2", "min-int32", "max-int32", "1M"],
)
def test_negative_and_huge_array_counts(count: bytes) -> None:
    header = struct.pack(">hhih", 3, 4, 1, 1) + b"c"
    with pytest.raises(KafkaMalformed):
        decode_request(header + count + b"\x00")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_frames(garbage: bytes) -> None:
    try:
        header, fields = decode_request(garbage)
    except MalformedMessage as exc:
        assert isinstance(exc, (KafkaMalformed, KafkaUnsupported))
    else:  # garbage that happens to be a valid request names a spoken api and version
        lo, hi = APIS[header.api_key].versions
        assert lo <= header.api_version <= hi and isinstance(fields, dict)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([(k, v) for k, v, kind in CASES if kind == "request"]),
    st.binary(min_size=1, max_size=40),
)
def test_valid_headers_then_garbage(case: tuple[int, int], tail: bytes) -> None:
    key, version = case
    head = encode_request(key, version, 5, "c", {})
    try:
        decode_request(head[: len(head) // 2] + tail)
    except KafkaMalformed as exc:
        assert exc.correlation_id == 5 or len(head) // 2 < 8
