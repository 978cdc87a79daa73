"""``odradek consume TOPIC``: print records, one per line (kafka-console-consumer.sh).

Without ``--partition`` every partition of the topic is read; the start is the log end
(only new records) unless ``--from-beginning``; ``--partition P --offset N|earliest|latest``
starts one partition at N. A line is, in this order and each followed by a tab when asked
for: ``CreateTime:<ms>`` (or ``LogAppendTime:``), ``Partition:<p>``, ``Offset:<o>``, the key;
then the value. Keys and values are written as raw bytes; a null one prints ``null``.
Output is flushed after every fetched batch of records, so a pipe sees records as they come.
At the end "Processed a total of N messages" goes to stderr, as Kafka's tool prints it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, BinaryIO

from odradek.cli.common import add_bootstrap, client_options, positive_int, run_reported

if TYPE_CHECKING:
    from odradek.client import Consumer, ConsumerRecord, TopicPartition

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "consume",
        help="print records of a topic",
        description="Print the records of TOPIC on standard output, one per line.",
    )
    parser.add_argument("topic")
    add_bootstrap(parser)
    parser.add_argument("--from-beginning", action="store_true")
    parser.add_argument("--partition", type=int, help="read this partition only")
    parser.add_argument(
        "--offset",
        default=None,
        help="with --partition: earliest, latest, or the offset to start at",
    )
    parser.add_argument("--max-messages", type=positive_int, help="exit after N records")
    parser.add_argument(
        "--timeout-ms", type=positive_int, help="exit after T ms without a new record"
    )
    parser.add_argument("--print-key", action="store_true")
    parser.add_argument("--print-partition", action="store_true")
    parser.add_argument("--print-offset", action="store_true")
    parser.add_argument("--print-timestamp", action="store_true")
    parser.add_argument(
        "--group",
        help="consume as a member of this consumer group (commits as it goes and on exit; "
        "--from-beginning then applies only where the group has no committed offset)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        print("odradek consume: --offset needs --partition", file=sys.stderr)
        return 2
    if args.offset not in (None, "earliest", "latest") and not args.offset.isdigit():
        print(f"odradek consume: bad --offset {args.offset!r}", file=sys.stderr)
        return 2
    if args.group is not None:
        if args.partition is not None:
            print("odradek consume: --group cannot be used with --partition", file=sys.stderr)
            return 2
        from odradek.cli.groups import consume_group

        return run_reported("consume", lambda: consume_group(args, sys.stdout.buffer))
    return run_reported("consume", lambda: consume(args, sys.stdout.buffer))


def consume(args: argparse.Namespace, out: BinaryIO) -> int:
    from odradek.client import Consumer, TopicPartition
    from odradek.client.errors import UnknownTopicOrPartitionError

    consumer = Consumer(
        bootstrap_servers=args.bootstrap_server,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        enable_auto_commit=False,
        **client_options(args),
    )
    count = 0
    try:
        partitions = consumer.partitions_for_topic(args.topic)
        if not partitions:
            raise UnknownTopicOrPartitionError(f"topic {args.topic!r} does not exist")
        if args.partition is not None:
            if args.partition not in partitions:
                raise UnknownTopicOrPartitionError(
                    f"topic {args.topic!r} has no partition {args.partition}"
                )
            partitions = {args.partition}
        assigned = [TopicPartition(args.topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        _seek(consumer, assigned, args)
        count = _print_records(consumer, args, out)
    finally:
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _seek(consumer: Consumer, assigned: list[TopicPartition], args: argparse.Namespace) -> None:
    if args.offset is None:
        if args.from_beginning:
            consumer.seek_to_beginning(*assigned)
        else:
            consumer.seek_to_end(*assigned)
    elif args.offset == "earliest":
        consumer.seek_to_beginning(*assigned)
    elif args.offset == "latest":
        consumer.seek_to_end(*assigned)
    else:
        consumer.seek(assigned[0], int(args.offset))


def _print_records(consumer: Consumer, args: argparse.Namespace, out: BinaryIO) -> int:
    """Print until ``--max-messages`` or ``--timeout-ms`` of silence; the count printed."""
    count = 0
    limit = args.max_messages
    idle_deadline = None if args.timeout_ms is None else time.monotonic() + args.timeout_ms / 1000
    while limit is None or count < limit:
        wait_ms = 1000
        if idle_deadline is not None:
            wait_ms = max(0, min(wait_ms, int((idle_deadline - time.monotonic()) * 1000)))
        batches = consumer.poll(
            timeout_ms=wait_ms, max_records=None if limit is None else limit - count
        )
        records = [record for partition in batches.values() for record in partition]
        if records:
            for record in records:
                out.write(format_record(record, args))
            out.flush()
            count += len(records)
            if idle_deadline is not None:
                idle_deadline = time.monotonic() + args.timeout_ms / 1000
        elif idle_deadline is not None and time.monotonic() >= idle_deadline:
            break
    return count


def format_record(record: ConsumerRecord, args: argparse.Namespace) -> bytes:
    parts: list[bytes] = []
    if args.print_timestamp:
        parts.append(f"{TIMESTAMP_TYPES[record.timestamp_type]}:{record.timestamp}".encode())
    if args.print_partition:
        parts.append(b"Partition:%d" % record.partition)
    if args.print_offset:
        parts.append(b"Offset:%d" % record.offset)
    if args.print_key:
        parts.append(b"null" if record.key is None else record.key)
    parts.append(b"null" if record.value is None else record.value)
    return b"\t".join(parts) + b"\n"
