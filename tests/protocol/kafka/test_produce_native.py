"""The two ProduceRequest v3-v9 decoders side by side: the compiled one
(``odradek.protocol._kafka_produce``) and the generated pure-Python one (``struct_codec`` of the
PRODUCE layout). On every input both return equal values (records as memoryviews of the same
bytes) and the same end position, or both raise KafkaMalformed: never anything else, never a
crash.

Inputs: requests encoded by ``encode_request`` (every version 3-9), requests written byte by
byte here (null transactional ids and records, non-empty tagged sections, any name bytes), and
both damaged: bytes flipped, truncated, inserted, deleted, garbage and forged lengths and
varints spliced in. The C module is imported directly, so the comparison runs whatever
``NO_ODRADEK_EXTENSIONS`` says; the tests of the codec's hook check that the variable selects
the decoder."""

from __future__ import annotations

import importlib
import os
import shutil
import struct
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.kafka import KafkaMalformed, decode_request, encode_request, headers
from odradek.protocol.kafka import codec as kafka_codec
from odradek.protocol.kafka.apis_data import PRODUCE
from odradek.protocol.kafka.compiler import struct_codec
from odradek.protocol.kafka.primitives import encode_uvarint

try:
    C: ModuleType | None = importlib.import_module("odradek.protocol._kafka_produce")
except ImportError:
    C = None

needs_c = pytest.mark.skipif(C is None, reason="odradek.protocol._kafka_produce is not built")
VERSIONS = range(3, 10)
EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_c_decoder_is_built() -> None:
    """Where a C compiler exists, ``pip install -e .`` must have built the extension."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler on this machine")
    assert C is not None, "odradek.protocol._kafka_produce is not built (pyproject.toml)"
    assert callable(C.decode_produce)


def test_the_environment_selects_the_decoder() -> None:
    code = (
        "from odradek.protocol.kafka import codec; "
        "print(codec._produce is not None, codec._plan(0, 7, True).native_produce, "
        "codec._plan(0, 2, True).native_produce, codec._plan(0, 7, False).native_produce)"
    )
    env = {k: v for k, v in os.environ.items() if k != "NO_ODRADEK_EXTENSIONS"}
    run = [sys.executable, "-c", code]
    if C is not None:
        compiled = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
        assert compiled.stdout.split() == ["True", "True", "False", "False"]
    env["NO_ODRADEK_EXTENSIONS"] = "1"
    pure = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert pure.stdout.split() == ["False", "False", "False", "False"]


# -- the two decoders --------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """``value`` with every memoryview as ("view", its bytes): equality that sees the type."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, memoryview):
        return ("view", value.tobytes())
    return value


Outcome = tuple[str, Any, int]


def outcome(decode: Any, buf: memoryview, pos: int, flexible: bool) -> Outcome:
    try:
        value, end = decode(buf, pos, flexible)
    except KafkaMalformed:
        return ("malformed", None, -1)
    return ("ok", plain(value), end)


def python_decode(buf: memoryview, pos: int, flexible: bool) -> tuple[dict[str, Any], int]:
    version = 9 if flexible else 7  # v3-v8 share one layout
    return struct_codec(PRODUCE.request, version, flexible).decode(buf, pos)


def same_outcome(struct_bytes: bytes, flexible: bool, prefix: bytes = b"\xaa\x80") -> Outcome:
    """Both decoders on ``struct_bytes`` placed after ``prefix`` and before nothing, as a
    memoryview of bytes and of a bytearray; asserted equal, with the key order too."""
    assert C is not None
    whole = prefix + struct_bytes
    results = []
    for body in (memoryview(whole), memoryview(bytearray(whole))):
        mine = outcome(C.decode_produce, body, len(prefix), flexible)
        theirs = outcome(python_decode, body, len(prefix), flexible)
        assert mine == theirs
        if mine[0] == "ok":
            assert list(mine[1]) == list(theirs[1])
        results.append(mine)
    return results[0]


# -- valid requests ------------------------------------------------------------------------------

names = st.text(max_size=6)
records = st.binary(max_size=40)
partition = st.fixed_dictionaries({"index": st.integers(-(2**31), 2**31 - 1), "records": records})
topic = st.fixed_dictionaries({"name": names, "partition_data": st.lists(partition, max_size=4)})
request = st.fixed_dictionaries(
    {
        "transactional_id": st.none() | names,
        "acks": st.integers(-(2**15), 2**15 - 1),
        "timeout_ms": st.integers(-(2**31), 2**31 - 1),
        "topic_data": st.lists(topic, max_size=3),
    }
)


def header_end(body: bytes) -> int:
    """Where the request struct starts in a frame body."""
    buf = memoryview(body)
    fixed = headers.peek_request_header(buf)
    return headers.decode_request_header(buf, fixed, fixed[1] >= 9)[1]


def struct_of(version: int, fields: dict[str, Any]) -> bytes:
    """The request struct ``encode_request`` writes (the header cut off)."""
    body = encode_request(0, version, 7, "cid", fields)
    return body[header_end(body) :]


@needs_c
@pytest.mark.parametrize("version", VERSIONS)
@EXAMPLES
@given(fields=request)
def test_encoded_requests_decode_the_same(version: int, fields: dict[str, Any]) -> None:
    raw = struct_of(version, fields)
    result = same_outcome(raw, version >= 9)
    assert result[0] == "ok" and result[2] == 2 + len(raw)


# -- requests written byte by byte ---------------------------------------------------------------


def length(n: int | None, flexible: bool, width: int) -> bytes:
    if flexible:
        out = bytearray()
        encode_uvarint(out, 0 if n is None else n + 1)
        return bytes(out)
    return struct.pack(">h" if width == 2 else ">i", -1 if n is None else n)


def tagged(tags: list[tuple[int, bytes]]) -> bytes:
    out = bytearray()
    encode_uvarint(out, len(tags))
    for tag, data in tags:
        encode_uvarint(out, tag)
        encode_uvarint(out, len(data))
        out += data
    return bytes(out)


def sized(data: bytes | None, flexible: bool, width: int) -> bytes:
    return length(None if data is None else len(data), flexible, width) + (data or b"")


raw_names = st.one_of(st.none(), st.binary(max_size=6), names.map(str.encode))
tag_lists = st.lists(st.tuples(st.integers(0, 2**35 - 1), st.binary(max_size=4)), max_size=3)


@st.composite
def written(draw: st.DrawFn, flexible: bool) -> bytes:
    """A request struct with nulls anywhere, names of any bytes, tagged sections of any tags
    (``flexible``); most are valid, some are not (a null name, tags out of order, bad UTF-8)."""
    tail = (lambda: tagged(draw(tag_lists))) if flexible else (lambda: b"")
    out = sized(draw(raw_names), flexible, 2) + struct.pack(">hi", draw(st.integers(-3, 3)), 1)
    topics = draw(st.lists(st.none(), max_size=3))
    out += length(len(topics), flexible, 4)
    for _ in topics:
        out += sized(draw(raw_names), flexible, 2)
        parts = draw(st.lists(st.none() | records, max_size=3))
        out += length(len(parts), flexible, 4)
        for data in parts:
            out += struct.pack(">i", draw(st.integers(-1, 3))) + sized(data, flexible, 4)
            out += tail()
        out += tail()
    return out + tail()


@needs_c
@pytest.mark.parametrize("flexible", [False, True])
@EXAMPLES
@given(data=st.data())
def test_written_requests_decode_the_same(flexible: bool, data: st.DataObject) -> None:
    same_outcome(data.draw(written(flexible)), flexible)


# -- damaged requests ----------------------------------------------------------------------------

forged = st.sampled_from(
    [
        b"\xff\xff",
        b"\xff\xff\xff\xff",
        b"\xff\xff\xff\xfe",
        b"\x7f\xff\xff\xff",
        b"\x00\x00\x00\x00",
        b"\x80\x80\x80\x80\x80\x00",
        b"\xff\xff\xff\xff\x0f",
        b"\x80\x80\x80\x80\x01",
        b"\x00",
        b"\x01",
        b"\xc3\x28",
        b"\xed\xa0\x80",
    ]
)


@st.composite
def damaged(draw: st.DrawFn, raw: bytes) -> bytes:
    out = bytearray(raw)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(out)))
        how = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "splice"]))
        if how == "flip" and at < len(out):
            out[at] ^= draw(st.integers(1, 255))
        elif how == "truncate":
            del out[at:]
        elif how == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif how == "delete":
            del out[at : at + draw(st.integers(1, 4))]
        elif how == "splice":
            piece = draw(forged)
            out[at : at + draw(st.integers(0, len(piece)))] = piece
    return bytes(out)


@needs_c
@pytest.mark.parametrize("version", [3, 7, 8, 9])
@EXAMPLES
@given(data=st.data(), fields=request)
def test_damaged_encoded_requests_agree(
    version: int, data: st.DataObject, fields: dict[str, Any]
) -> None:
    same_outcome(data.draw(damaged(struct_of(version, fields))), version >= 9)


@needs_c
@pytest.mark.parametrize("flexible", [False, True])
@EXAMPLES
@given(data=st.data())
def test_damaged_written_requests_agree(flexible: bool, data: st.DataObject) -> None:
    same_outcome(data.draw(damaged(data.draw(written(flexible)))), flexible)


@needs_c
@pytest.mark.parametrize("flexible", [False, True])
@EXAMPLES
@given(garbage=st.binary(max_size=64))
def test_garbage_agrees(flexible: bool, garbage: bytes) -> None:
    same_outcome(garbage, flexible)


@needs_c
@pytest.mark.parametrize(
    ("raw", "flexible"),
    [
        (b"", False),
        (b"", True),
        (b"\xff\xff\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff", False),  # null topic_data
        (b"\x00\x00\x01\x00\x00\x00\x00\x00", True),  # null topic_data (compact 0)
        (b"\xff\xff\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\xff\xff", False),  # null name
        (b"\x00\x00\x01\x00\x00\x00\x00\x02\x00", True),  # null name
        (b"\x00\x00\x01\x00\x00\x00\x00\x02\x02a\x00", True),  # null partition_data
        (b"\xff\xff\x00\x01\x00\x00\x00\x00\x7f\xff\xff\xff", False),  # count past the end
        (b"\xff\xfe\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00", False),  # string length -2
        (b"\x80\x80\x80\x80\x80\x01", True),  # a 6-byte varint
        (b"\x00\x00\x01\x00\x00\x00\x00\x01\x02\x01\x00\x01\x00", True),  # tags 1 then 0
    ],
)
def test_hostile_bodies_are_malformed(raw: bytes, flexible: bool) -> None:
    assert same_outcome(raw, flexible)[0] == "malformed"


# -- zero copy, references -----------------------------------------------------------------------


def _request_struct(version: int) -> bytes:
    fields = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [
            {"name": "t", "partition_data": [{"index": i, "records": bytes([i]) * 100}]}
            for i in range(3)
        ],
    }
    return struct_of(version, fields)


@needs_c
@pytest.mark.parametrize("version", [7, 9])
def test_records_are_views_of_the_callers_buffer(version: int) -> None:
    assert C is not None
    body = bytearray(_request_struct(version))
    value, end = C.decode_produce(body, 0, version >= 9)
    assert end == len(body)
    views = [p["records"] for t in value["topic_data"] for p in t["partition_data"]]
    assert all(isinstance(v, memoryview) and v.obj is body for v in views)
    at = body.index(bytes([2]) * 100)
    body[at] = 0xEE  # the view sees the caller's bytes, not a copy
    assert views[2][0] == 0xEE
    with pytest.raises(BufferError):  # the views hold the buffer, as any slice does
        body.append(0)
    del value, views
    body.append(0)  # ... and nothing else does once they are gone


@needs_c
@pytest.mark.parametrize("version", [7, 9])
def test_no_reference_is_kept(version: int) -> None:
    assert C is not None
    raw = _request_struct(version)
    body = bytearray(raw)
    view = memoryview(body)
    before = sys.getrefcount(body), sys.getrefcount(view)
    for _ in range(1000):
        C.decode_produce(view, 0, version >= 9)
        with pytest.raises(KafkaMalformed):
            C.decode_produce(view[: len(raw) - 1], 0, version >= 9)
    assert (sys.getrefcount(body), sys.getrefcount(view)) == before
    view.release()
    body.append(0)  # no export of the bytearray is left behind, on either path


@needs_c
def test_buffers_it_cannot_slice_are_refused() -> None:
    assert C is not None
    with pytest.raises(TypeError):
        C.decode_produce(memoryview(b"\x00" * 8).cast("i"), 0, False)
    with pytest.raises(ValueError):
        C.decode_produce(b"\x00" * 8, 9, False)


# -- through the codec ---------------------------------------------------------------------------


FULL = {
    "transactional_id": "tx",
    "acks": -1,
    "timeout_ms": 1000,
    "topic_data": [{"name": "ä", "partition_data": [{"index": 4, "records": b"abc"}]}],
}


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_request_uses_the_loaded_decoder(version: int) -> None:
    """Whichever decoder ``NO_ODRADEK_EXTENSIONS`` selected, a whole frame body decodes to the
    generated decoder's value, records stay views of the body, trailing bytes are refused."""
    assert kafka_codec._plan(0, version, True).native_produce is (kafka_codec._produce is not None)
    frame = encode_request(0, version, 9, "c", FULL)
    header, value = decode_request(frame)
    assert header.correlation_id == 9
    expected, _end = python_decode(memoryview(frame), header_end(frame), version >= 9)
    assert (
        plain(value)
        == plain(expected)
        == plain(FULL)
        | {
            "topic_data": [
                {"name": "ä", "partition_data": [{"index": 4, "records": ("view", b"abc")}]}
            ]
        }
    )
    rec = value["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(rec, memoryview) and rec.obj is frame
    with pytest.raises(KafkaMalformed):
        decode_request(frame + b"\x00")
    with pytest.raises(KafkaMalformed):
        decode_request(frame[:-1])
