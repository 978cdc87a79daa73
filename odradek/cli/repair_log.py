"""``odradek repair-log``: show, then on request cut out, the damage that keeps a partition
offline (see :mod:`odradek.storage.repair`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odradek.storage.checkpoints import DirLock, LockError
from odradek.storage.meta_properties import META_PROPERTIES
from odradek.storage.repair import (
    SegmentReport,
    damaged_copy_path,
    inspect_partition,
    repair_partition,
)
from odradek.storage.topics import parse_partition_dir

DESCRIPTION = """\
A partition whose log is damaged anywhere but in a torn tail of its last non-empty segment
stays offline at start-up (KAFKA_STORAGE_ERROR), every file in place, and the broker logs the
file and byte position. This command validates every .log of that partition directory as
recovery does and shows each damaged range: where it starts and ends, why, and which offsets
are lost. Nothing changes unless --drop-damaged is given; then each damaged range is cut out of
its segment (saved first as <segment>.log.damaged-<position>), the valid batches before and
after it are kept, the segment's indexes are removed to be rebuilt, and the next broker start
serves the partition again. Run it with the broker stopped: it takes the log dir's .lock.
"""

EPILOG = """\
exit status:
  0  no damage found, or the damage was cut out (--drop-damaged)
  1  damage found and left as it is (run again with --drop-damaged to repair)
  2  not a partition directory, or its log dir is locked by a running broker
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "repair-log",
        help="show or cut out the damage that keeps a partition offline",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("directory", type=Path, help="the partition directory (<topic>-<n>)")
    parser.add_argument(
        "--drop-damaged",
        action="store_true",
        help="cut the damaged ranges shown out of their segments (default: only show them)",
    )
    parser.set_defaults(func=run)


def _describe(report: SegmentReport) -> list[str]:
    lines = []
    for damage in report.damaged:
        lost = (
            f"offsets {damage.first_lost_offset}..{damage.resumes_at_offset - 1}"
            if damage.resumes_at_offset is not None
            else f"offsets from {damage.first_lost_offset} to the end of the segment"
        )
        resumes = (
            f"valid batches resume at byte {damage.end} (offset {damage.resumes_at_offset})"
            if damage.resumes_at_offset is not None
            else "no valid batch follows in this segment"
        )
        lines.append(
            f"{report.path}: damaged at byte {damage.start}: {damage.reason}\n"
            f"  drop bytes [{damage.start}, {damage.end}) ({damage.size_bytes} bytes, {lost}); "
            f"{resumes}; saved to {damaged_copy_path(report, damage).name}"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    directory: Path = args.directory.absolute()
    in_a_log_dir = (directory.parent / META_PROPERTIES).is_file()
    if not directory.is_dir() or parse_partition_dir(directory.name) is None or not in_a_log_dir:
        print(f"odradek repair-log: {directory} is not a partition directory", file=sys.stderr)
        return 2
    try:
        lock = DirLock.acquire(directory.parent)
    except (LockError, OSError) as exc:
        print(f"odradek repair-log: cannot lock {directory.parent}: {exc}", file=sys.stderr)
        return 2
    with lock:
        reports = inspect_partition(directory)
        damaged = [r for r in reports if r.damaged]
        total = sum(d.size_bytes for r in damaged for d in r.damaged)
        for report in damaged:
            print("\n".join(_describe(report)))
        if not damaged:
            print(f"{directory}: {len(reports)} segments, no damage found")
            return 0
        if not args.drop_damaged:
            print(f"{total} bytes would be dropped; nothing changed (add --drop-damaged to repair)")
            return 1
        saved = repair_partition(reports)
        print(f"dropped {total} bytes; saved in {', '.join(p.name for p in saved)}")
        print("restart the broker: it re-validates this partition and serves it again")
        return 0
