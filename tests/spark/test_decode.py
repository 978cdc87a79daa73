"""decode_fetch: raw fetched bytes → Arrow rows, checked against protocol.records as the oracle."""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import (
    ATTR_CONTROL,
    Compression,
    CorruptRecordError,
    recompute_crc,
)
from odradek.protocol.records import decode_records
from odradek.spark.decode import decode_fetch
from odradek.spark.schema import arrow_schema

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rows(raw: bytes, start: int = 0, until: int = 1 << 62, headers: bool = True) -> list[dict]:
    batches, _ = decode_fetch(
        raw, topic="t", partition=3, from_offset=start, until_offset=until, include_headers=headers
    )
    for b in batches:
        assert b.schema == arrow_schema(headers)
    return pa.Table.from_batches(batches, schema=arrow_schema(headers)).to_pylist()


def expected(raw_batches: list[bytes], start: int = 0, until: int = 1 << 62) -> list[dict]:
    out = []
    for raw in raw_batches:
        for r in decode_records(raw):
            if start <= r.offset < until:
                out.append(
                    {
                        "key": r.key,
                        "value": r.value,
                        "offset": r.offset,
                        "timestamp_ms": r.timestamp_ms,
                        "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
                    }
                )
    return out


def simplify(decoded: list[dict]) -> list[dict]:
    out = []
    for row in decoded:
        assert row["topic"] == "t" and row["partition"] == 3
        ts = row["timestamp"]
        out.append(
            {
                "key": row["key"],
                "value": row["value"],
                "offset": row["offset"],
                "timestamp_ms": None if ts is None else (ts - EPOCH) // timedelta(milliseconds=1),
                "headers": row["headers"],
            }
        )
    return out


def test_every_column_of_a_plain_batch() -> None:
    raw = encode_batch(
        [
            (b"k0", b"v0", 1_700_000_000_000, [("h", b"x"), ("n", None)]),
            (None, b"v1", 1_700_000_000_005),
            (b"a-key-longer-than-twelve", None, 1_700_000_000_002),
            (b"", b"", 1_700_000_000_001),
        ],
        base_offset=10,
    )
    got = rows(raw)
    assert [r["offset"] for r in got] == [10, 11, 12, 13]
    assert [r["key"] for r in got] == [b"k0", None, b"a-key-longer-than-twelve", b""]
    assert [r["value"] for r in got] == [b"v0", b"v1", None, b""]
    assert [r["timestampType"] for r in got] == [0, 0, 0, 0]
    assert got[0]["headers"] == [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]
    assert got[1]["headers"] is None
    assert simplify(got) == expected([raw])


def test_log_append_time_uses_the_batch_max_timestamp() -> None:
    raw = encode_batch([(b"k", b"v", 5), (b"k", b"w", 9)], log_append_time=True)
    got = rows(raw)
    assert [r["timestampType"] for r in got] == [1, 1]
    assert simplify(got) == expected([raw])


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_compressed_batches(codec: Compression) -> None:
    raws = [
        encode_batch(
            [(f"k{i}".encode(), bytes([i]) * i, i) for i in range(20)],
            base_offset=0,
            compression=codec,
        ),
        encode_batch([(b"x", b"y" * 300, 99)], base_offset=20, compression=codec),
    ]
    assert simplify(rows(b"".join(raws))) == expected(raws)


def test_range_filters_records_and_reports_the_next_offset() -> None:
    raws = [
        encode_batch([(None, f"v{i}".encode(), i) for i in range(5)], base_offset=0),
        encode_batch([(None, f"v{i}".encode(), i) for i in range(5)], base_offset=5),
        encode_batch([(None, b"late", 1)], base_offset=10),
    ]
    data = b"".join(raws)
    batches, next_offset = decode_fetch(
        data, topic="t", partition=3, from_offset=3, until_offset=8, include_headers=False
    )
    got = pa.Table.from_batches(batches).to_pylist()
    assert [r["offset"] for r in got] == [3, 4, 5, 6, 7]
    assert next_offset == 10  # the batch holding 8 is complete, the one at 10 is not read
    assert "headers" not in got[0]


def test_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    first = encode_batch([(None, b"a", 1), (None, b"b", 2)], base_offset=0)
    second = encode_batch([(None, b"c", 3)], base_offset=2)
    batches, next_offset = decode_fetch(
        first + second[:-5],
        topic="t",
        partition=0,
        from_offset=0,
        until_offset=100,
        include_headers=False,
    )
    assert sum(b.num_rows for b in batches) == 2
    assert next_offset == 2
    batches, next_offset = decode_fetch(
        second[:30], topic="t", partition=0, from_offset=2, until_offset=100, include_headers=False
    )
    assert batches == [] and next_offset == 2


def test_control_batches_are_skipped_but_advance_the_offset() -> None:
    control = bytearray(encode_batch([(b"\x00\x00\x00\x01", b"\x00\x00", 7)], base_offset=2))
    attributes = struct.unpack_from(">h", control, 21)[0]
    struct.pack_into(">h", control, 21, attributes | ATTR_CONTROL)
    recompute_crc(control)
    data = encode_batch([(None, b"a", 1), (None, b"b", 2)]) + bytes(control)
    batches, next_offset = decode_fetch(
        data, topic="t", partition=0, from_offset=0, until_offset=100, include_headers=False
    )
    assert [r["value"] for r in pa.Table.from_batches(batches).to_pylist()] == [b"a", b"b"]
    assert next_offset == 3


def test_crc_mismatch_is_corruption() -> None:
    raw = bytearray(encode_batch([(b"k", b"value", 1)]))
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        rows(bytes(raw))


def test_legacy_v1_message_set() -> None:
    body = struct.pack(">bbq", 1, 0, 1234) + struct.pack(">i", 1) + b"k" + struct.pack(">i", 2)
    body += b"vv"
    entry = struct.pack(">qiI", 7, 4 + len(body), zlib.crc32(body)) + body
    got = rows(entry)
    assert [(r["key"], r["value"], r["offset"]) for r in got] == [(b"k", b"vv", 7)]
    assert got[0]["timestamp"] == EPOCH + timedelta(milliseconds=1234)


records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(min_value=0, max_value=2**41),
        st.lists(
            st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=30,
)


@FUZZ
@given(
    st.lists(records_strategy, min_size=1, max_size=4),
    st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD]),
    st.integers(min_value=0, max_value=60),
    st.integers(min_value=0, max_value=60),
)
def test_round_trip_matches_the_record_codec(
    groups: list[list], codec: Compression, start: int, length: int
) -> None:
    raws = []
    base = 0
    for records in groups:
        raws.append(encode_batch(records, base_offset=base, compression=codec))
        base += len(records)
    until = start + length
    assert simplify(rows(b"".join(raws), start, until)) == expected(raws, start, until)
