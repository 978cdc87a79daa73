"""``odradek dump-log``: Kafka's ``kafka-dump-log.sh`` for segment files (see storage.dump)."""

from __future__ import annotations

import argparse
import sys

from odradek.cli.common import positive_int
from odradek.storage.dump import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    INT32_MAX,
    DumpOptions,
    dump_files,
)

DESCRIPTION = """\
Print the contents of segment files in Kafka's on-disk format, as kafka-dump-log.sh does:
one line per record batch of a .log (and one per record with --deep-iteration or
--print-data-log), one line per entry of a .index or .timeindex, each index entry checked
against its .log. Copies named *.deleted, *.cleaned or *.swap are dumped as their base type.
"""

EPILOG = """\
exit status:
  0  every file was dumped and nothing invalid was found
  1  invalid data: a .log entry failing validation (bad CRC, truncated tail; the dump of that
     file stops there), records that do not decode, index entries that do not match the log,
     an index whose .log is missing, or an index failing --index-sanity-check
  2  a file could not be dumped: missing, a directory, not a regular file (a FIFO or a
     device is refused, never opened for reading), an unsupported type (.snapshot,
     .txnindex, ...), or unreadable (every other file is still dumped); or a batch whose
     records decompress to more than --max-decompressed-bytes (they are not printed)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dump-log",
        help="print .log, .index and .timeindex files (like kafka-dump-log.sh)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="*", metavar="FILE", help="segment files to dump")
    parser.add_argument(
        "--files",
        dest="comma_files",
        action="append",
        default=[],
        metavar="FILE1,FILE2",
        help="comma-separated files to dump (kafka-dump-log.sh's spelling); may be repeated",
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="print each record's key and payload (decoded as UTF-8); implies --deep-iteration",
    )
    parser.add_argument(
        "--deep-iteration",
        action="store_true",
        help="print one line per record, not only one per batch",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the .log without printing them",
    )
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only run the check the broker runs on an index at start-up (is it rebuilt?)",
    )
    parser.add_argument(
        "--max-bytes",
        type=positive_int,
        default=INT32_MAX,
        metavar="N",
        help="read at most N bytes of each .log: stop before the first batch ending past N",
    )
    parser.add_argument(
        "--max-decompressed-bytes",
        type=positive_int,
        default=DEFAULT_MAX_DECOMPRESSED_BYTES,
        metavar="N",
        help="deep iteration: decompress at most N bytes of each batch; a larger batch's "
        f"records are not printed (default {DEFAULT_MAX_DECOMPRESSED_BYTES})",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    files = list(args.files)
    for group in args.comma_files:
        files.extend(name for name in group.split(",") if name)
    if not files:
        print("odradek dump-log: no FILE given", file=sys.stderr)
        return 2
    options = DumpOptions(
        print_data_log=args.print_data_log,
        deep_iteration=args.deep_iteration,
        verify_index_only=args.verify_index_only,
        index_sanity_check=args.index_sanity_check,
        max_bytes=args.max_bytes,
        max_decompressed_bytes=args.max_decompressed_bytes,
    )
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    status = 0
    for line in dump_files(files, options):
        if line.stderr:
            sys.stdout.flush()
            print(line.text, file=sys.stderr, flush=True)
        else:
            print(line.text)
        status = max(status, line.status)
    return status
