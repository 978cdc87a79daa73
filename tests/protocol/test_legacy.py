"""Legacy message sets (magic v0/v1): golden bytes, kafka-python oracle, corruption, wrappers."""

from __future__ import annotations

import contextlib
import struct
import zlib
from collections.abc import Sequence

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.compression import GZIP, LZ4, SNAPPY, ZSTD, compress
from odradek.protocol.legacy import LegacyEntry, decode_legacy_records, validate_legacy_entry
from odradek.protocol.record_batch import CorruptRecordError, TimestampType
from odradek.protocol.records import Record

KeyValue = tuple[bytes | None, bytes | None]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int = 1,
    attributes: int = 0,
    timestamp: int = 0,
) -> bytes:
    """One legacy entry, built field by field (independently of the code under test)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def wrapper(
    offset: int,
    inner: bytes,
    codec: int,
    *,
    magic: int = 1,
    timestamp: int = 0,
    log_append: bool = False,
) -> bytes:
    attributes = codec | (0x08 if log_append else 0)
    return message(
        offset,
        None,
        compress(codec, inner),
        magic=magic,
        attributes=attributes,
        timestamp=timestamp,
    )


def kafka_python_build(
    magic: int, codec: int, records: Sequence[KeyValue], offsets: Sequence[int], ts0: int
) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 30)
    for i, ((key, value), offset) in enumerate(zip(records, offsets, strict=True)):
        assert builder.append(offset, ts0 + i, key, value) is not None
    return bytes(builder.build())


def set_offset(entry: bytes, offset: int) -> bytes:
    """Patch an entry's offset (bytes 0..7, outside the CRC), as a broker assigns it."""
    return struct.pack(">q", offset) + entry[8:]


def recrc(entry: bytearray) -> bytearray:
    struct.pack_into(">I", entry, 12, zlib.crc32(entry[16:]))
    return entry


def iterate_set(buf: bytes) -> list[Record]:
    """Decode a whole message set: every shallow entry in turn."""
    records: list[Record] = []
    pos = 0
    while pos < len(buf):
        entry = validate_legacy_entry(buf, pos)
        records.extend(decode_legacy_records(buf[pos : pos + entry.size_bytes]))
        pos += entry.size_bytes
    return records


# -- golden bytes --------------------------------------------------------------------------------

GOLDEN_V0 = (
    "0000000000000005"  # offset 5
    "00000010"  # message_size 16 = crc 4 + magic 1 + attributes 1 + key 4+1 + value 4+1
    "1fecd70a"  # CRC-32 of the bytes below
    "00"  # magic 0
    "00"  # attributes
    "00000001"
    "6b"  # key "k"
    "00000001"
    "76"  # value "v"
)
GOLDEN_V1 = (
    "0000000000000007"  # offset 7
    "00000017"  # message_size 23
    "09b66caa"  # CRC-32
    "01"  # magic 1
    "00"  # attributes: CreateTime, no compression
    "00000000000003e8"  # timestamp 1000
    "ffffffff"  # key null
    "00000001"
    "76"  # value "v"
)


def test_golden_bytes_are_what_the_layout_says() -> None:
    assert message(5, b"k", b"v", magic=0).hex() == GOLDEN_V0
    assert message(7, None, b"v", timestamp=1000).hex() == GOLDEN_V1
    ours = bytes.fromhex(GOLDEN_V0)
    assert zlib.crc32(ours[16:]) == 0x1FECD70A
    assert kafka_python_build(0, 0, [(b"k", b"v")], [5], 0).hex() == GOLDEN_V0
    assert kafka_python_build(1, 0, [(None, b"v")], [7], 1000).hex() == GOLDEN_V1


def test_golden_v0() -> None:
    buf = bytes.fromhex(GOLDEN_V0)
    entry = validate_legacy_entry(buf)
    assert entry == LegacyEntry(5, 28, 0, 0x1FECD70A, 0, -1)
    assert entry.compression == 0
    assert entry.timestamp_type is None
    assert decode_legacy_records(buf) == [Record(5, -1, b"k", b"v", ())]


def test_golden_v1() -> None:
    buf = bytes.fromhex(GOLDEN_V1)
    entry = validate_legacy_entry(buf)
    assert entry == LegacyEntry(7, 35, 1, 0x09B66CAA, 0, 1000)
    assert entry.timestamp_type is TimestampType.CREATE_TIME
    assert decode_legacy_records(buf) == [Record(7, 1000, None, b"v")]


def test_validate_at_a_position_and_trailing_bytes_ignored() -> None:
    buf = b"\xaa" * 9 + bytes.fromhex(GOLDEN_V1) + b"\xbb" * 50
    assert validate_legacy_entry(buf, 9).offset == 7
    assert decode_legacy_records(memoryview(buf)[9:]) == [Record(7, 1000, None, b"v")]
    assert decode_legacy_records(bytearray(bytes.fromhex(GOLDEN_V0) + b"\x00" * 3))[0].offset == 5


def test_log_append_time_uncompressed_v1() -> None:
    buf = message(3, b"k", None, attributes=0x08, timestamp=555)
    entry = validate_legacy_entry(buf)
    assert entry.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert decode_legacy_records(buf) == [Record(3, 555, b"k", None)]


def test_negative_key_length_is_null_as_in_kafka() -> None:
    body = bytearray(message(0, None, b"v", magic=0))
    struct.pack_into(">i", body, 18, -7)
    assert decode_legacy_records(recrc(body)) == [Record(0, -1, None, b"v")]


# -- kafka-python oracle -------------------------------------------------------------------------

kv_lists = st.lists(
    st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=30)),
    min_size=1,
    max_size=12,
)
MAGIC_CODECS = [(0, 0), (0, GZIP), (0, SNAPPY), (1, 0), (1, GZIP), (1, SNAPPY), (1, LZ4)]


@FUZZ
@given(kv_lists, st.sampled_from(MAGIC_CODECS), st.integers(0, 1 << 40), st.integers(0, 1 << 42))
def test_we_read_kafka_python_legacy(
    records: list[KeyValue], magic_codec: tuple[int, int], base_offset: int, ts0: int
) -> None:
    magic, codec = magic_codec
    n = len(records)
    # A v1 producer writes relative inner offsets; v0 inner and uncompressed ones are absolute.
    relative = codec and magic == 1
    offsets = [i if relative else base_offset + i for i in range(n)]
    buf = kafka_python_build(magic, codec, records, offsets, ts0)
    if codec:
        buf = set_offset(buf, base_offset + n - 1)  # the wrapper carries the last offset
        entry = validate_legacy_entry(buf)
        assert entry.size_bytes == len(buf)
        assert entry.compression == codec
        assert entry.magic == magic
        got = decode_legacy_records(buf)
        oracle = list(LegacyRecordBatch(buf, magic))
        assert [(r.offset, r.timestamp, r.key, r.value) for r in oracle] == [
            (r.offset, None if magic == 0 else r.timestamp_ms, r.key, r.value) for r in got
        ]
    else:
        got = iterate_set(buf)
    timestamps = [-1] * n if magic == 0 else [ts0 + i for i in range(n)]
    assert got == [
        Record(base_offset + i, timestamps[i], key, value) for i, (key, value) in enumerate(records)
    ]
    assert all(r.headers == () for r in got)


def test_v1_wrapper_offsets_are_relative_to_the_last_inner_message() -> None:
    # Inner relative offsets need not start at 0: absolute = wrapper - last + relative.
    inner = b"".join(message(rel, None, b"%d" % rel) for rel in (3, 4, 6))
    buf = wrapper(100, inner, GZIP)
    assert [r.offset for r in decode_legacy_records(buf)] == [97, 98, 100]
    assert [r.offset for r in LegacyRecordBatch(buf, 1)] == [97, 98, 100]


def test_v0_wrapper_offsets_are_absolute() -> None:
    inner = b"".join(message(o, b"k", b"v", magic=0) for o in (40, 41, 42))
    buf = wrapper(42, inner, SNAPPY, magic=0)
    assert [r.offset for r in decode_legacy_records(buf)] == [40, 41, 42]
    assert validate_legacy_entry(buf).timestamp_ms == -1


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
def test_log_append_time_wrapper_overrides_inner_timestamps(codec: int) -> None:
    inner = b"".join(message(i, None, b"x", timestamp=10 + i) for i in range(3))
    create = wrapper(2, inner, codec, timestamp=99)
    assert [r.timestamp_ms for r in decode_legacy_records(create)] == [10, 11, 12]
    append = wrapper(2, inner, codec, timestamp=99, log_append=True)
    assert validate_legacy_entry(append).timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp_ms for r in decode_legacy_records(append)] == [99, 99, 99]
    assert [r.timestamp for r in LegacyRecordBatch(append, 1)] == [99, 99, 99]


def test_null_keys() -> None:
    records: list[KeyValue] = [(None, b"v%d" % i) for i in range(4)]
    for magic, codec in MAGIC_CODECS:
        buf = kafka_python_build(magic, codec, records, range(4), 0)
        got = decode_legacy_records(set_offset(buf, 3)) if codec else iterate_set(buf)
        assert [r.key for r in got] == [None] * 4
        assert [r.value for r in got] == [b"v0", b"v1", b"v2", b"v3"]


def test_v0_lz4_with_kafkas_broken_header_checksum_is_reported_corrupt() -> None:
    # Documented limitation: pre-0.10 Kafka computed the LZ4 frame header checksum over the
    # wrong bytes; protocol.compression checks it, so such a wrapper is corrupt, not garbage.
    inner = message(0, None, b"payload", magic=0)
    frame = bytearray(cramjam.lz4.compress(inner))
    assert frame[:4] == b"\x04\x22\x4d\x18"
    frame[6] ^= 0x5A  # the header checksum byte (no content size in this frame)
    buf = message(0, None, bytes(frame), magic=0, attributes=LZ4)
    with pytest.raises(CorruptRecordError, match="lz4"):
        decode_legacy_records(buf)
    # A v0 lz4 wrapper with a standard frame decodes.
    good = message(0, None, compress(LZ4, inner), magic=0, attributes=LZ4)
    assert decode_legacy_records(good) == [Record(0, -1, None, b"payload")]


# -- validation: one byte at a time ------------------------------------------------------------


def sample_entries() -> list[bytes]:
    inner = b"".join(message(i, b"k%d" % i, b"value", timestamp=i) for i in range(3))
    return [
        bytes.fromhex(GOLDEN_V0),
        bytes.fromhex(GOLDEN_V1),
        wrapper(2, inner, GZIP),
        wrapper(2, b"".join(message(i, None, b"v", magic=0) for i in range(3)), SNAPPY, magic=0),
    ]


@pytest.mark.parametrize("index", range(4))
def test_every_truncated_prefix_is_corrupt(index: int) -> None:
    entry = sample_entries()[index]
    for cut in range(len(entry)):
        with pytest.raises(CorruptRecordError):
            validate_legacy_entry(entry[:cut])
        with pytest.raises(CorruptRecordError):
            decode_legacy_records(entry[:cut])
        with pytest.raises(CorruptRecordError):
            validate_legacy_entry(b"\x01\x02" + entry[:cut], 2)


@pytest.mark.parametrize("index", range(4))
def test_every_single_byte_corruption(index: int) -> None:
    entry = sample_entries()[index]
    for position in range(len(entry)):
        for mask in (0x01, 0x80, 0xFF):
            corrupt = bytearray(entry)
            corrupt[position] ^= mask
            if position < 8:  # the offset is outside the CRC
                validate_legacy_entry(corrupt)
            elif position >= 17:
                with pytest.raises(CorruptRecordError, match="CRC mismatch"):
                    validate_legacy_entry(corrupt)
            else:  # message_size, the CRC field itself, magic
                with pytest.raises(CorruptRecordError):
                    validate_legacy_entry(corrupt)


@FUZZ
@given(st.binary(max_size=120), st.integers(0, 1))
def test_garbage_raises_only_corrupt_record(data: bytes, magic: int) -> None:
    # Force a plausible prefix half the time so deeper checks are reached.
    if data and data[0] & 1:
        data = struct.pack(">qi", 0, max(len(data) - 12, 0)) + data[12:16] + bytes([magic]) + data
    with contextlib.suppress(CorruptRecordError):
        validate_legacy_entry(data)
    with contextlib.suppress(CorruptRecordError):
        decode_legacy_records(data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(4)), st.data())
def test_crc_valid_damage_raises_only_corrupt_record(index: int, data: st.DataObject) -> None:
    entry = bytearray(sample_entries()[index])
    position = data.draw(st.integers(17, len(entry) - 1))
    entry[position] ^= data.draw(st.integers(1, 255))
    recrc(entry)
    with contextlib.suppress(CorruptRecordError):
        records = decode_legacy_records(entry)
        assert all(isinstance(r, Record) for r in records)


def test_v2_batch_is_not_a_legacy_entry() -> None:
    batch = encode_batch([(None, b"v")])
    with pytest.raises(CorruptRecordError, match="unsupported legacy message magic 2"):
        validate_legacy_entry(batch)


@pytest.mark.parametrize(("magic", "size"), [(0, 13), (1, 21), (1, 14), (0, -1)])
def test_message_size_below_minimum(magic: int, size: int) -> None:
    buf = bytearray(message(0, b"key", b"value", magic=magic))
    struct.pack_into(">i", buf, 8, size)
    with pytest.raises(CorruptRecordError, match=f"below the v{magic} minimum"):
        validate_legacy_entry(buf)


def test_truncated_and_crc_messages() -> None:
    buf = message(9, b"key", b"value")
    with pytest.raises(CorruptRecordError, match="truncated: 25 bytes"):
        validate_legacy_entry(buf[:25])
    with pytest.raises(CorruptRecordError, match=f"of {len(buf)} bytes truncated to 30"):
        validate_legacy_entry(buf[:30])
    bad = bytearray(buf)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch at offset 9: stored 0x"):
        validate_legacy_entry(bad)


# -- structure inside a CRC-valid entry --------------------------------------------------------


def test_key_or_value_overrunning_the_message() -> None:
    key_over = bytearray(message(0, b"abc", b"", magic=0))
    struct.pack_into(">i", key_over, 18, 50)
    with pytest.raises(CorruptRecordError, match="key of 50 bytes overruns"):
        decode_legacy_records(recrc(key_over))
    key_no_room = bytearray(message(0, b"abc", b"", magic=0))
    struct.pack_into(">i", key_no_room, 18, 5)  # eats the value length field
    with pytest.raises(CorruptRecordError, match="key of 5 bytes overruns"):
        decode_legacy_records(recrc(key_no_room))
    value_over = bytearray(message(0, None, b"abc"))
    struct.pack_into(">i", value_over, 30, 4)
    with pytest.raises(CorruptRecordError, match="value of 4 bytes overruns"):
        decode_legacy_records(recrc(value_over))


def test_trailing_bytes_inside_the_message() -> None:
    buf = bytearray(message(0, None, b"abc"))
    struct.pack_into(">i", buf, 30, 1)
    with pytest.raises(CorruptRecordError, match="2 trailing bytes"):
        decode_legacy_records(recrc(buf))


def test_bad_wrappers() -> None:
    inner = message(0, None, b"v")
    cases = {
        "null value": message(0, None, None, attributes=GZIP),
        "codec 4 is not valid": message(0, None, compress(ZSTD, inner), attributes=ZSTD),
        "codec 5 is not valid": message(0, None, inner, attributes=5),
        "cannot decompress gzip": message(0, None, b"not gzip at all", attributes=GZIP),
        "holds no inner messages": wrapper(0, b"", GZIP),
        "nested compression": wrapper(0, wrapper(0, inner, GZIP), GZIP),
        "does not match wrapper magic": wrapper(0, message(0, None, b"v", magic=0), GZIP),
        "CRC mismatch": wrapper(0, inner[:-1] + b"w", GZIP),
        "truncated": wrapper(0, inner + inner[:20], SNAPPY),
        "unsupported legacy message magic 2": wrapper(0, encode_batch([(None, b"v")]), GZIP),
    }
    for expected_message, buf in cases.items():
        validate_legacy_entry(buf)  # the wrapper itself is sound
        with pytest.raises(CorruptRecordError, match=expected_message):
            decode_legacy_records(buf)
