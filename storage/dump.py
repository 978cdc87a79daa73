"""``dump-log``: print segment files the way Kafka's ``kafka-dump-log.sh`` (DumpLogSegments) does.

Files and what is printed for each (read-only; nothing is created, repaired or rewritten):

- ``<base>.log``: ``Log starting offset: <base>``, then one line per entry (batch) with the
  fields of its header, Kafka's field names and order (v2: ``baseOffset: .. lastOffset: ..``;
  legacy v0/v1: ``offset: .. position: ..``). With deep iteration, one ``| offset: ..`` line per
  record, control records described (``endTxnMarker: COMMIT coordinatorEpoch: 0``), and with
  ``print_data_log`` the key and payload decoded as UTF-8 (invalid bytes replaced, control
  characters such as newlines escaped as ``\\xNN`` so that each record stays on one line).
- ``<base>.index``: ``offset: N position: P`` per entry; ``<base>.timeindex``:
  ``timestamp: T offset: N``. Each entry is checked against ``<base>.log`` (``verify_index_only``
  checks without printing the entries), as Kafka checks them:

  1. an offset entry ``(O, P)``: a batch starts at position ``P`` and its last offset is ``O``;
  2. a time entry ``(T, O)``: a batch ends at offset ``O``, its max timestamp is ``T``, and ``T``
     is above the timestamp of the entry before it.

- ``.deleted``, ``.cleaned`` and ``.swap`` copies of those files are dumped as their base type
  (an index is then checked against the log with the same suffix, or else the live log).

Every printed line is a :class:`Line`, whose ``status`` says what it reports:

1. ``0``: nothing wrong.
2. ``1`` (``STATUS_INVALID``): invalid data. In a ``.log`` the walk stops at the first entry that
   fails validation (size, magic, CRC — :func:`odradek.storage.scan.validated_entries`): that entry
   is printed with ``isvalid: false`` when its bytes are all there, followed by one line giving
   the position where valid data ends and how many bytes from there on are invalid. Also: index
   entries that do not match the log, an index whose ``.log`` is missing, a torn index file, an
   index that fails the sanity check, records that do not decode.
3. ``2`` (``STATUS_UNUSABLE``): the file itself could not be dumped: missing, a directory, not a
   regular file (a FIFO or a device would block or never end: refused without being opened
   for reading), an unsupported suffix (``.snapshot``, ``.txnindex``, ...), an index whose name
   is not a base offset, or an I/O error. Also a v2 batch whose body decompresses to more than
   ``max_decompressed_bytes`` (a decompression bomb): its records are not printed, and memory
   stays bounded by that ceiling (:mod:`odradek.storage.dump_decompress`).

The ``dump-log`` command exits with the highest status printed.
"""

from __future__ import annotations

import bisect
import os
import stat
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.compression import CompressionError
from odradek.protocol.legacy import decode_legacy_records
from odradek.protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_DELETE_HORIZON,
    ATTR_LOG_APPEND_TIME,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    CorruptRecordError,
    Record,
    decode_records,
    parse_batch_header,
)
from odradek.storage.dump_decompress import BoundedDecompressor, DecompressedTooLarge
from odradek.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from odradek.storage.scan import EntryInfo, InvalidEntry, scan_entries, validated_entries

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "STATUS_INVALID",
    "STATUS_OK",
    "STATUS_UNUSABLE",
    "DumpOptions",
    "Line",
    "dump_file",
    "dump_files",
]

STATUS_OK = 0
STATUS_INVALID = 1
STATUS_UNUSABLE = 2
INT32_MAX = 0x7FFF_FFFF
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024

_KINDS = {".log": "log", ".index": "index", ".timeindex": "timeindex"}
_RENAME_SUFFIXES = (".deleted", ".cleaned", ".swap")
_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_LEGACY_PREFIX = struct.Struct(">qiIbb")  # offset, message size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
# C0, DEL and C1 control characters (newlines included) print as \xNN.
_CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


class Line(NamedTuple):
    """One line of output; ``stderr`` lines are diagnostics (Kafka prints them there too)."""

    text: str
    status: int = STATUS_OK
    stderr: bool = False


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """The ``kafka-dump-log.sh`` flags (``print_data_log`` implies ``deep_iteration``)."""

    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: int = INT32_MAX  # .log only: stop before the first batch ending past this
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES  # per batch, deep iteration


def dump_files(paths: Iterable[str | Path], options: DumpOptions) -> Iterator[Line]:
    """:func:`dump_file` for each path in turn."""
    for path in paths:
        yield from dump_file(Path(path), options)


def dump_file(path: Path, options: DumpOptions) -> Iterator[Line]:
    """The lines that dump one file; I/O errors become a ``STATUS_UNUSABLE`` line."""
    if not path.exists():
        yield _unusable(f"{path}: no such file")
        return
    if path.is_dir():
        yield _unusable(f"{path}: is a directory, not a segment file")
        return
    if not path.is_file():
        yield _unusable(f"{path}: not a regular file (a FIFO, socket or device): not read")
        return
    kind, stem, rename_suffix = _classify(path.name)
    if kind is None:
        yield _unusable(
            f"{path}: unsupported file type (expected .log, .index or .timeindex, "
            f"optionally followed by {', '.join(_RENAME_SUFFIXES)})"
        )
        return
    base_offset = int(stem) if stem.isdigit() else None
    if kind != "log" and base_offset is None:
        yield _unusable(f"{path}: an index file must be named after its base offset")
        return
    try:
        if kind == "log":
            yield from _dump_log(path, base_offset, options)
        else:
            log_path = path.with_name(f"{stem}.log{rename_suffix}")
            if rename_suffix and not log_path.exists():
                log_path = path.with_name(f"{stem}.log")
            assert base_offset is not None
            yield from _dump_index(path, kind, base_offset, log_path, options)
    except OSError as exc:
        yield _unusable(f"{path}: {exc.strerror or exc}")


def _unusable(text: str) -> Line:
    return Line(text, STATUS_UNUSABLE, stderr=True)


def _classify(name: str) -> tuple[str | None, str, str]:
    """(kind, base name, rename suffix) of a file name; kind None when unsupported."""
    rename_suffix = next((s for s in _RENAME_SUFFIXES if name.endswith(s)), "")
    name = name.removesuffix(rename_suffix) if rename_suffix else name
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return None, name, rename_suffix
    return _KINDS.get(f".{ext}"), stem, rename_suffix


# -- .log --------------------------------------------------------------------------------------


def _dump_log(path: Path, base_offset: int | None, options: DumpOptions) -> Iterator[Line]:
    yield Line(f"Dumping {path}")
    fd = _open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if base_offset is None:
            first = next(scan_entries(fd, 0, size), None)
            origin = "unknown" if first is None else str(first.base_offset)
            yield Line(f"Log starting offset: {origin} (the file name holds no base offset)")
        else:
            yield Line(f"Log starting offset: {base_offset}")
        deep = options.deep_iteration or options.print_data_log
        decompressor = BoundedDecompressor(options.max_decompressed_bytes)
        gaps: list[tuple[int, int]] = []
        previous: list[int] = []  # the last record offset seen, if any
        for entry in validated_entries(fd, 0, size):
            if isinstance(entry, InvalidEntry):
                yield from _invalid_tail(fd, path, entry, size, options.max_bytes)
                break
            if entry.next_position > options.max_bytes:
                break
            data = os.pread(fd, entry.size_bytes, entry.position)
            yield Line(_batch_line(data, entry.position, valid=True))
            if deep:
                yield from _record_lines(
                    data, entry, options.print_data_log, previous, gaps, decompressor
                )
    finally:
        os.close(fd)
    if gaps:
        yield Line(f"Non-consecutive offsets in {path.resolve()}", stderr=True)
        for first, second in gaps:
            yield Line(f"  {first} is followed by {second}", stderr=True)


def _open_regular(path: Path) -> int:
    """A read-only descriptor of ``path``, which must be a regular file: opened without
    blocking (a FIFO swapped in after the check would otherwise wait for a writer)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"not a regular file: {path}")
    return fd


def _invalid_tail(
    fd: int, path: Path, invalid: InvalidEntry, size: int, max_bytes: int
) -> Iterator[Line]:
    """The entry where validation stopped (if complete) and where the valid data ends."""
    position = invalid.position
    remaining = size - position
    prefix = os.pread(fd, HEADER_SIZE, position)
    declared = magic = None
    if len(prefix) > MAGIC_OFFSET:
        declared = int.from_bytes(prefix[8:12], "big", signed=True) + LOG_OVERHEAD
        magic = prefix[MAGIC_OFFSET]
    if max_bytes < size and (declared is None or position + declared > max_bytes):
        return  # the bad entry lies past the requested range: leave it, as Kafka does
    if (
        declared is not None
        and declared <= remaining
        and ((magic == 2 and declared >= HEADER_SIZE) or (magic in (0, 1) and declared >= 26))
    ):
        data = os.pread(fd, declared, position)
        yield Line(_batch_line(data, position, valid=False), STATUS_INVALID)
    yield Line(
        f"Found {remaining} invalid bytes at the end of {path.name}: valid data ends at "
        f"position {position} ({invalid.reason})",
        STATUS_INVALID,
    )


def _batch_line(data: bytes, position: int, *, valid: bool) -> str:
    """Kafka's ``printBatchLevel`` line for the entry held by ``data``."""
    if data[MAGIC_OFFSET] == 2:
        h = parse_batch_header(data)
        codec = _codec_name(h.attributes)
        horizon = (
            f"OptionalLong[{h.base_timestamp}]"
            if h.attributes & ATTR_DELETE_HORIZON
            else "OptionalLong.empty"
        )
        return (
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
            f"baseSequence: {h.base_sequence} "
            f"lastSequence: {_sequence(h.base_sequence, h.last_offset_delta)} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
            f"deleteHorizonMs: {horizon} position: {position} "
            f"{_timestamp_type(2, h.attributes)}: {h.max_timestamp} size: {h.size_bytes} "
            f"magic: 2 compresscodec: {codec} crc: {h.crc} isvalid: {_bool(valid)}"
        )
    offset, message_size, crc, magic, attributes = _LEGACY_PREFIX.unpack_from(data)
    timestamp = _I64.unpack_from(data, 18)[0] if magic == 1 else -1
    return (
        f"offset: {offset} position: {position} {_timestamp_type(magic, attributes)}: "
        f"{timestamp} size: {message_size + LOG_OVERHEAD} magic: {magic} "
        f"compresscodec: {_codec_name(attributes)} crc: {crc} isvalid: {_bool(valid)}"
    )


def _record_lines(
    data: bytes,
    entry: EntryInfo,
    print_data: bool,
    previous: list[int],
    gaps: list[tuple[int, int]],
    decompressor: BoundedDecompressor,
) -> Iterator[Line]:
    """One ``| offset: ..`` line per record of a validated entry (Kafka's deep iteration)."""
    v2 = entry.magic == 2
    try:
        if v2:
            data = _inflated(data, decompressor)
        records = decode_records(data) if v2 else decode_legacy_records(data)
    except DecompressedTooLarge as exc:
        yield Line(
            f"| records of the entry at position {entry.position} not printed: its body {exc} "
            "(--max-decompressed-bytes)",
            STATUS_UNUSABLE,
            stderr=True,
        )
        return
    except (CorruptRecordError, CompressionError) as exc:
        yield Line(
            f"| cannot decode the records of the entry at position {entry.position}: {exc}",
            STATUS_INVALID,
        )
        return
    header = parse_batch_header(data) if v2 else None
    attributes = header.attributes if header else data[MAGIC_OFFSET + 1]
    timestamp_type = _timestamp_type(entry.magic, attributes)
    control = bool(header and header.is_control)
    for record in records:
        if previous and record.offset != previous[0] + 1:
            gaps.append((previous[0], record.offset))
        previous[:] = [record.offset]
        parts = [
            f"| offset: {record.offset} {timestamp_type}: {record.timestamp_ms} "
            f"keySize: {_size(record.key)} valueSize: {_size(record.value)}"
        ]
        if header is not None:
            sequence = _sequence(header.base_sequence, record.offset - header.base_offset)
            keys = ",".join(key for key, _ in record.headers)
            parts.append(f"sequence: {sequence} headerKeys: [{keys}]")
        if control:
            parts.append(_control_description(record))
        elif print_data:
            if record.key is not None:
                parts.append(f"key: {_text(record.key)}")
            if record.value is not None:
                parts.append(f"payload: {_text(record.value)}")
        yield Line(" ".join(parts))


def _inflated(batch: bytes, decompressor: BoundedDecompressor) -> bytes:
    """A v2 ``batch`` with its body decompressed (bounded) and its codec bits cleared, so that
    ``decode_records`` reads the records without decompressing anything itself."""
    header = parse_batch_header(batch)
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if not codec:
        return batch
    body = decompressor.decompress(codec, bytes(batch[HEADER_SIZE : header.size_bytes]))
    head = bytearray(batch[:HEADER_SIZE])
    _I32.pack_into(head, 8, HEADER_SIZE - LOG_OVERHEAD + len(body))  # batchLength
    _I16.pack_into(head, CRC_START, header.attributes & ~ATTR_COMPRESSION_MASK)  # attributes
    return bytes(head) + body


def _control_description(record: Record) -> str:
    """Kafka's description of a control record, from its key (version, type) and value."""
    key, value = record.key, record.value
    if key is None or len(key) < _CONTROL_KEY.size:
        return "controlType: UNKNOWN(-1) (control record key is missing or too short)"
    _, type_id = _CONTROL_KEY.unpack_from(key)
    name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id in (0, 1) and value is not None and len(value) >= _END_TXN_VALUE.size:
        _, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        return f"endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    return f"controlType: {name}({type_id})"


def _sequence(base_sequence: int, delta: int) -> int:
    """Kafka's ``incrementSequence``: -1 stays -1; sequences wrap from int32 max to 0."""
    if base_sequence < 0:
        return base_sequence
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


def _timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if attributes & ATTR_LOG_APPEND_TIME else "CreateTime"


def _codec_name(attributes: int) -> str:
    codec = attributes & ATTR_COMPRESSION_MASK
    return _CODECS.get(codec, f"unknown({codec})")


def _size(value: bytes | None) -> int:
    return -1 if value is None else len(value)


def _text(value: bytes) -> str:
    """UTF-8 with invalid bytes replaced, control characters escaped: one line per record."""
    return value.decode("utf-8", "replace").translate(_CONTROL_ESCAPES)


def _bool(value: bool) -> str:
    return "true" if value else "false"


# -- .index / .timeindex -----------------------------------------------------------------------


class _LogEntries:
    """Entry headers of a ``.log`` (unvalidated), by start position and by last offset."""

    def __init__(self, path: Path) -> None:
        fd = _open_regular(path)
        try:
            self.size_bytes = os.fstat(fd).st_size
            entries = list(scan_entries(fd, 0, self.size_bytes))
        finally:
            os.close(fd)
        self.by_position = {e.position: e for e in entries}
        self.by_last_offset = {e.last_offset: e for e in entries}
        self._last_offsets = [e.last_offset for e in entries]

    def first_ending_at_or_after(self, offset: int) -> int:
        """Last offset of the first entry whose last offset is ≥ ``offset``, else -1."""
        slot = bisect.bisect_left(self._last_offsets, offset)
        return self._last_offsets[slot] if slot < len(self._last_offsets) else -1


def _dump_index(
    path: Path, kind: str, base_offset: int, log_path: Path, options: DumpOptions
) -> Iterator[Line]:
    yield Line(f"Dumping {path}")
    index_type = OffsetIndex if kind == "index" else TimeIndex
    index = index_type(path, base_offset, writable=False)
    try:
        if options.index_sanity_check:
            try:
                index.sanity_check()
            except CorruptIndexError as exc:
                yield Line(str(exc), STATUS_INVALID, stderr=True)
            else:
                yield Line(f"{path} passed sanity check.")
            return
        torn_bytes = os.path.getsize(path) % index.ENTRY.size
        if torn_bytes:
            yield Line(
                f"{path}: the last {torn_bytes} bytes do not form a whole entry (a torn write)",
                STATUS_INVALID,
                stderr=True,
            )
        if not len(index):
            yield Line(f"{path} is empty.")
            return
        log = None
        if log_path.is_file():
            log = _LogEntries(log_path)
        else:
            yield Line(
                f"{path}: cannot verify the index: its log {log_path} does not exist",
                STATUS_INVALID,
                stderr=True,
            )
        check = _check_offset_index if kind == "index" else _check_time_index
        yield from check(path, index, log, options.verify_index_only)
    finally:
        index.close()


def _zero_tail(path: Path, slot: int, total: int) -> Line:
    return Line(
        f"{path}: entries {slot}..{total - 1} repeat the base offset: zero-filled preallocated "
        "space (the index was not trimmed), not dumped"
    )


def _check_offset_index(
    path: Path, index: OffsetIndex, log: _LogEntries | None, verify_only: bool
) -> Iterator[Line]:
    mismatches: list[str] = []
    for slot, (offset, position) in enumerate(index):
        if slot and offset == index.base_offset:
            yield _zero_tail(path, slot, len(index))
            break
        if log is not None:
            entry = log.by_position.get(position)
            if entry is None:
                mismatches.append(
                    f"  Index offset: {offset}, log offset: -1 (no batch starts at position "
                    f"{position}; the log has {log.size_bytes} bytes)"
                )
            elif entry.last_offset != offset:
                mismatches.append(f"  Index offset: {offset}, log offset: {entry.last_offset}")
        if not verify_only:
            yield Line(f"offset: {offset} position: {position}")
    if mismatches:
        yield Line(f"Mismatches in :{path.resolve()}", STATUS_INVALID, stderr=True)
        for text in mismatches:
            yield Line(text, STATUS_INVALID, stderr=True)


def _check_time_index(
    path: Path, index: TimeIndex, log: _LogEntries | None, verify_only: bool
) -> Iterator[Line]:
    wrong_timestamps: list[tuple[int, int]] = []
    out_of_order: list[tuple[int, int]] = []
    not_found: list[tuple[int, int]] = []
    previous_timestamp = -1
    for slot, (timestamp, offset) in enumerate(index):
        if slot and offset == index.base_offset:
            yield _zero_tail(path, slot, len(index))
            break
        if log is not None:
            entry = log.by_last_offset.get(offset)
            if entry is None:
                not_found.append((offset, log.first_ending_at_or_after(offset)))
            elif entry.max_timestamp != timestamp:
                wrong_timestamps.append((timestamp, entry.max_timestamp))
        if slot and previous_timestamp >= timestamp:
            out_of_order.append((timestamp, previous_timestamp))
        if not verify_only:
            yield Line(f"timestamp: {timestamp} offset: {offset}")
        previous_timestamp = timestamp
    where = path.resolve()
    if wrong_timestamps:
        yield Line(f"Found timestamp mismatch in :{where}", STATUS_INVALID, stderr=True)
        for indexed, logged in wrong_timestamps:
            text = f"  Index timestamp: {indexed}, log timestamp: {logged}"
            yield Line(text, STATUS_INVALID, stderr=True)
    if out_of_order:
        yield Line(f"Found out of order timestamp in :{where}", STATUS_INVALID, stderr=True)
        for indexed, before in out_of_order:
            text = f"  Index timestamp: {indexed}, Previously indexed timestamp: {before}"
            yield Line(text, STATUS_INVALID, stderr=True)
    if not_found:
        yield Line(
            f"The following indexed offsets are not found in the log {where}.",
            STATUS_INVALID,
            stderr=True,
        )
        for indexed, found in not_found:
            text = f"Indexed offset: {indexed}, found log offset: {found}"
            yield Line(text, STATUS_INVALID, stderr=True)
