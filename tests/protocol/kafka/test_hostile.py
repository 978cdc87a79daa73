"""``decode_request`` on hostile bodies: arbitrary bytes, and valid request bodies of every
(api, version) mutated (bytes flipped, inserted, deleted, truncated, and length or count fields
overwritten with extreme values). Only :class:`KafkaMalformed` or :class:`KafkaUnsupported` may
escape (never IndexError, struct.error, UnicodeDecodeError, OverflowError, MemoryError,
RecursionError...), and the memory a decode allocates is bounded by the body's size, never by a
length or count the body claims (those are checked against the bytes left before anything is
built)."""

from __future__ import annotations

import struct
import tracemalloc

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
from tests.protocol.kafka.strategies import fields_strategy

REQUESTS = [
    (api.key, version)
    for api in APIS.values()
    for version in range(api.versions[0], api.versions[1] + 1)
]
for _key, _version in REQUESTS:  # compile every decoder now: the one-off cost is not a decode's
    decode_request(encode_request(_key, _version, 0, "c", {}))

# Decoded values are dicts and lists: a body of tiny elements (a flexible struct can be 2 bytes)
# turns each element into a dict of a few hundred bytes. The bound is linear in the body; what
# must never happen is an allocation sized by a *claimed* count or length.
_AMPLIFICATION = 128  # measured worst case: Metadata v9, 2-byte topics, ~96x
_SLACK_BYTES = 64 * 1024

_EXTREMES = [
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\xff\xff\xff\xfe",
    b"\x00\x10\x00\x00",
    b"\xff\xff\xff\xff\x0f",  # uvarint 2**32 - 1
    b"\x80\x80\x80\x80\x80\x01",  # uvarint longer than 5 bytes
    b"\x7f\xff",
    b"\x80\x00",
    b"\xff\xfe",
]


def _decode_bounded(body: bytes) -> None:
    """Decode ``body``; only the codec's two errors may escape, and the peak allocation stays
    linear in ``len(body)``."""
    tracemalloc.start()
    try:
        decode_request(body)
    except (KafkaMalformed, KafkaUnsupported):
        pass
    finally:
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak <= _AMPLIFICATION * len(body) + _SLACK_BYTES, (peak, len(body))


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    key, version = draw(st.sampled_from(REQUESTS))
    api = APIS[key]
    fields = draw(fields_strategy(api.request, version, api.is_flexible(version)))
    body = bytearray(encode_request(key, version, 7, draw(st.none() | st.text(max_size=4)), fields))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "extreme"]))
        if action == "flip" and at < len(body):
            body[at] = draw(st.integers(0, 255))
        elif action == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif action == "delete":
            del body[at : at + draw(st.integers(1, 6))]
        elif action == "truncate":
            del body[at:]
        elif action == "extreme":
            value = draw(st.sampled_from(_EXTREMES))
            body[at : at + len(value)] = value
    return bytes(body)


_SETTINGS = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(_mutated())
def test_mutated_requests_raise_only_codec_errors(body: bytes) -> None:
    _decode_bounded(body)


@_SETTINGS
@given(st.binary(max_size=256))
def test_arbitrary_bytes_raise_only_codec_errors(body: bytes) -> None:
    _decode_bounded(body)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(REQUESTS), st.binary(max_size=200))
def test_valid_header_then_arbitrary_body(case: tuple[int, int], tail: bytes) -> None:
    key, version = case
    header_size = 8 + 2 + len("c") + APIS[key].is_flexible(version)  # v2 adds a tag section
    _decode_bounded(encode_request(key, version, 5, "c", {})[:header_size] + tail)


@pytest.mark.parametrize(("key", "version"), REQUESTS)
@pytest.mark.parametrize("claimed", [2**31 - 1, 2**20], ids=["2^31-1", "2^20"])
def test_a_claimed_count_fails_before_anything_is_built(
    key: int, version: int, claimed: int
) -> None:
    """Every int32 (or uvarint) position of a valid body, overwritten with a huge count, fails
    fast: the peak allocation stays within the body's size (plus the interpreter's slack)."""
    api = APIS[key]
    flexible = api.is_flexible(version)
    body = encode_request(key, version, 1, "c", {})
    big = bytes(_uvarint(claimed + 1)) if flexible else struct.pack(">i", claimed)
    for at in range(8, len(body)):
        hostile = body[:at] + big + body[at:]
        tracemalloc.start()
        try:
            decode_request(hostile)
        except (KafkaMalformed, KafkaUnsupported):
            pass
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak <= len(hostile) + 16 * 1024, (at, peak)


def _uvarint(value: int) -> bytearray:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return out
