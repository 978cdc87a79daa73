"""The Spark reader's two record decoders side by side: the compiled
``odradek.spark._arrow_records`` and its numpy twin :mod:`odradek.spark.columns`.

On every input both must give the same Arrow columns (and, through ``decode_fetch``, the same
rows as the record codec), or both raise CorruptRecordError — never anything else, never a
crash. Inputs: honest bodies from ``encode_batch``, bodies with hand-made overlong varints,
and damaged ones (bytes flipped, cut, inserted; record counts changed).

Both decoders run whatever ``NO_ODRADEK_EXTENSIONS`` says (the C module is imported directly);
:func:`test_the_compiled_decoder_is_built` fails when it was not built.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import Compression, CorruptRecordError
from odradek.protocol.varint import encode_varint
from odradek.spark import columns, decode
from tests.spark.test_decode import expected, records_strategy, simplify

try:
    C: ModuleType | None = importlib.import_module("odradek.spark._arrow_records")
except ImportError:
    C = None

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
needs_c = pytest.mark.skipif(C is None, reason="the compiled decoder is not built")
_HEADER_BYTES = 61


def test_the_compiled_decoder_is_built() -> None:
    """gcc is on this machine: ``pip install -e .`` must have built the extension."""
    assert C is not None, "odradek.spark._arrow_records is not built (pyproject ext-modules)"


def test_the_switch_selects_the_twin() -> None:
    disabled = bool(os.environ.get("NO_ODRADEK_EXTENSIONS"))
    assert (decode.records_to_columns is columns.records_to_columns) == disabled


def _body(records: list, **options: Any) -> bytes:
    return encode_batch(records, **options)[_HEADER_BYTES:]


def outcome(fn: Any, bodies: list[bytes], counts: list[int], **kw: Any) -> Any:
    """What ``fn`` makes of the bodies, as plain Python values (or the error type)."""
    n_batches = len(bodies)
    args = (
        bodies,
        counts,
        kw.get("base_offsets", [1000 * i for i in range(n_batches)]),
        kw.get("base_timestamps", [1_700_000_000_000] * n_batches),
        kw.get("append_timestamps", [-1] * n_batches),
        kw.get("from_offset", 0),
        kw.get("until_offset", 1 << 62),
        kw.get("want_key", True),
        kw.get("want_value", True),
        kw.get("want_headers", True),
    )
    try:
        n, key, value, offsets, timestamps, types, spans = fn(*args)
    except CorruptRecordError:
        return CorruptRecordError
    out: dict[str, Any] = {"n": n}
    out["key"] = None if key is None else decode._binary(key, n).to_pylist()
    out["value"] = None if value is None else decode._binary(value, n).to_pylist()
    out["offsets"] = np.frombuffer(offsets, dtype=np.int64).tolist()
    out["timestamps"] = np.frombuffer(timestamps, dtype=np.int64).tolist()
    out["types"] = np.frombuffer(types, dtype=np.int32).tolist()
    out["spans"] = None if spans is None else np.frombuffer(spans, dtype=np.int64).tolist()
    try:
        out["headers"] = decode._headers(bodies, n, spans).to_pylist()
    except CorruptRecordError:
        out["headers"] = CorruptRecordError
    return out


def both(bodies: list[bytes], counts: list[int], **kw: Any) -> Any:
    assert C is not None
    twin = outcome(columns.records_to_columns, bodies, counts, **kw)
    compiled = outcome(C.records_to_columns, bodies, counts, **kw)
    assert compiled == twin
    return compiled


@needs_c
def test_columns_of_honest_bodies() -> None:
    bodies = [
        _body([(b"k0", b"v0", 1_700_000_000_000, [("h", b"x")]), (None, b"v1", 1_700_000_000_005)]),
        _body(
            [(b"a-key-longer-than-twelve", None, 1_700_000_000_002), (b"", b"", 1_700_000_000_009)]
        ),
    ]
    bases = [1_700_000_000_000, 1_700_000_000_002]  # each batch's first timestamp
    got = both(bodies, [2, 2], from_offset=1, until_offset=1001, base_timestamps=bases)
    assert got["n"] == 2
    assert got["key"] == [None, b"a-key-longer-than-twelve"]
    assert got["value"] == [b"v1", None]
    assert got["offsets"] == [1, 1000]
    assert got["timestamps"] == [1_700_000_000_005_000, 1_700_000_000_002_000]
    assert got["headers"] == [None, None]
    first = both(bodies, [2, 2], base_timestamps=bases)
    assert first["headers"][0] == [{"key": "h", "value": b"x"}]


@needs_c
def test_log_append_time_and_skipped_columns() -> None:
    body = _body([(b"k", b"v", 5), (None, b"w", 9)])
    got = both([body], [2], append_timestamps=[77], want_key=False, want_headers=False)
    assert got["key"] is None and got["spans"] is None
    assert got["value"] == [b"v", b"w"]
    assert got["timestamps"] == [77_000, 77_000] and got["types"] == [1, 1]


@needs_c
def test_overlong_varints() -> None:
    """Non-minimal varints are accepted (as Kafka does); an eleventh byte is corruption; a
    record length past 64 bits is corruption; a field's bits past 64 are dropped by both."""
    padded_zero = b"\x80" * 9 + b"\x00"  # 0 in ten bytes
    record = b"\x00" + padded_zero + b"\x00" + encode_varint(-1) + encode_varint(1) + b"v\x00"
    good = encode_varint(len(record)) + record
    assert both([good], [1])["value"] == [b"v"]
    eleven = b"\x00" + b"\x80" * 10 + b"\x00" + b"\x00" + encode_varint(-1) + b"\x02v\x00"
    assert both([encode_varint(len(eleven)) + eleven], [1]) is CorruptRecordError
    wrapped = b"\x00" + b"\x80" * 9 + b"\x7e" + b"\x00\x01\x02v\x00"  # timestamp delta > 64 bits
    assert both([encode_varint(len(wrapped)) + wrapped], [1])["n"] == 1
    huge_length = b"\x8c" + b"\x80" * 8 + b"\x02"  # 6 + 2**64 (zig-zag), wraps to 6 in 64 bits
    assert both([huge_length + b"\x00\x00\x00\x01\x01\x00"], [1]) is CorruptRecordError


@needs_c
@FUZZ
@given(
    st.lists(records_strategy, min_size=1, max_size=3),
    st.integers(min_value=0, max_value=60),
    st.integers(min_value=0, max_value=2000),
    st.booleans(),
)
def test_honest_bodies_agree(groups: list, start: int, until: int, want_key: bool) -> None:
    bodies = [_body(records) for records in groups]
    got = both(
        bodies,
        [len(r) for r in groups],
        from_offset=start,
        until_offset=until,
        want_key=want_key,
    )
    assert got is not CorruptRecordError


@needs_c
@FUZZ
@given(
    st.lists(records_strategy, min_size=1, max_size=2),
    st.lists(
        st.tuples(
            st.sampled_from(["flip", "cut", "insert", "count"]),
            st.integers(min_value=0, max_value=1 << 16),
            st.integers(min_value=0, max_value=255),
        ),
        min_size=1,
        max_size=3,
    ),
    st.booleans(),
)
def test_damaged_bodies_agree(groups: list, damage: list, want_headers: bool) -> None:
    bodies = [bytearray(_body(records)) for records in groups]
    counts = [len(r) for r in groups]
    for what, where, byte in damage:
        i = where % len(bodies)
        body = bodies[i]
        at = where % (len(body) + 1)
        if what == "flip" and body:
            body[at % len(body)] ^= byte or 1
        elif what == "cut":
            del body[at:]
        elif what == "insert":
            body[at:at] = bytes([byte])
        else:
            counts[i] = max(0, counts[i] + (byte % 5) - 2)
    both([bytes(b) for b in bodies], counts, want_headers=want_headers)


@needs_c
@FUZZ
@given(st.lists(st.binary(max_size=80), min_size=1, max_size=3), st.data())
def test_arbitrary_bytes_agree(bodies: list[bytes], data: st.DataObject) -> None:
    counts = [data.draw(st.integers(min_value=0, max_value=12)) for _ in bodies]
    both(bodies, counts)


@FUZZ
@given(
    st.lists(records_strategy, min_size=1, max_size=3),
    st.sampled_from([Compression.NONE, Compression.ZSTD]),
    st.integers(min_value=0, max_value=60),
)
def test_decode_fetch_matches_the_codec_on_either_decoder(
    groups: list, codec: Compression, start: int
) -> None:
    """``decode_fetch`` (whichever decoder the switch selected) against the record codec."""
    raws, base = [], 0
    for records in groups:
        raws.append(encode_batch(records, base_offset=base, compression=codec))
        base += len(records)
    batches, _ = decode.decode_fetch(
        b"".join(raws),
        topic="t",
        partition=3,
        from_offset=start,
        until_offset=1 << 62,
        include_headers=True,
    )
    table = pa.Table.from_batches(batches, schema=decode.arrow_schema(True))
    assert simplify(table.to_pylist()) == expected(raws, start)


def test_decode_fetch_columns_keyword() -> None:
    raw = encode_batch([(b"k", b"v", 1, [("h", b"x")])])
    batches, _ = decode.decode_fetch(
        raw,
        topic="t",
        partition=0,
        from_offset=0,
        until_offset=9,
        include_headers=True,
        columns={"value", "offset"},
    )
    row = batches[0].to_pylist()[0]
    assert (row["key"], row["value"], row["offset"], row["headers"]) == (None, b"v", 0, None)
