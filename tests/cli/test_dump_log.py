"""``odradek dump-log`` run as a real command against Kafka-written and odradek-written files."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import NamedTuple

import pytest

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, recompute_crc
from odradek.storage.config import LogConfig
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.log import Log
from tests.testdata import kafka_written_dir

ROOT = Path(__file__).resolve().parents[2]
KAFKA_WRITTEN = kafka_written_dir()
NOW_MS = 1_726_000_000_000
BATCH_LINE = re.compile(
    r"^baseOffset: (?P<base>-?\d+) lastOffset: (?P<last>-?\d+) count: (?P<count>\d+) .*"
    r"partitionLeaderEpoch: (?P<epoch>-?\d+) .* position: (?P<position>\d+) "
    r"(?P<ts_type>CreateTime|LogAppendTime): (?P<ts>-?\d+) size: (?P<size>\d+) magic: 2 "
    r"compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+) isvalid: (?P<valid>true|false)$"
)


class Result(NamedTuple):
    status: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def batches(self) -> list[dict[str, str]]:
        return [m.groupdict() for m in map(BATCH_LINE.match, self.lines) if m]


def dump_log(*args: str | Path) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "dump-log", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=60,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


# -- files written by Apache Kafka ---------------------------------------------------------------

# README of the test data: (base offset, records) per batch; both files are valid.
KAFKA_FILES = {
    "cluster-metadata-a.log": (258, [(1, 1), (2, 2)]),
    "cluster-metadata-b.log": (331, [(0, 1), (1, 3)]),
}


@pytest.mark.parametrize("name", sorted(KAFKA_FILES))
def test_kafka_written_segments_dump_every_batch(name: str) -> None:
    size, expected = KAFKA_FILES[name]
    result = dump_log(KAFKA_WRITTEN / name)
    assert result.status == 0, result.err
    assert result.lines[0] == f"Dumping {KAFKA_WRITTEN / name}"
    first_base = expected[0][0]
    assert result.lines[1].startswith(f"Log starting offset: {first_base} ")
    batches = result.batches()
    assert [(int(b["base"]), int(b["count"])) for b in batches] == expected
    assert [int(b["last"]) for b in batches] == [base + n - 1 for base, n in expected]
    assert all(b["valid"] == "true" and b["codec"] == "none" for b in batches)
    assert all(b["epoch"] == "1" and b["ts_type"] == "CreateTime" for b in batches)
    positions = [int(b["position"]) for b in batches]
    sizes = [int(b["size"]) for b in batches]
    assert positions == [0, sizes[0]]
    assert sum(sizes) == size
    assert "invalid" not in result.out
    # Kafka's exact field order, as kafka-dump-log.sh prints it.
    assert result.lines[2].startswith(
        f"baseOffset: {first_base} lastOffset: {first_base} count: 1 baseSequence: -1 "
        "lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 "
        "isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1726045943832 size: 91 magic: 2 compresscodec: none crc: "
    )


def test_kafka_written_segment_deep_iteration_and_data() -> None:
    path = KAFKA_WRITTEN / "cluster-metadata-b.log"
    deep = dump_log("--deep-iteration", path)
    assert deep.status == 0
    records = [line for line in deep.lines if line.startswith("| ")]
    assert [int(line.split()[2]) for line in records] == [0, 1, 2, 3]
    assert records[0] == (
        "| offset: 0 CreateTime: 1726045943832 keySize: -1 valueSize: 23 sequence: -1 "
        "headerKeys: []"
    )
    assert "payload:" not in deep.out

    data = dump_log("--print-data-log", path)
    assert data.status == 0
    records = [line for line in data.lines if line.startswith("| ")]
    assert len(records) == 4
    # Binary bytes: control characters escaped, invalid UTF-8 replaced, one line per record.
    assert records[0].endswith(r"payload: \x01\x0c\x00\x11metadata.version\x00\x14\x00")
    assert all(" key: " not in line for line in records)  # KRaft records have null keys


def test_several_files_in_one_run() -> None:
    result = dump_log(*(KAFKA_WRITTEN / name for name in sorted(KAFKA_FILES)))
    assert result.status == 0
    assert [line for line in result.lines if line.startswith("Dumping ")] == [
        f"Dumping {KAFKA_WRITTEN / name}" for name in sorted(KAFKA_FILES)
    ]
    assert len(result.batches()) == 4


# -- logs written by storage.log.Log ---------------------------------------------------------------


class Written(NamedTuple):
    directory: Path
    bases: list[int]  # segment base offsets
    values: dict[int, bytes]  # offset -> value


def write_log(directory: Path, count: int = 40) -> Written:
    config = LogConfig(segment_bytes=2048, index_interval_bytes=200)
    log = Log.open(directory, "events", 0, config, now_ms=NOW_MS)
    values = {}
    try:
        for i in range(count):
            value = f"value-{i}-é".encode() * 3
            batch = encode_batch(
                [(f"key-{i}".encode(), value, NOW_MS + i, [("trace", b"t"), ("n", b"1")])]
            )
            info = log.append(batch, now_ms=NOW_MS + i)
            values[info.first_offset] = value
        bases = [segment.base_offset for segment in log.segments]
    finally:
        log.close()
    return Written(directory, bases, values)


@pytest.fixture
def written(tmp_path: Path) -> Written:
    return write_log(tmp_path / "events-0")


def seg(written: Written, base: int, suffix: str) -> Path:
    return written.directory / f"{base:020d}{suffix}"


def test_odradek_written_log_dumps_every_segment(written: Written) -> None:
    assert len(written.bases) >= 3  # multi-segment
    files = [seg(written, base, ".log") for base in written.bases]
    result = dump_log(*files)
    assert result.status == 0, result.err
    starts = [int(line.rsplit(" ", 1)[1]) for line in result.lines if "starting offset" in line]
    assert starts == written.bases
    batches = result.batches()
    assert [int(b["base"]) for b in batches] == sorted(written.values)
    assert all(b["valid"] == "true" and b["count"] == "1" for b in batches)
    assert [int(b["ts"]) for b in batches] == [NOW_MS + i for i in range(len(batches))]
    # Positions restart at 0 in each segment and follow from the sizes.
    assert sum(b["position"] == "0" for b in batches) == len(written.bases)


def test_print_data_log_shows_keys_payloads_and_header_keys(written: Written) -> None:
    result = dump_log("--print-data-log", seg(written, written.bases[0], ".log"))
    assert result.status == 0
    records = [line for line in result.lines if line.startswith("| ")]
    assert records
    value = written.values[0]
    assert records[0] == (
        f"| offset: 0 CreateTime: {NOW_MS} keySize: 5 valueSize: {len(value)} sequence: -1 "
        f"headerKeys: [trace,n] key: key-0 payload: {value.decode()}"
    )


def test_indexes_dump_and_verify(written: Written) -> None:
    base = written.bases[0]
    with OffsetIndex(seg(written, base, ".index"), base, writable=False) as index:
        offset_entries = list(index)
    with TimeIndex(seg(written, base, ".timeindex"), base, writable=False) as index:
        time_entries = list(index)
    assert offset_entries and time_entries

    result = dump_log(seg(written, base, ".index"), seg(written, base, ".timeindex"))
    assert result.status == 0, result.err
    assert [f"offset: {o} position: {p}" for o, p in offset_entries] == [
        line for line in result.lines if line.startswith("offset: ")
    ]
    assert [f"timestamp: {t} offset: {o}" for t, o in time_entries] == [
        line for line in result.lines if line.startswith("timestamp: ")
    ]

    every_index = sorted(written.directory.glob("*index"))
    verified = dump_log("--verify-index-only", *every_index)
    assert verified.status == 0, verified.err
    assert verified.err == ""
    assert not any(line.startswith(("offset: ", "timestamp: ")) for line in verified.lines)
    assert verified.lines.count(f"Dumping {every_index[0]}") == 1


def test_corrupted_byte_marks_the_batch_invalid_and_stops(written: Written) -> None:
    path = seg(written, written.bases[0], ".log")
    clean = dump_log(path).batches()
    victim = clean[2]
    position, size = int(victim["position"]), int(victim["size"])
    data = bytearray(path.read_bytes())
    data[position + size - 3] ^= 0xFF  # a byte of the last record's value: under the CRC
    path.write_bytes(data)

    result = dump_log(path)
    assert result.status == 1
    batches = result.batches()
    assert [b["valid"] for b in batches] == ["true", "true", "false"]
    assert batches[2]["position"] == str(position)
    assert batches[2]["crc"] == victim["crc"]  # the stored CRC, which no longer matches
    trailing = len(data) - position
    assert result.lines[-1].startswith(
        f"Found {trailing} invalid bytes at the end of {path.name}: "
        f"valid data ends at position {position} ("
    )
    assert "CRC mismatch" in result.lines[-1]


def test_truncated_tail_reports_where_valid_data_ends(written: Written) -> None:
    path = seg(written, written.bases[0], ".log")
    clean = dump_log(path).batches()
    last = clean[-1]
    cut = int(last["position"]) + 30  # inside the last batch's header
    with path.open("r+b") as f:
        f.truncate(cut)

    result = dump_log("--deep-iteration", path)
    assert result.status == 1
    batches = result.batches()
    assert len(batches) == len(clean) - 1
    assert all(b["valid"] == "true" for b in batches)
    assert result.lines[-1].startswith(
        f"Found 30 invalid bytes at the end of {path.name}: "
        f"valid data ends at position {last['position']} ("
    )


def test_max_bytes_stops_before_the_first_batch_ending_past_it(written: Written) -> None:
    path = seg(written, written.bases[0], ".log")
    clean = dump_log(path).batches()
    limit = int(clean[3]["position"]) + 10
    result = dump_log("--max-bytes", str(limit), path)
    assert result.status == 0
    assert result.batches() == clean[:3]


def overwrite_entry(path: Path, slot: int, fmt: str, *values: int) -> None:
    entry = struct.Struct(fmt)
    data = bytearray(path.read_bytes())
    entry.pack_into(data, slot * entry.size, *values)
    path.write_bytes(data)


def test_verify_index_only_reports_a_wrong_offset_entry(written: Written) -> None:
    base = written.bases[0]
    batches = dump_log(seg(written, base, ".log")).batches()
    index_path = seg(written, base, ".index")
    with OffsetIndex(index_path, base, writable=False) as index:
        (offset, position), (offset2, _) = index.entry(0), index.entry(1)
    # Entry 0 now points at the batch after the one it names; entry 1 at no batch start.
    next_batch = next(b for b in batches if int(b["position"]) > position)
    overwrite_entry(index_path, 0, ">ii", offset - base, int(next_batch["position"]))
    overwrite_entry(index_path, 1, ">ii", offset2 - base, int(next_batch["position"]) + 1)

    result = dump_log("--verify-index-only", index_path)
    assert result.status == 1
    assert not any(line.startswith("offset: ") for line in result.lines)
    assert f"Mismatches in :{index_path.resolve()}" in result.err
    assert f"  Index offset: {offset}, log offset: {next_batch['last']}" in result.err
    assert f"  Index offset: {offset2}, log offset: -1 (no batch starts at position" in result.err

    dumped = dump_log(index_path)  # a plain dump checks too, and prints the entries
    assert dumped.status == 1
    assert f"offset: {offset} position: {next_batch['position']}" in dumped.lines


def test_verify_index_only_reports_a_wrong_time_index_entry(written: Written) -> None:
    base = written.bases[0]
    path = seg(written, base, ".timeindex")
    with TimeIndex(path, base, writable=False) as index:
        entries = list(index)
    assert len(entries) >= 2
    timestamp, offset = entries[1]
    overwrite_entry(path, 1, ">qi", timestamp + 5, offset - base)

    result = dump_log("--verify-index-only", path)
    assert result.status == 1
    assert f"  Index timestamp: {timestamp + 5}, log timestamp: {timestamp}" in result.err

    overwrite_entry(path, 1, ">qi", entries[0][0], offset - base)  # not increasing
    result = dump_log("--verify-index-only", path)
    assert result.status == 1
    assert (
        f"  Index timestamp: {entries[0][0]}, Previously indexed timestamp: {entries[0][0]}"
        in result.err
    )


def test_index_sanity_check(written: Written) -> None:
    base = written.bases[0]
    path = seg(written, base, ".index")
    good = dump_log("--index-sanity-check", path)
    assert good.status == 0
    assert f"{path} passed sanity check." in good.lines
    with OffsetIndex(path, base, writable=False) as index:
        first = index.entry(0)
    overwrite_entry(path, 1, ">ii", first[0] - base, first[1])  # offsets stop increasing
    bad = dump_log("--index-sanity-check", path)
    assert bad.status == 1
    assert "corrupt" in bad.err and str(path) in bad.err


def test_untrimmed_index_stops_at_the_zero_tail(written: Written) -> None:
    base = written.bases[0]
    path = seg(written, base, ".index")
    entries = len(path.read_bytes()) // 8
    with path.open("ab") as f:
        f.write(bytes(8 * 5))
    result = dump_log(path)
    assert result.status == 0, result.err
    assert sum(line.startswith("offset: ") for line in result.lines) == entries
    assert "zero-filled preallocated space" in result.out


def test_index_without_its_log_is_reported(written: Written, tmp_path: Path) -> None:
    base = written.bases[0]
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    index_path = shutil.copy(seg(written, base, ".index"), lonely)
    result = dump_log("--verify-index-only", index_path)
    assert result.status == 1
    assert f"its log {lonely / f'{base:020d}.log'} does not exist" in result.err


def test_renamed_segment_files_dump_as_their_base_type(written: Written) -> None:
    base = written.bases[0]
    for suffix in (".log", ".index"):
        path = seg(written, base, suffix)
        path.rename(path.with_name(path.name + ".deleted"))
    log_result = dump_log(seg(written, base, ".log.deleted"))
    assert log_result.status == 0
    assert log_result.lines[1] == f"Log starting offset: {base}"
    assert log_result.batches()
    index_result = dump_log("--verify-index-only", seg(written, base, ".index.deleted"))
    assert index_result.status == 0, index_result.err  # checked against the .log.deleted


# -- files that cannot be dumped -----------------------------------------------------------------


def test_missing_directory_and_unknown_files_exit_2(written: Written, tmp_path: Path) -> None:
    snapshot = tmp_path / f"{0:020d}.snapshot"
    snapshot.write_bytes(b"\0" * 16)
    odd = tmp_path / "notes.log.deleted.bak"
    odd.write_text("x")
    missing = tmp_path / "nope.log"
    good = seg(written, written.bases[0], ".log")
    result = dump_log(missing, tmp_path, snapshot, odd, good)
    assert result.status == 2
    assert f"{missing}: no such file" in result.err
    assert f"{tmp_path}: is a directory" in result.err
    assert f"{snapshot}: unsupported file type" in result.err
    assert f"{odd}: unsupported file type" in result.err
    for bad in (missing, tmp_path, snapshot, odd):
        assert f"Dumping {bad}\n" not in result.out
    assert f"Dumping {good}" in result.lines  # the good file is still dumped
    assert result.batches()


def test_exit_2_wins_over_invalid_data(written: Written, tmp_path: Path) -> None:
    path = seg(written, written.bases[0], ".log")
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size - 1)
    result = dump_log(path, tmp_path / "missing.index")
    assert result.status == 2
    assert "invalid bytes" in result.out


# -- control batches and legacy entries ----------------------------------------------------------


def control_batch(base_offset: int, control_type: int, coordinator_epoch: int) -> bytes:
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    batch = bytearray(
        encode_batch(
            [(key, value, NOW_MS)],
            base_offset=base_offset,
            producer_id=42,
            producer_epoch=3,
            transactional=True,
        )
    )
    attributes = struct.unpack_from(">h", batch, 21)[0] | ATTR_CONTROL | ATTR_TRANSACTIONAL
    struct.pack_into(">h", batch, 21, attributes)
    recompute_crc(batch)
    return bytes(batch)


def legacy_message(offset: int, magic: int, key: bytes | None, value: bytes, ts: int) -> bytes:
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", ts)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def test_control_records_are_described(tmp_path: Path) -> None:
    data = encode_batch(
        [(b"k", b"v", NOW_MS)],
        base_offset=0,
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        transactional=True,
    )
    data += control_batch(1, 1, 5) + control_batch(2, 0, 6)
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(data)
    result = dump_log("--print-data-log", path)
    assert result.status == 0, result.err
    lines = result.lines
    assert "baseSequence: 7 lastSequence: 7 producerId: 42 producerEpoch: 3" in lines[2]
    assert "isTransactional: true isControl: false" in lines[2]
    assert lines[3].endswith("sequence: 7 headerKeys: [] key: k payload: v")
    assert "isTransactional: true isControl: true" in lines[4]
    assert lines[5].endswith("endTxnMarker: COMMIT coordinatorEpoch: 5")
    assert lines[7].endswith("endTxnMarker: ABORT coordinatorEpoch: 6")
    assert "payload" not in lines[5] + lines[7]


def test_legacy_entries_print_in_kafkas_legacy_style(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}.log"
    v0 = legacy_message(0, 0, None, b"old", 0)
    v1 = legacy_message(1, 1, b"k1", b"newer", NOW_MS)
    path.write_bytes(v0 + v1)
    crc0 = struct.unpack_from(">I", v0, 12)[0]
    result = dump_log("--print-data-log", path)
    assert result.status == 0, result.err
    assert result.lines[2:] == [
        f"offset: 0 position: 0 NoTimestampType: -1 size: {len(v0)} magic: 0 "
        f"compresscodec: none crc: {crc0} isvalid: true",
        "| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 3 payload: old",
        f"offset: 1 position: {len(v0)} CreateTime: {NOW_MS} size: {len(v1)} magic: 1 "
        f"compresscodec: none crc: {struct.unpack_from('>I', v1, 12)[0]} isvalid: true",
        f"| offset: 1 CreateTime: {NOW_MS} keySize: 2 valueSize: 5 key: k1 payload: newer",
    ]

    broken = bytearray(v0 + v1)
    broken[-1] ^= 1
    path.write_bytes(broken)
    result = dump_log(path)
    assert result.status == 1
    assert result.lines[3].startswith(f"offset: 1 position: {len(v0)} CreateTime: ")
    assert result.lines[3].endswith("isvalid: false")
    assert result.lines[4].startswith(f"Found {len(v1)} invalid bytes at the end of")


def test_non_consecutive_offsets_are_noted(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(
        encode_batch([(None, b"a", NOW_MS)], base_offset=0)
        + encode_batch([(None, b"b", NOW_MS)], base_offset=5)
    )
    result = dump_log("--deep-iteration", path)
    assert result.status == 0
    assert "Non-consecutive offsets in" in result.err
    assert "  0 is followed by 5" in result.err


def test_help_lists_the_flags() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "dump-log", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    for flag in (
        "--print-data-log",
        "--verify-index-only",
        "--deep-iteration",
        "--index-sanity-check",
        "--max-bytes",
        "exit status",
    ):
        assert flag in proc.stdout
