"""The consumer's two RecordBatch v2 body decoders side by side: the C one
(``odradek.client._record_decoder``, ``Records``) and the pure-Python one
(:class:`odradek.client.record_decoder.DecodedRecords`). On every input both must give the same
records (and those the batch was built from), or both raise CorruptRecordError — never anything
else, never a crash. Batches are built here byte by byte (offset-delta gaps, extreme
timestamps and offsets, overlong varints) and by kafka-python's builder (an independent
encoder); corrupt ones by truncating and flipping bytes of valid ones.

Both decoders run whatever ``NO_ODRADEK_EXTENSIONS`` says (the C module is imported directly);
:func:`test_the_c_decoder_is_built` fails when it was not built, so a broken build cannot
hide behind the pure-Python fallback."""

from __future__ import annotations

import importlib
import os
import random
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from odradek.client import CorruptRecordError
from odradek.client import records as client_records
from odradek.client.record_decoder import DecodedRecords
from odradek.client.records import BatchCursor
from odradek.client.types import ConsumerRecord
from odradek.protocol import compression
from odradek.protocol.varint import encode_varint

try:
    C: ModuleType | None = importlib.import_module("odradek.client._record_decoder")
except ImportError:
    C = None

Header = tuple[str, bytes | None]
# timestamp delta, offset delta, key, value, headers
Row = tuple[int, int, bytes | None, bytes | None, list[Header]]

_TAIL = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiibI")
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1


def test_the_c_decoder_is_built() -> None:
    """gcc is on this machine: ``pip install -e .`` must have built the extension."""
    assert C is not None, (
        "odradek.client._record_decoder is not built (see pyproject.toml ext-modules)"
    )
    assert hasattr(C, "Records")


def test_the_environment_selects_the_decoder() -> None:
    code = "from odradek.client import records; print(records.decode_body.__name__)"
    env = {k: v for k, v in os.environ.items() if k != "NO_ODRADEK_EXTENSIONS"}
    run = [sys.executable, "-c", code]
    native = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert native.stdout.strip() == "Records"
    env["NO_ODRADEK_EXTENSIONS"] = "1"
    pure = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert pure.stdout.strip() == "DecodedRecords"


# -- building batches ----------------------------------------------------------------------------


def record_bytes(row: Row) -> bytes:
    ts_delta, offset_delta, key, value, headers = row
    out = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta)
    out += encode_varint(-1) if key is None else encode_varint(len(key)) + key
    out += encode_varint(-1) if value is None else encode_varint(len(value)) + value
    out += encode_varint(len(headers))
    for name, data in headers:
        raw = name.encode()
        out += encode_varint(len(raw)) + raw
        out += encode_varint(-1) if data is None else encode_varint(len(data)) + data
    return encode_varint(len(out)) + out


def frame(
    body: bytes,
    count: int,
    *,
    base_offset: int = 0,
    base_ts: int = 1_700_000_000_000,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    max_ts: int | None = None,
) -> bytes:
    """A whole v2 batch (header and a valid CRC) around a records section."""
    codec = attributes & 0x07
    if codec:
        body = compression.compress(codec, body)
    last = count - 1 if last_offset_delta is None else last_offset_delta
    tail = _TAIL.pack(
        attributes, last, base_ts, base_ts if max_ts is None else max_ts, -1, -1, -1, count
    )
    crc = crc32c(body, crc32c(tail))
    return _PREFIX.pack(base_offset, 49 + len(body), -1, 2, crc) + tail + body


@contextmanager
def decoder(kind: str) -> Iterator[None]:
    """BatchCursor decodes with the C (``"c"``) or the pure-Python (``"pure"``) decoder."""
    saved = client_records.decode_body
    client_records.decode_body = C.Records if kind == "c" else DecodedRecords
    try:
        yield
    finally:
        client_records.decode_body = saved


Outcome = tuple[str, object]


def decode(kind: str, data: bytes, position: int = 0, chunk: int = 500) -> Outcome:
    """("ok", (records, position after)) or ("corrupt", None); anything else propagates."""
    with decoder(kind):
        cursor = BatchCursor("t", 3, memoryview(data), position)
        out: list[ConsumerRecord] = []
        try:
            while (batch := cursor.next_batch()) is not None:
                if isinstance(batch, list):
                    out += batch
                    continue
                while len(batch):
                    taken = batch.take(chunk)
                    assert 0 < len(taken) <= chunk
                    out += taken
                assert batch.take(chunk) == []
        except CorruptRecordError:
            return ("corrupt", None)
    assert all(type(r) is ConsumerRecord for r in out)
    for r in out:
        assert r.key is None or type(r.key) is bytes
        assert r.value is None or type(r.value) is bytes
        assert all(type(k) is str and (v is None or type(v) is bytes) for k, v in r.headers)
    return ("ok", (out, cursor.position))


def same_outcome(data: bytes, position: int = 0, chunk: int = 500) -> Outcome:
    """Both decoders' outcome, asserted equal."""
    c = decode("c", data, position, chunk)
    pure = decode("pure", data, position, chunk)
    assert c == pure
    return c


def expected(
    rows: list[Row], base_offset: int, base_ts: int, position: int, log_append_ts: int | None
) -> list[ConsumerRecord]:
    offsets = [base_offset + r[1] for r in rows]
    start = 0
    if offsets and offsets[0] < position:
        start = next((i for i, o in enumerate(offsets) if o >= position), len(offsets))
    return [
        ConsumerRecord(
            "t",
            3,
            base_offset + d,
            base_ts + t if log_append_ts is None else log_append_ts,
            0 if log_append_ts is None else 1,
            k,
            v,
            list(h),
        )
        for t, d, k, v, h in rows[start:]
    ]


# -- valid batches -------------------------------------------------------------------------------

_names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)  # non-ASCII too
_blobs = st.one_of(st.none(), st.just(b""), st.binary(max_size=40))
_headers = st.lists(st.tuples(_names, _blobs), max_size=3)
_ts_deltas = st.one_of(
    st.integers(-3, 3), st.integers(-(1 << 40), 1 << 40), st.integers(-(1 << 63), INT64_MAX)
)


@st.composite
def small_rows(draw: st.DrawFn) -> list[Row]:
    """Up to 40 records, every field drawn: gaps in the offset deltas, any timestamp delta."""
    count = draw(st.integers(1, 40))
    rows: list[Row] = []
    delta = draw(st.integers(0, 3))
    for _ in range(count):
        rows.append(
            (
                draw(_ts_deltas),
                delta,
                draw(_blobs),
                draw(st.one_of(_blobs, st.binary(min_size=100, max_size=300))),
                draw(_headers),
            )
        )
        delta += draw(st.sampled_from([1, 1, 1, 2, 70, 9000, 300_000]))
    return rows


@st.composite
def large_rows(draw: st.DrawFn) -> list[Row]:
    """Hundreds to thousands of mostly same-size records (as a producer makes them), with a
    few odd ones: bigger, null, keyed, with headers, a gap, a far timestamp."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    count = draw(st.sampled_from([64, 65, 500, 3000, 8193]))
    size = draw(st.sampled_from([0, 1, 100, 200, 9000]))
    key: bytes | None = draw(st.sampled_from([None, b"", b"key-1"]))
    ts_step = draw(st.sampled_from([0, 1, 100]))
    odd = {rng.randrange(count) for _ in range(draw(st.integers(0, 4)))}
    rows: list[Row] = []
    delta = 0
    for i in range(count):
        row: Row = ((i * ts_step) // 7, delta, key, bytes([i & 0xFF]) * size, [])
        if i in odd:
            kind = rng.choice(["big", "null", "key", "headers", "gap", "ts"])
            if kind == "big":
                row = (*row[:3], bytes(size + 70_000), [])
            elif kind == "null":
                row = (*row[:3], None, [])
            elif kind == "key":
                row = (*row[:2], b"k" * 200, *row[3:])
            elif kind == "headers":
                row = (*row[:4], [("ключ", b"v"), ("", None)])
            elif kind == "gap":
                delta += 5000
                row = (row[0], delta, *row[2:])
            else:
                row = (-(1 << 50), *row[1:])
        rows.append(row)
        delta += 1
    return rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(small_rows(), large_rows()),
    st.sampled_from([0, 5, 1 << 40, INT64_MAX - 100]),  # base offset
    st.sampled_from([0, -5, 1_700_000_000_000, INT64_MAX, -(1 << 63)]),  # base timestamp
    st.integers(0, 3),  # position: before, at, in the batch
    st.sampled_from([0, 0, 0x08, 0x04, 0x01]),  # attributes: LogAppendTime, zstd, gzip
    st.sampled_from([1, 7, 500, 10_000]),  # chunk size taken
)
def test_valid_batches_decode_identically(
    rows: list[Row], base_offset: int, base_ts: int, skip: int, attributes: int, chunk: int
) -> None:
    body = b"".join(map(record_bytes, rows))
    last = rows[-1][1] + 1
    position = base_offset + [0, rows[0][1] + 1, rows[len(rows) // 2][1], last][skip]
    max_ts = base_ts - 17 if base_ts > 0 else base_ts + 17
    data = frame(
        body,
        len(rows),
        base_offset=base_offset,
        base_ts=base_ts,
        last_offset_delta=last,  # as compaction leaves it: past the last record kept
        attributes=attributes,
        max_ts=max_ts,
    )
    want = expected(rows, base_offset, base_ts, position, max_ts if attributes & 0x08 else None)
    assert same_outcome(data, position, chunk) == ("ok", (want, base_offset + last + 1))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=30)), _blobs, _headers),
        min_size=1,
        max_size=30,
    ),
    st.integers(0, 40),
)
def test_kafka_python_batches_decode_identically(
    records: list[tuple[bytes | None, bytes | None, list[Header]]], position: int
) -> None:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, (key, value, headers) in enumerate(records):
        builder.append(i * 2, 1_700_000_000_000 + i, key, value, headers)
    data = bytes(builder.build())
    want = [
        ConsumerRecord("t", 3, i * 2, 1_700_000_000_000 + i, 0, k, v, list(h))
        for i, (k, v, h) in enumerate(records)
        if i * 2 >= position
    ]
    outcome = same_outcome(data, position)
    assert outcome[0] == "ok"
    assert outcome[1][0] == want  # type: ignore[index]


def test_non_monotonic_offset_deltas_skip_the_same_records() -> None:
    """Kafka never writes them, but both decoders skip by the same binary search."""
    deltas = [5, 1, 9, 3, 7, 2, 8]
    body = b"".join(record_bytes((0, d, None, b"v%d" % d, [])) for d in deltas)
    for position in range(12):
        status, _ = same_outcome(frame(body, len(deltas), last_offset_delta=9), position)
        assert status == "ok"


# -- corrupt batches -----------------------------------------------------------------------------

SMALL = [
    (0, 0, b"key", b"value", [("h\u00e9", b"x"), ("n", None)]),
    (-7, 1, None, None, []),
    (1 << 40, 3, b"", b"v" * 130, []),
]


def test_every_truncation_is_corrupt() -> None:
    body = b"".join(map(record_bytes, SMALL))
    for cut in range(len(body)):
        assert same_outcome(frame(body[:cut], len(SMALL))) == ("corrupt", None), cut
    assert same_outcome(frame(body, len(SMALL)))[0] == "ok"


@pytest.mark.parametrize("count", [-1, 0, 2, 4, INT32_MAX])
def test_a_wrong_record_count_is_corrupt(count: int) -> None:
    body = b"".join(map(record_bytes, SMALL))
    assert same_outcome(frame(body, count, last_offset_delta=3)) == ("corrupt", None)


def test_every_byte_flip_gives_the_same_outcome() -> None:
    body = b"".join(map(record_bytes, SMALL))
    for i in range(len(body)):
        for new in {body[i] ^ 0x01, body[i] ^ 0x80, body[i] ^ 0xFF, 0x00, 0x7F, 0x80, 0xFF}:
            mutated = body[:i] + bytes([new]) + body[i + 1 :]
            same_outcome(frame(mutated, len(SMALL), last_offset_delta=3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    small_rows(),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(-3, 3),
)
def test_random_damage_gives_the_same_outcome(
    rows: list[Row], edits: list[tuple[int, int]], count_error: int
) -> None:
    body = bytearray(b"".join(map(record_bytes, rows)))
    for at, value in edits:
        body[at % len(body)] = value
    same_outcome(frame(bytes(body), len(rows) + count_error, last_offset_delta=rows[-1][1]))


def one(rec: bytes) -> Outcome:
    """The outcome of a batch of one record given as its bytes after the length field."""
    return same_outcome(frame(encode_varint(len(rec)) + rec, 1))


@pytest.mark.parametrize(
    ("rec", "want"),
    [
        # key length -1 in a non-minimal encoding (0x81 0x00): a null key, as Kafka reads it
        (b"\x00\x00\x00\x81\x00\x02v\x00", (None, b"v")),
        # value length 1 in five bytes: accepted
        (b"\x00\x00\x00\x01\x82\x80\x80\x80\x00v\x00", (None, b"v")),
        # timestamp delta 0 in ten bytes: accepted
        (b"\x00" + b"\x80" * 9 + b"\x00\x00\x01\x02v\x00", (None, b"v")),
    ],
)
def test_non_minimal_varints_are_accepted(rec: bytes, want: tuple[bytes | None, bytes]) -> None:
    status, got = one(rec)
    assert status == "ok"
    [record] = got[0]  # type: ignore[index]
    assert (record.key, record.value) == want


@pytest.mark.parametrize(
    "rec",
    [
        b"\x00\x00\x00\x03\x02v\x00",  # key length -2
        b"\x00\x00\x00\x01\x05\x00",  # value length -3
        b"\x00\x00\x00\x01\x02v\x01",  # header count -1
        b"\x00\x00\x00\x01\x02v\x02\x01\x00",  # header key length -1
        b"\x00\x00\x00\x01\x02v\x02\x00\x03",  # header value length -2
        b"\x00\x00\x00\x01\x02v\x02\x04\xff\xfe\x00",  # header key not UTF-8
        b"\x00\x00\x00\x01\x02v\x02\x06\xed\xa0\x80\x00",  # a UTF-8-encoded surrogate
        b"\x00\x00\x00\x01\x7e\xff\xff\x00",  # value length runs past the record
        b"\x00\x00\x00\x01\x82\x80\x80\x80\x80\x00v\x00",  # a six-byte varint
        b"\x00\x00\x00\x01\x82\x80\x80\x80\x10v\x00",  # a varint beyond 32 bits
        b"\x00" + b"\x80" * 10 + b"\x00\x00\x01\x02v\x00",  # an eleven-byte varlong
        b"\x00" + b"\x80" * 9 + b"\x02\x00\x01\x02v\x00",  # a varlong beyond 64 bits
        b"\x00\x00\x00\x01\x02v\x00\x00",  # a byte after the fields, inside the record
        b"",  # nothing after the length
    ],
)
def test_malformed_records_are_corrupt(rec: bytes) -> None:
    assert one(rec) == ("corrupt", None)


@pytest.mark.parametrize("length", [-1, -5, 0, 6, 8, 1000, INT32_MAX])
def test_a_record_length_that_disagrees_is_corrupt(length: int) -> None:
    rec = b"\x00\x00\x00\x01\x02v\x00"  # 7 bytes
    body = encode_varint(length) + rec + record_bytes((0, 1, None, b"w", []))
    assert same_outcome(frame(body, 2)) == ("corrupt", None)


def test_trailing_bytes_are_corrupt() -> None:
    body = b"".join(map(record_bytes, SMALL)) + b"\x00"
    assert same_outcome(frame(body, len(SMALL))) == ("corrupt", None)


# -- the C object itself -------------------------------------------------------------------------


def test_records_hold_no_references_after_use() -> None:
    assert C is not None
    topic = f"topic-{random.randrange(10**9)}"  # a fresh object, counted alone
    body = b"".join(map(record_bytes, SMALL))
    before = sys.getrefcount(topic)
    for _ in range(200):
        records = C.Records(body, 3, 10, 1000, None, 0, topic, 1, 0)
        assert len(records.take(2)) == 2 and len(records) == 1
        del records
        with pytest.raises(client_records.CorruptRecordError):
            C.Records(body[:-1], 3, 10, 1000, None, 0, topic, 1, 0)
    assert sys.getrefcount(topic) == before


@pytest.mark.parametrize("kind", ["c", "pure"])
def test_records_taken_after_the_fetch_buffer_is_reused_are_intact(kind: str) -> None:
    rows: list[Row] = [(0, i, b"k%d" % i, b"value-%d" % i, [("h", b"%d" % i)]) for i in range(20)]
    buffer = bytearray(frame(b"".join(map(record_bytes, rows)), len(rows)))
    with decoder(kind):
        batch = BatchCursor("t", 3, memoryview(buffer), 0).next_batch()
        assert batch is not None and not isinstance(batch, list)
        first = batch.take(5)
        buffer[:] = bytes(len(buffer))  # the connection reads the next response into it
        rest = batch.take(100)
    assert first + rest == expected(rows, 0, 1_700_000_000_000, 0, None)


def test_the_c_decoder_takes_bytes_only() -> None:
    assert C is not None
    body = record_bytes((0, 0, b"k", b"value", []))
    with pytest.raises(TypeError):
        C.Records(bytearray(body), 1, 0, 0, None, 0, "t", 0, 0)
    [record] = C.Records(body, 1, 0, 0, None, 0, "t", 0, 0).take(1)
    assert (record.key, record.value) == (b"k", b"value")
