"""RecordBatch v2: golden bytes, round-trips, validation, corruption, kafka-python oracle."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record._crc32c import crc as kafka_crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from odradek.protocol.batch_builder import BatchBuilder, encode_batch
from odradek.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    CorruptRecordError,
    TimestampType,
    parse_batch_header,
    patch_base_offset,
    recompute_crc,
    validate_batch,
    validate_client_batch,
)
from odradek.protocol.records import Record, decode_records
from odradek.protocol.varint import encode_varint

Headers = Sequence[tuple[str, bytes | None]]
RecordInput = tuple[bytes | None, bytes | None, int, Headers]

# Field offsets of the v2 header (see protocol/record_batch.py).
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
MAX_TIMESTAMP_AT = 35
RECORD_COUNT_AT = 57

# -- strategies ------------------------------------------------------------------------------

nullable_bytes = st.none() | st.binary(max_size=40)
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
)
record_inputs = st.lists(
    st.tuples(nullable_bytes, nullable_bytes, st.integers(0, 1 << 45), header_lists),
    min_size=1,
    max_size=15,
)
codecs = st.sampled_from(list(Compression))
offsets = st.integers(0, (1 << 62) - 1)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(
    records: Sequence[RecordInput],
    codec: Compression = Compression.NONE,
    base_offset: int = 0,
    **options: int | bool,
) -> bytes:
    builder = BatchBuilder(codec)
    for key, value, ts, headers in records:
        builder.append(value, key, ts, headers)
    return builder.build(base_offset, **options)  # type: ignore[arg-type]


def expected(
    records: Sequence[RecordInput], base_offset: int, log_append_ms: int | None = None
) -> list[Record]:
    return [
        Record(
            base_offset + i,
            ts if log_append_ms is None else log_append_ms,
            key,
            value,
            tuple(headers),
        )
        for i, (key, value, ts, headers) in enumerate(records)
    ]


def kafka_python_build(records: Sequence[RecordInput], codec: Compression) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for delta, (key, value, ts, headers) in enumerate(records):
        assert builder.append(delta, ts, key, value, list(headers)) is not None
    return bytes(builder.build())


def kafka_python_read(batch: bytes) -> list[Record]:
    parsed = DefaultRecordBatch(batch)
    assert parsed.validate_crc()
    return [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in parsed]


def patched(batch: bytes, at: int, fmt: str, value: int) -> bytearray:
    """A copy of ``batch`` with one header field overwritten and the CRC recomputed."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, at, value)
    recompute_crc(out)
    return out


SIMPLE: list[RecordInput] = [
    (b"k1", b"v1", 1_700_000_000_000, ()),
    (None, b"v2", 1_700_000_000_005, [("trace", b"abc")]),
    (b"k3", None, 1_700_000_000_002, [("n", None), ("e", b"")]),
]


# -- golden bytes ------------------------------------------------------------------------------

# Derived by hand: three records, base offset 42, producer 5 epoch 1 sequence 0.
#   record 0: len 9  | attrs 00 | tsDelta 0 -> 00 | offDelta 0 -> 00 | key "k" (02 6b)
#             | value "v1" (04 76 31) | headers 0 -> 00
#   record 1: len 10 | 00 | tsDelta 5 -> 0a | 1 -> 02 | key null -> 01 | value "" -> 00
#             | 1 header -> 02 | "h" (02 68) | "x" (02 78)
#   record 2: len 9  | 00 | tsDelta -1 -> 01 | 2 -> 04 | key "" -> 00 | value null -> 01
#             | 1 header -> 02 | "n" (02 6e) | null -> 01
GOLDEN_RECORDS = (
    "12" + "00" + "00" + "00" + "026b" + "047631" + "00",
    "14" + "00" + "0a" + "02" + "01" + "00" + "02" + "0268" + "0278",
    "12" + "00" + "01" + "04" + "00" + "01" + "02" + "026e" + "01",
)
GOLDEN_HEX = (
    "000000000000002a"  # baseOffset 42
    "00000050"  # batchLength 80 = 49 + 31 bytes of records
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic
    "ba038f36"  # CRC-32C of bytes 21..end
    "0000"  # attributes
    "00000002"  # lastOffsetDelta
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003ed"  # maxTimestamp 1005
    "0000000000000005"  # producerId
    "0001"  # producerEpoch
    "00000000"  # baseSequence
    "00000003" + "".join(GOLDEN_RECORDS)  # recordCount
)


def golden_batch() -> bytes:
    return encode_batch(
        [
            (b"k", b"v1", 1000),
            (None, b"", 1005, [("h", b"x")]),
            (b"", None, 999, [("n", None)]),
        ],
        base_offset=42,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
    )


def test_golden_bytes() -> None:
    records = bytes.fromhex("".join(GOLDEN_RECORDS))
    tail = struct.pack(">hiqqqhii", 0, 2, 1000, 1005, 5, 1, 0, 3)
    crc = kafka_crc32c(tail + records)  # pure-Python CRC-32C, independent of ours
    head = struct.pack(">qiibI", 42, 49 + len(records), -1, 2, crc)
    assert head + tail + records == bytes.fromhex(GOLDEN_HEX)
    assert golden_batch().hex() == GOLDEN_HEX


def test_golden_header_and_records() -> None:
    batch = golden_batch()
    header = validate_client_batch(batch)
    assert header == parse_batch_header(batch)
    assert header.base_offset == 42
    assert header.batch_length == 80
    assert header.size_bytes == len(batch) == 92
    assert header.partition_leader_epoch == -1
    assert header.magic == 2
    assert header.crc == 0xBA038F36
    assert header.last_offset == 44
    assert header.next_offset == 45
    assert header.record_count == 3
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1005)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 1, 0)
    assert header.compression is Compression.NONE
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert not header.is_transactional
    assert not header.is_control
    assert decode_records(batch) == [
        Record(42, 1000, b"k", b"v1", ()),
        Record(43, 1005, None, b"", (("h", b"x"),)),
        Record(44, 999, b"", None, (("n", None),)),
    ]


def test_golden_bytes_match_kafka_python_builder() -> None:
    records: list[RecordInput] = [
        (b"k", b"v1", 1000, ()),
        (None, b"", 1005, [("h", b"x")]),
        (b"", None, 999, [("n", None)]),
    ]
    theirs = kafka_python_build(records, Compression.NONE)
    ours = build(records)
    # kafka-python writes partitionLeaderEpoch 0 (bytes 12..15, outside the CRC); all else equal.
    assert ours[:12] == theirs[:12]
    assert theirs[12:16] == b"\x00\x00\x00\x00"
    assert ours[16:] == theirs[16:]


@FUZZ
@given(record_inputs)
def test_we_build_the_bytes_kafka_python_builds(records: list[RecordInput]) -> None:
    """An encoder independent of ours (the client's pure-Python record buffer encodes with
    ours): byte for byte, but for kafka-python's partitionLeaderEpoch 0."""
    theirs = kafka_python_build(records, Compression.NONE)
    assert build(records, partition_leader_epoch=0) == theirs


# -- builder -------------------------------------------------------------------------------------


def test_builder_counts_and_sizes() -> None:
    builder = BatchBuilder()
    assert len(builder) == 0
    assert builder.size_bytes == HEADER_SIZE
    assert builder.append(b"a") == 0
    assert builder.append(b"b", b"k", 5) == 1
    assert len(builder) == 2
    assert builder.size_bytes == len(builder.build())


def test_empty_builder_cannot_build() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        BatchBuilder().build()


def test_build_options_land_in_the_header() -> None:
    batch = build(
        SIMPLE,
        base_offset=7,
        producer_id=123456789,
        producer_epoch=3,
        base_sequence=99,
        partition_leader_epoch=4,
        transactional=True,
    )
    header = validate_batch(batch)
    assert header.base_offset == 7
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (123456789, 3, 99)
    assert header.partition_leader_epoch == 4
    assert header.is_transactional
    assert header.attributes == 0x10
    parsed = DefaultRecordBatch(batch)
    assert parsed.is_transactional
    assert (parsed.producer_id, parsed.producer_epoch, parsed.base_sequence) == (123456789, 3, 99)


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    batch = build(SIMPLE, log_append_time=True)
    header = validate_batch(batch)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 1_700_000_000_005
    assert decode_records(batch) == expected(SIMPLE, 0, 1_700_000_000_005)
    assert kafka_python_read(batch) == expected(SIMPLE, 0, 1_700_000_000_005)


def test_broker_style_log_append_time_patch() -> None:
    # What a broker does for message.timestamp.type=LogAppendTime: set bit 3 and maxTimestamp.
    batch = bytearray(build(SIMPLE))
    struct.pack_into(">h", batch, ATTRIBUTES_AT, 0x08)
    struct.pack_into(">q", batch, MAX_TIMESTAMP_AT, 1_800_000_000_000)
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate_batch(batch)
    recompute_crc(batch)
    assert validate_client_batch(batch).timestamp_type is TimestampType.LOG_APPEND_TIME
    assert decode_records(batch) == expected(SIMPLE, 0, 1_800_000_000_000)
    assert kafka_python_read(bytes(batch)) == expected(SIMPLE, 0, 1_800_000_000_000)


def test_null_keys() -> None:
    records: list[RecordInput] = [(None, b"value-%d" % i, 1000 + i, ()) for i in range(5)]
    for codec in Compression:
        batch = build(records, codec)
        assert [r.key for r in decode_records(batch)] == [None] * 5
        assert [r.key for r in kafka_python_read(batch)] == [None] * 5
    # A null key is the single varint -1 (0x01); an empty key is length 0 (0x00).
    assert build([(None, b"", 0, ())])[HEADER_SIZE:] == bytes.fromhex("0c" + "00000001" + "0000")
    assert build([(b"", b"", 0, ())])[HEADER_SIZE:] == bytes.fromhex("0c" + "00000000" + "0000")


# -- round-trips -------------------------------------------------------------------------------


@FUZZ
@given(record_inputs, codecs, offsets, st.booleans())
def test_round_trip(
    records: list[RecordInput], codec: Compression, base_offset: int, log_append: bool
) -> None:
    batch = build(records, codec, base_offset, log_append_time=log_append)
    header = validate_client_batch(batch)
    timestamps = [ts for _, _, ts, _ in records]
    assert header.size_bytes == len(batch)
    assert header.compression is codec
    assert header.record_count == len(records)
    assert header.last_offset == base_offset + len(records) - 1
    assert header.base_timestamp == timestamps[0]
    assert header.max_timestamp == max(timestamps)
    got = decode_records(batch)
    assert got == expected(records, base_offset, max(timestamps) if log_append else None)
    # The same batch inside a larger buffer decodes the same.
    assert validate_batch(b"junk" + batch + b"more", 4) == header
    assert decode_records(memoryview(batch + b"trailing")) == got
    assert decode_records(bytearray(batch)) == got


@FUZZ
@given(record_inputs, codecs, offsets)
def test_kafka_python_reads_what_we_build(
    records: list[RecordInput], codec: Compression, base_offset: int
) -> None:
    batch = build(records, codec, base_offset)
    parsed = DefaultRecordBatch(batch)
    assert parsed.validate_crc()
    assert parsed.base_offset == base_offset
    assert parsed.magic == 2
    assert parsed.compression_type == codec
    assert parsed.records_count == len(records)
    assert parsed.last_offset_delta == len(records) - 1
    assert parsed.first_timestamp == records[0][2]
    assert parsed.max_timestamp == max(ts for _, _, ts, _ in records)
    assert parsed.size_in_bytes == len(batch)
    assert kafka_python_read(batch) == expected(records, base_offset)


@FUZZ
@given(record_inputs, codecs)
def test_we_read_what_kafka_python_builds(records: list[RecordInput], codec: Compression) -> None:
    batch = kafka_python_build(records, codec)
    header = validate_client_batch(batch)
    # kafka-python falls back to no compression when it does not pay off.
    assert header.compression in (codec, Compression.NONE)
    assert header.record_count == len(records)
    assert decode_records(batch) == expected(records, 0)


@pytest.mark.parametrize("codec", list(Compression))
def test_kafka_python_compressed_batches(codec: Compression) -> None:
    records: list[RecordInput] = [
        (b"key-%d" % (i % 7) if i % 3 else None, b"payload " * 20, 1000 + i, [("i", b"%d" % i)])
        for i in range(200)
    ]
    theirs = kafka_python_build(records, codec)
    assert validate_client_batch(theirs).compression is codec  # really compressed
    assert decode_records(theirs) == expected(records, 0)
    ours = build(records, codec, 1000)
    if codec is not Compression.NONE:
        assert len(ours) < len(build(records)) // 4
    assert kafka_python_read(ours) == expected(records, 1000)


# -- offsets and CRC -----------------------------------------------------------------------------


def test_patch_base_offset_keeps_the_crc() -> None:
    batch = build(SIMPLE)
    buf = bytearray(b"x" * 10 + batch)
    patch_base_offset(buf, 10, 5_000_000_000)
    assert validate_client_batch(buf, 10).base_offset == 5_000_000_000
    assert buf[10 + 8 :] == batch[8:]
    assert decode_records(buf[10:]) == expected(SIMPLE, 5_000_000_000)
    view = memoryview(bytearray(batch))
    patch_base_offset(view, 0, 17)
    assert decode_records(view)[0].offset == 17
    assert kafka_python_read(bytes(view))[-1].offset == 19


def test_recompute_crc_at_a_position() -> None:
    batch = build(SIMPLE)
    buf = bytearray(b"\x00" * 3 + batch)
    struct.pack_into(">q", buf, 3 + MAX_TIMESTAMP_AT, 1)
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate_batch(buf, 3)
    recompute_crc(buf, 3)
    assert validate_batch(buf, 3).max_timestamp == 1
    assert DefaultRecordBatch(bytes(buf[3:])).validate_crc()


def test_back_to_back_batches() -> None:
    batches = [build(SIMPLE, codec, 100 * i) for i, codec in enumerate(Compression)]
    log = b"".join(batches)
    pos, seen = 0, []
    while pos < len(log):
        header = validate_batch(log, pos)
        seen.append((header.base_offset, header.compression))
        one = log[pos : pos + header.size_bytes]
        assert decode_records(one) == expected(SIMPLE, header.base_offset)
        pos += header.size_bytes
    assert seen == [(100 * i, codec) for i, codec in enumerate(Compression)]


# -- one byte at a time ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Compression))
def test_every_truncated_prefix_is_corrupt(codec: Compression) -> None:
    batch = build(SIMPLE, codec, 9)
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            validate_batch(batch[:cut])
        with pytest.raises(CorruptRecordError):
            validate_batch(b"\x00" * 5 + batch[:cut], 5)
    assert validate_batch(batch).size_bytes == len(batch)


@FUZZ
@given(record_inputs, codecs)
def test_truncated_prefixes_of_random_batches(
    records: list[RecordInput], codec: Compression
) -> None:
    batch = build(records, codec)
    for cut in range(0, len(batch), max(1, len(batch) // 40)):
        with pytest.raises(CorruptRecordError):
            validate_batch(batch[:cut])


@pytest.mark.parametrize("codec", list(Compression))
def test_every_single_byte_corruption(codec: Compression) -> None:
    batch = build(SIMPLE, codec, 9)
    for position in range(len(batch)):
        for mask in (0x01, 0x80, 0xFF):
            corrupt = bytearray(batch)
            corrupt[position] ^= mask
            if position < 8 or 12 <= position < 16:
                # baseOffset and partitionLeaderEpoch are outside the CRC by design.
                validate_batch(corrupt)
                continue
            if position >= 21:
                with pytest.raises(CorruptRecordError, match="CRC mismatch"):
                    validate_batch(corrupt)
            else:  # batchLength, magic or the CRC field itself
                with pytest.raises(CorruptRecordError):
                    validate_batch(corrupt)


@FUZZ
@given(record_inputs, codecs, st.data())
def test_random_corruption_after_byte_21_is_caught(
    records: list[RecordInput], codec: Compression, data: st.DataObject
) -> None:
    batch = bytearray(build(records, codec))
    position = data.draw(st.integers(21, len(batch) - 1))
    batch[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate_batch(batch)


@settings(max_examples=300, deadline=None)
@given(codecs, st.data())
def test_decoding_a_crc_valid_but_damaged_body_raises_only_corrupt_record(
    codec: Compression, data: st.DataObject
) -> None:
    batch = bytearray(build(SIMPLE * 3, codec))
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
        batch[position] ^= data.draw(st.integers(1, 255))
    recompute_crc(batch)
    validate_batch(batch)
    try:
        records = decode_records(batch)
    except CorruptRecordError:
        return
    assert all(isinstance(r, Record) for r in records)


@settings(max_examples=200, deadline=None)
@given(codecs, st.binary(max_size=200), st.integers(0, 50))
def test_decoding_a_garbage_body_raises_only_corrupt_record(
    codec: Compression, body: bytes, count: int
) -> None:
    batch = bytearray(build([(None, b"x", 0, ())], codec))[:HEADER_SIZE] + body
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">i", batch, RECORD_COUNT_AT, count)
    recompute_crc(batch)
    validate_batch(batch)
    with contextlib.suppress(CorruptRecordError):
        decode_records(batch)


# -- validation rules --------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_other_magic_is_rejected(magic: int) -> None:
    batch = bytearray(build(SIMPLE))
    batch[16] = magic
    with pytest.raises(CorruptRecordError, match=f"unsupported record batch magic {magic}"):
        validate_batch(batch)


@pytest.mark.parametrize("batch_length", [-1, 0, 48])
def test_batch_length_below_minimum(batch_length: int) -> None:
    batch = bytearray(build(SIMPLE))
    struct.pack_into(">i", batch, 8, batch_length)
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        validate_batch(batch)


def test_batch_length_past_the_buffer() -> None:
    batch = bytearray(build(SIMPLE))
    struct.pack_into(">i", batch, 8, len(batch))
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batch(batch)


def test_negative_count_or_delta_is_rejected() -> None:
    batch = build(SIMPLE)
    with pytest.raises(CorruptRecordError, match="negative"):
        validate_batch(patched(batch, RECORD_COUNT_AT, ">i", -1))
    with pytest.raises(CorruptRecordError, match="negative"):
        validate_batch(patched(batch, LAST_OFFSET_DELTA_AT, ">i", -1))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_is_corrupt(codec_id: int) -> None:
    batch = patched(build(SIMPLE), ATTRIBUTES_AT, ">h", codec_id)
    with pytest.raises(CorruptRecordError, match="unknown compression codec"):
        validate_batch(batch)
    with pytest.raises(CorruptRecordError, match="unknown compression codec"):
        decode_records(batch)


def test_undecompressable_body_is_corrupt() -> None:
    batch = patched(build(SIMPLE), ATTRIBUTES_AT, ">h", int(Compression.GZIP))
    validate_batch(batch)
    with pytest.raises(CorruptRecordError, match="gzip"):
        decode_records(batch)


def test_client_batch_with_zero_records() -> None:
    batch = patched(patched(build(SIMPLE[:1]), RECORD_COUNT_AT, ">i", 0), 0, ">q", 0)
    assert validate_batch(batch).record_count == 0
    with pytest.raises(CorruptRecordError, match="invalid record count 0"):
        validate_client_batch(batch)


def test_client_batch_with_inconsistent_last_offset_delta() -> None:
    batch = patched(build(SIMPLE), LAST_OFFSET_DELTA_AT, ">i", 5)
    # A compacted batch on disk may cover more offsets than it holds records.
    header = validate_batch(batch)
    assert header.last_offset == 5
    assert decode_records(batch) == expected(SIMPLE, 0)
    with pytest.raises(CorruptRecordError, match="inconsistent batch offset range"):
        validate_client_batch(batch)
    with pytest.raises(CorruptRecordError, match="inconsistent"):
        validate_client_batch(patched(build(SIMPLE), LAST_OFFSET_DELTA_AT, ">i", 1))


def test_control_batch() -> None:
    # A COMMIT marker as a transaction coordinator writes it: key = version int16 0 and
    # type int16 (0 abort, 1 commit); value = version int16 0, coordinatorEpoch int32.
    key = struct.pack(">hh", 0, 1)
    value = struct.pack(">hi", 0, 7)
    plain = build([(key, value, 1234, ())], producer_id=77, producer_epoch=2, transactional=True)
    batch = bytearray(plain)
    struct.pack_into(">h", batch, ATTRIBUTES_AT, 0x10 | 0x20)
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate_batch(batch)
    recompute_crc(batch)
    header = validate_batch(batch)
    assert header.is_control
    assert header.is_transactional
    assert not parse_batch_header(plain).is_control
    assert decode_records(batch) == [Record(0, 1234, key, value)]
    with pytest.raises(CorruptRecordError, match="control batches"):
        validate_client_batch(batch)
    parsed = DefaultRecordBatch(bytes(batch))
    assert parsed.validate_crc()
    assert parsed.is_control_batch
    (marker,) = list(parsed)
    assert marker.commit


# -- malformed records inside a CRC-valid batch ------------------------------------------------


def batch_with_body(body: bytes, count: int) -> bytearray:
    batch = bytearray(build([(None, b"x", 0, ())]))[:HEADER_SIZE] + body
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">i", batch, RECORD_COUNT_AT, count)
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_AT, max(count - 1, 0))
    recompute_crc(batch)
    return batch


def record_bytes(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return encode_varint(len(body)) + body


def test_malformed_records() -> None:
    zero, null = encode_varint(0), encode_varint(-1)
    good = record_bytes(b"\x00", zero, zero, null, null, zero)
    assert decode_records(batch_with_body(good, 1)) == [Record(0, 0, None, None)]
    past_the_batch = "a record runs past the batch"
    cases = [
        ("1 bytes left after 1 records", good + b"\x00", 1),
        (past_the_batch, good[:-1], 1),
        (
            "record 0: its length disagrees with its fields",
            record_bytes(b"\x00", zero, zero, null, null, zero, b"\x00"),
            1,
        ),
        (
            "record 0: header key is not UTF-8",
            record_bytes(b"\x00", zero, zero, null, null, encode_varint(1), b"\x02\xff", null),
            1,
        ),
        (
            "record 0: invalid header count -2",
            record_bytes(b"\x00", zero, zero, null, null, encode_varint(-2)),
            1,
        ),
        (
            "record 0: invalid header key length -1",
            record_bytes(b"\x00", zero, zero, null, null, encode_varint(1), null, null),
            1,
        ),
        (past_the_batch, good + b"\x80", 2),
    ]
    for message, body, count in cases:
        with pytest.raises(CorruptRecordError, match=message):
            decode_records(batch_with_body(body, count))
