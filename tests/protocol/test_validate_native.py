"""The broker's two record walks side by side: the C one (``odradek.protocol._validate``) and
the pure-Python one (:func:`odradek.protocol.validate.walk_records`). On every input both must
accept with the same result (and the one the records were built with), or both refuse with
InvalidRecordError and the same message — never anything else, never a crash.

Bodies are built here byte by byte (so varints can be overlong, non-minimal or out of any
int32/int64 range, and lengths can lie), then damaged: truncated, bytes flipped, inserted or
deleted, forged varints spliced in, the record count lied about. Both walks run whatever
``NO_ODRADEK_EXTENSIONS`` says (the C module is imported directly);
:func:`test_the_c_walk_is_built` fails when a C compiler is present and it was not built, so a
broken build cannot hide behind the pure-Python fallback."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import HEADER_SIZE, InvalidRecordError, parse_batch_header
from odradek.protocol.validate import walk_records
from odradek.protocol.varint import encode_varint
from tests.protocol.test_validate import records_strategy

try:
    C: ModuleType | None = importlib.import_module("odradek.protocol._validate")
except ImportError:
    C = None

INT32_MAX, INT32_MIN = (1 << 31) - 1, -(1 << 31)
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
BASE_TS = 1_700_000_000_000

Header = tuple[bytes, bytes | None]
# timestamp delta, key, value, headers (the offset delta is the record's index)
Row = tuple[int, bytes | None, bytes | None, list[Header]]

needs_c = pytest.mark.skipif(C is None, reason="odradek.protocol._validate is not built")


def test_the_c_walk_is_built() -> None:
    """Where a C compiler exists, ``pip install -e .`` must have built the extension."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler on this machine")
    assert C is not None, "odradek.protocol._validate is not built (pyproject.toml ext-modules)"
    assert callable(C.walk_records)


def test_the_environment_selects_the_walk() -> None:
    code = "from odradek.protocol import validate; print(validate._walk.__module__)"
    env = {k: v for k, v in os.environ.items() if k != "NO_ODRADEK_EXTENSIONS"}
    run = [sys.executable, "-c", code]
    if C is not None:
        native = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
        assert native.stdout.strip() == "odradek.protocol._validate"
    env["NO_ODRADEK_EXTENSIONS"] = "1"
    pure = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert pure.stdout.strip() == "odradek.protocol.validate"


# -- building bodies -----------------------------------------------------------------------------


def leb128(raw: int) -> bytes:
    """``raw`` (an already zig-zagged, non-negative number of any size) in LEB128."""
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def varint(value: int) -> bytes:
    """The zig-zag varint of any integer (past 64 bits too, as the walks decode up to 70)."""
    return leb128(value * 2 if value >= 0 else -value * 2 - 1)


def record_bytes(row: Row, offset_delta: int) -> bytes:
    ts_delta, key, value, headers = row
    out = b"\x00" + varint(ts_delta) + encode_varint(offset_delta)
    out += encode_varint(-1) if key is None else encode_varint(len(key)) + key
    out += encode_varint(-1) if value is None else encode_varint(len(value)) + value
    out += encode_varint(len(headers))
    for name, data in headers:
        out += encode_varint(len(name)) + name
        out += encode_varint(-1) if data is None else encode_varint(len(data)) + data
    return encode_varint(len(out)) + out


def body_of(rows: list[Row], deltas: list[int] | None = None) -> bytes:
    deltas = list(range(len(rows))) if deltas is None else deltas
    return b"".join(record_bytes(row, d) for row, d in zip(rows, deltas, strict=True))


Outcome = tuple[str, object]


def run(walk: object, body: object, count: int, base_ts: int, last: int) -> Outcome:
    """("ok", result) or ("invalid", message); anything else propagates."""
    try:
        return ("ok", walk(body, count, base_ts, last))  # type: ignore[operator]
    except InvalidRecordError as exc:
        return ("invalid", str(exc))


def same_outcome(body: bytes, count: int, base_ts: int = BASE_TS) -> Outcome:
    """Both walks' outcome on ``body`` as bytes, bytearray and a memoryview into a larger
    buffer (whose surrounding bytes would change the outcome if read), asserted equal."""
    last = count - 1
    pure = run(walk_records, body, count, base_ts, last)
    if C is None:
        return pure
    framed = memoryview(b"\x02\x7f" + body + b"\x00\x7f\x01\x00" * 3)[2 : 2 + len(body)]
    for form in (body, bytearray(body), framed):
        assert run(C.walk_records, form, count, base_ts, last) == pure
    return pure


# -- honest bodies -------------------------------------------------------------------------------

_blobs = st.one_of(st.none(), st.just(b""), st.binary(max_size=40))
_headers = st.lists(st.tuples(st.binary(max_size=8), _blobs), max_size=3)
_ts_deltas = st.one_of(
    st.integers(-3, 3), st.integers(-(1 << 40), 1 << 40), st.integers(INT64_MIN, INT64_MAX)
)
_rows = st.lists(st.tuples(_ts_deltas, _blobs, _blobs, _headers), min_size=1, max_size=30)
_base_ts = st.one_of(st.just(BASE_TS), st.just(-1), st.integers(INT64_MIN, INT64_MAX))


def expected(rows: list[Row], base_ts: int) -> Outcome:
    max_ts = max([-1, *(base_ts + row[0] for row in rows)])
    if max_ts > INT64_MAX:
        return ("invalid", f"record timestamp {max_ts} is not an int64")
    return ("ok", (any(row[1] is None for row in rows), max_ts))


@settings(max_examples=300, deadline=None)
@given(_rows, _base_ts)
def test_honest_bodies_pass_both_walks_alike(rows: list[Row], base_ts: int) -> None:
    assert same_outcome(body_of(rows), len(rows), base_ts) == expected(rows, base_ts)


@settings(max_examples=100, deadline=None)
@given(records_strategy)
def test_batches_from_the_protocols_encoder_pass_both_walks_alike(records: list) -> None:
    """Another encoder than this file's: records.encode_batch, header parsed as the broker does."""
    data = encode_batch(records)
    header = parse_batch_header(data)
    assert same_outcome(data[HEADER_SIZE:], header.record_count, header.base_timestamp) == (
        "ok",
        (any(key is None for key, *_ in records), max(ts for _, _, ts, _ in records)),
    )


@needs_c
def test_a_large_body_is_walked_in_place_and_released() -> None:
    """Past 64 KiB the C walk runs without the GIL; the buffer is released either way (a
    bytearray still exported could not be resized)."""
    rows: list[Row] = [(i % 7, b"k%d" % i, b"v" * 100, []) for i in range(2000)]
    body = bytearray(body_of(rows))
    assert len(body) > 64 * 1024
    assert C is not None
    assert same_outcome(bytes(body), 2000) == ("ok", (False, BASE_TS + 6))
    assert C.walk_records(body, 2000, BASE_TS, 1999) == (False, BASE_TS + 6)
    with pytest.raises(InvalidRecordError, match="holds 2000"):
        C.walk_records(body, 2001, BASE_TS, 2000)
    body += b"x"  # resizable again: nothing still holds its buffer
    view = memoryview(body)
    with pytest.raises(InvalidRecordError, match="1 bytes after"):
        C.walk_records(view, 2000, BASE_TS, 1999)
    view.release()
    body.clear()


# -- damaged bodies ------------------------------------------------------------------------------

FORGED = [
    varint(0x7FFF_FFFF),
    varint(1 << 31),
    varint(-(1 << 31) - 1),
    varint(INT64_MAX),
    varint(INT64_MIN),
    varint(1 << 63),
    varint(-(1 << 69)),
    varint((1 << 69) - 1),
    b"\xff" * 9 + b"\x7f",  # ten bytes: the longest accepted
    b"\xff" * 10 + b"\x00",  # eleven: too long
    b"\x86\x80\x80\x00",  # 3, non-minimal
    b"\x80\x00",  # 0, non-minimal
    b"\xff",  # truncated
    b"\x01",  # -1
    b"\x03",  # -2
]


@st.composite
def damaged(draw: st.DrawFn) -> tuple[bytes, int, int]:
    rows = draw(_rows)
    deltas = list(range(len(rows)))
    if draw(st.booleans()):  # an offset-delta gap or repeat
        at = draw(st.integers(0, len(rows) - 1))
        deltas[at] += draw(st.sampled_from([-1, 1, 2, 1 << 31]))
    body = bytearray(body_of(rows, deltas))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["cut", "flip", "insert", "delete", "forge"]))
        at = draw(st.integers(0, max(0, len(body) - 1)))
        if kind == "cut":
            del body[at:]
        elif kind == "flip" and body:
            body[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=3))
        elif kind == "delete":
            del body[at : at + draw(st.integers(1, 3))]
        else:  # a forged varint over what was there
            body[at : at + draw(st.integers(0, 2))] = draw(st.sampled_from(FORGED))
    count = len(rows) + draw(st.sampled_from([0, 0, 0, -1, 1, 5, -len(rows)]))
    return bytes(body), count, draw(_base_ts)


@settings(max_examples=2000, deadline=None)
@given(damaged())
def test_damaged_bodies_get_the_same_verdict(case: tuple[bytes, int, int]) -> None:
    body, count, base_ts = case
    same_outcome(body, count, base_ts)


# -- each rule, in order -------------------------------------------------------------------------


def rec(*fields: bytes, length: bytes | None = None) -> bytes:
    """A record from raw fields (attributes first); ``length`` forged or computed."""
    out = b"".join(fields)
    return (encode_varint(len(out)) if length is None else length) + out


OK_FIELDS = (b"\x00", varint(0), varint(0), varint(1), b"k", varint(1), b"v", varint(0))


def fields(**changes: bytes) -> tuple[bytes, ...]:
    names = ("attributes", "ts", "offset", "key_length", "key", "value_length", "value", "hc")
    out = dict(zip(names, OK_FIELDS, strict=True)) | changes
    return tuple(out.values())


RULES = [
    (rec(*OK_FIELDS), 2, "batch declares 2 records but holds 1 (recordCount 2, lastOffsetDelta 1)"),
    (b"\xff", 1, "record 0: varint runs past the end of the buffer"),
    (b"\xff" * 5 + b"\x00", 1, "record 0: varint longer than 5 bytes or beyond 32 bits"),
    (b"\xff" * 4 + b"\x10", 1, "record 0: varint longer than 5 bytes or beyond 32 bits"),
    (rec(*OK_FIELDS, length=varint(5)), 1, "record 0: length 5 does not fit the 9-byte batch body"),
    (rec(*OK_FIELDS, length=varint(INT32_MAX)), 1, f"record 0: length {INT32_MAX} does not fit"),
    (rec(*OK_FIELDS, length=varint(INT32_MIN)), 1, f"record 0: length {INT32_MIN} does not"),
    (rec(*fields(offset=varint(1))), 1, "record 0: offset delta 1 (deltas must run 0, 1, ...)"),
    (rec(*fields(offset=varint(1 << 30))), 1, f"record 0: offset delta {1 << 30} "),
    (rec(*fields(offset=varint(1 << 31))), 1, "record 0: varint longer than 5 bytes or beyond"),
    (rec(*fields(ts=b"\xff" * 10 + b"\x00")), 1, "record 0: varlong longer than 10 bytes or"),
    (rec(*fields(ts=b"\xff" * 9 + b"\x02")), 1, "record 0: varlong longer than 10 bytes or"),
    (rec(*fields(key_length=varint(-2), key=b"")), 1, "record 0: key length -2"),
    (rec(*fields(key_length=varint(1 << 30), key=b"")), 1, "record 0: varint runs past the end"),
    (rec(*fields(value_length=varint(INT32_MIN))), 1, f"record 0: value length {INT32_MIN}"),
    (rec(*fields(value_length=varint(INT32_MAX))), 1, "record 0: key or value overruns"),
    (rec(*fields(hc=varint(-1))), 1, "record 0: invalid header count -1"),
    (rec(*fields(hc=varint(1) + varint(-1))), 1, "record 0: header key length -1"),
    (rec(*fields(hc=varint(1) + varint(9) + b"x")), 1, "record 0: header key length 9"),
    (rec(*fields(hc=varint(1) + varint(0) + varint(-2))), 1, "record 0: header value length -2"),
    (
        rec(*fields(hc=varint(1) + varint(0) + varint(1 << 30))),
        1,
        f"record 0: header value length {1 << 30}",
    ),
    (rec(*OK_FIELDS, b"??"), 1, "record 0: declares 10 bytes, its fields take 8"),
    (rec(*fields(hc=b"\x02\x00\x01"), length=varint(9)), 1, "record 0: declares 9 bytes, its f"),
    (rec(*OK_FIELDS) + b"\x00\x00", 1, "2 bytes after the batch's 1 records"),
    (rec(*OK_FIELDS), 0, "9 bytes after the batch's 0 records"),
    (rec(*fields(ts=varint(1))), 1, f"record timestamp {INT64_MAX + 1} is not an int64"),
]


@pytest.mark.parametrize(("body", "count", "message"), RULES, ids=[m for *_, m in RULES])
def test_each_rule_refuses_in_both_walks(body: bytes, count: int, message: str) -> None:
    base_ts = INT64_MAX if "timestamp" in message else BASE_TS
    verdict, said = same_outcome(body, count, base_ts)
    assert verdict == "invalid"
    assert isinstance(said, str)
    assert said.startswith(message), said


def test_the_lowest_int64_timestamp_delta_is_accepted() -> None:
    """A 10-byte delta at the bottom of int64 (its tenth byte 0x01) never becomes the maximum."""
    body = rec(*fields(ts=varint(-(1 << 63)))) + rec(
        *fields(offset=varint(1), key_length=varint(-1), key=b"")
    )
    assert same_outcome(body, 2) == ("ok", (True, BASE_TS))
