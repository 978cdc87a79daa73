"""``odradek produce TOPIC``: one record per stdin line (kafka-console-producer.sh).

Lines are bytes (no decoding); the trailing newline (``\\n`` or ``\\r\\n``) is not part of the
value. With ``--key-separator SEP`` each line is ``key SEP value`` split at the first SEP, and
a line without SEP is an error (as Kafka's ``parse.key=true``). Exit status 0 means every line
was acknowledged under ``--acks``; otherwise the first error is named on stderr and the status
is 1 (with ``--acks 0`` nothing is acknowledged, so 0 means only "sent").
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import Future
from typing import BinaryIO

from odradek.cli.common import add_bootstrap, client_options, fail, key_value, run_reported

COMPRESSION = ["none", "gzip", "snappy", "lz4", "zstd"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "produce",
        help="send stdin lines as records",
        description="Send one record per line of standard input to TOPIC.",
    )
    parser.add_argument("topic")
    add_bootstrap(parser)
    parser.add_argument("--key-separator", metavar="SEP", help="split each line into key SEP value")
    parser.add_argument("--acks", choices=["0", "1", "all", "-1"], default="all")
    parser.add_argument("--compression", choices=COMPRESSION, default="none")
    parser.add_argument("--partition", type=int, help="send every record to this partition")
    parser.add_argument(
        "--header",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument(
        "--max-block-ms",
        type=int,
        default=60_000,
        help="how long to wait for the topic's metadata (an unknown topic fails after it)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_reported("produce", lambda: produce_lines(args, sys.stdin.buffer))


def produce_lines(args: argparse.Namespace, stream: BinaryIO) -> int:
    from odradek.client import Producer

    acks: int | str = "all" if args.acks in ("all", "-1") else int(args.acks)
    separator = args.key_separator.encode() if args.key_separator is not None else None
    headers = [(k, v.encode()) for k, v in args.header] or None
    errors: list[BaseException] = []

    def delivered(future: Future) -> None:
        error = future.exception()
        if error is not None:
            errors.append(error)

    status = 0
    producer = Producer(
        args.bootstrap_server,
        acks=acks,
        compression_type=None if args.compression == "none" else args.compression,
        linger_ms=args.linger_ms,
        max_block_ms=args.max_block_ms,
        **client_options(args),
    )
    with producer:
        for number, line in enumerate(stream, start=1):
            value = line.rstrip(b"\n").removesuffix(b"\r")
            key = None
            if separator is not None:
                key, found, value = value.partition(separator)
                if not found:
                    status = fail(
                        "produce",
                        ValueError(f"no key separator {args.key_separator!r} on line {number}"),
                    )
                    break
            producer.send(
                args.topic, value, key, partition=args.partition, headers=headers
            ).add_done_callback(delivered)
            if errors:
                break
        producer.flush()
    if errors:
        return fail("produce", errors[0])
    return status
