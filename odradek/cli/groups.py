"""``odradek groups list|describe|reset-offsets|delete-offsets|delete``: kafka-consumer-groups.sh.

``describe G`` prints, per partition the group has committed or been assigned, Kafka's table
``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``
(``-`` where there is nothing: no commit, no member); ``--members`` lists the members and
``--state`` the group's state, assignor and size. ``reset-offsets`` computes new offsets for
the partitions of ``--topic T[:P,P...]`` (clamped to the log's start and end, as Kafka does)
and prints them; only ``--execute`` commits them, and only for an inactive group (``Empty``
or unknown), as Kafka refuses a reset of a group with members. ``delete-offsets`` deletes the
committed offsets of the partitions of ``--topic`` (those of topics an active member subscribes
to stay: GROUP_SUBSCRIBED_TO_TOPIC). Also holds the group side of
``odradek consume --group`` (:func:`consume_group`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, BinaryIO

from odradek.cli.common import add_bootstrap, client_options, run_reported

if TYPE_CHECKING:
    from odradek.client import Admin, GroupDescription, TopicPartition


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "groups",
        help="list, describe, reset and delete consumer groups",
        description="Manage consumer groups (like kafka-consumer-groups.sh).",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list group ids")
    listing.add_argument("--state", action="store_true", help="also print each group's state")
    listing.set_defaults(func=_list)

    describe = actions.add_parser("describe", help="offsets, lag and members of a group")
    describe.add_argument("group")
    shown = describe.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true", help="list the members")
    shown.add_argument("--state", action="store_true", help="state, assignor, member count")
    describe.set_defaults(func=_describe)

    reset = actions.add_parser("reset-offsets", help="move an inactive group's offsets")
    reset.add_argument("group")
    reset.add_argument(
        "--topic", required=True, action="append", help="TOPIC or TOPIC:P,P,... (repeatable)"
    )
    spec = reset.add_mutually_exclusive_group(required=True)
    spec.add_argument("--to-earliest", action="store_true")
    spec.add_argument("--to-latest", action="store_true")
    spec.add_argument("--to-offset", type=int, metavar="N")
    spec.add_argument("--to-datetime", metavar="ISO", help="e.g. 2026-11-23T10:00:00.000")
    spec.add_argument("--shift-by", type=int, metavar="N", help="from the committed offset")
    run = reset.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    run.add_argument("--dry-run", action="store_true", help="only print them (the default)")
    reset.set_defaults(func=_reset)

    forget = actions.add_parser("delete-offsets", help="delete a group's offsets of some topics")
    forget.add_argument("group")
    forget.add_argument(
        "--topic", required=True, action="append", help="TOPIC or TOPIC:P,P,... (repeatable)"
    )
    forget.set_defaults(func=_delete_offsets)

    delete = actions.add_parser("delete", help="delete inactive groups and their offsets")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(func=_delete)

    for sub in (listing, describe, reset, forget, delete):
        add_bootstrap(sub)


def _admin(args: argparse.Namespace) -> Admin:
    from odradek.client import Admin

    return Admin(args.bootstrap_server, client_id="odradek-groups", **client_options(args))


def table(rows: Sequence[Sequence[object]]) -> str:
    """Columns left-aligned, padded to the widest cell, separated by two spaces."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _list(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            groups = sorted(admin.list_groups())
        if args.state:
            print(table([("GROUP", "STATE"), *((g.group_id, g.state) for g in groups)]))
        else:
            for group in groups:
                print(group.group_id)
        return 0

    return run_reported("groups", body)


def _describe(args: argparse.Namespace) -> int:
    from odradek.client.offset_reset import INACTIVE_GROUP_STATES

    def body() -> int:
        with _admin(args) as admin:
            (group,) = admin.describe_groups([args.group])
            committed = admin.list_group_offsets(args.group)
            if group.state == "Dead" and not committed:
                print(
                    f"odradek groups: error: consumer group '{args.group}' does not exist.",
                    file=sys.stderr,
                )
                return 1
            if group.state in INACTIVE_GROUP_STATES and not args.state:
                print(f"\nConsumer group '{args.group}' has no active members.")
            print()
            if args.state:
                print(_state_table(group))
            elif args.members:
                print(_members_table(group))
            else:
                print(_offsets_table(admin, group, {tp: om.offset for tp, om in committed.items()}))
        return 0

    return run_reported("groups", body)


def _state_table(group: GroupDescription) -> str:
    rows = [("GROUP", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")]
    rows.append((group.group_id, group.assignor or "-", group.state, str(len(group.members))))
    return table(rows)


def _members_table(group: GroupDescription) -> str:
    rows = [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")]
    for mb in group.members:
        tps = sorted(mb.assignment)
        shown = ",".join(f"{tp.topic}:{tp.partition}" for tp in tps) or "-"
        rows.append((group.group_id, mb.member_id, mb.client_host, mb.client_id, len(tps), shown))
    return table(rows)


def _offsets_table(
    admin: Admin, group: GroupDescription, committed: dict[TopicPartition, int]
) -> str:
    owner = {tp: mb for mb in group.members for tp in mb.assignment}
    partitions = sorted(set(committed) | set(owner))
    ends = admin.list_offsets(dict.fromkeys(partitions, -1)) if partitions else {}
    rows: list[tuple[object, ...]] = [
        (
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        )
    ]
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp)
        end_offset = None if end is None else end.offset
        lag = "-" if current is None or end_offset is None else max(0, end_offset - current)
        mb = owner.get(tp)
        who = (mb.member_id, mb.client_host, mb.client_id) if mb else ("-", "-", "-")
        rows.append(
            (
                group.group_id,
                tp.topic,
                tp.partition,
                "-" if current is None else current,
                "-" if end_offset is None else end_offset,
                lag,
                *who,
            )
        )
    return table(rows)


# ---- reset-offsets ---------------------------------------------------------------------------
def _reset(args: argparse.Namespace) -> int:
    from odradek.client.offset_reset import INACTIVE_GROUP_STATES

    def body() -> int:
        with _admin(args) as admin:
            (group,) = admin.describe_groups([args.group])
            if group.state not in INACTIVE_GROUP_STATES:
                print(
                    f"odradek groups: error: assignments can only be reset if the group "
                    f"'{args.group}' is inactive, but the current state is {group.state}.",
                    file=sys.stderr,
                )
                return 1
            offsets = _new_offsets(admin, args)
            if args.execute:
                admin.alter_group_offsets(args.group, offsets)
        rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
        rows += [(args.group, tp.topic, tp.partition, off) for tp, off in sorted(offsets.items())]
        print()
        print(table(rows))
        if not args.execute:
            print("\n(dry run: nothing was changed; add --execute to commit these offsets)")
        return 0

    return run_reported("groups", body)


def _partitions(admin: Admin, specs: list[str]) -> list[TopicPartition]:
    from odradek.client import TopicPartition

    out = []
    for spec in specs:
        topic, _, listed = spec.partition(":")
        if listed:
            out += [TopicPartition(topic, int(p)) for p in listed.split(",")]
        else:
            (described,) = admin.describe_topics([topic])
            out += [TopicPartition(topic, p.partition) for p in described.partitions]
    return out


def _new_offsets(admin: Admin, args: argparse.Namespace) -> dict[TopicPartition, int]:
    """Ask the broker what :func:`odradek.client.offset_reset.plan_reset` needs."""
    from odradek.client.offset_reset import plan_reset

    tps = _partitions(admin, args.topic)

    def offsets(timestamp_ms: int) -> dict[TopicPartition, int | None]:
        found = admin.list_offsets(dict.fromkeys(tps, timestamp_ms))
        return {tp: None if hit is None else hit.offset for tp, hit in found.items()}

    starts, ends = offsets(-2), offsets(-1)
    if args.to_earliest or args.to_latest:
        target, value = ("earliest" if args.to_earliest else "latest"), None
    elif args.to_offset is not None:
        target, value = "offset", args.to_offset
    elif args.to_datetime is not None:
        found = offsets(_parse_datetime_ms(args.to_datetime))
        return plan_reset("timestamp", tps, starts, ends, found=found)  # type: ignore[arg-type]
    else:
        committed = {tp: c.offset for tp, c in admin.list_group_offsets(args.group).items()}
        return plan_reset(
            "shift",
            tps,
            starts,
            ends,
            value=args.shift_by,
            committed=committed,  # type: ignore[arg-type]
        )
    return plan_reset(target, tps, starts, ends, value=value)  # type: ignore[arg-type]


def _parse_datetime_ms(text: str) -> int:
    """ISO 8601 (``2026-11-23T10:00:00.000``, optional ``Z``/offset; local time if none)."""
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.astimezone()  # local time zone, as Kafka's tool reads a zoneless date
    return int(when.timestamp() * 1000)


# ---- delete-offsets, delete ------------------------------------------------------------------
def _delete_offsets(args: argparse.Namespace) -> int:
    """Kafka's output: a line for the request, then a STATUS per partition; exit 1 if any
    partition kept its offset."""

    def body() -> int:
        with _admin(args) as admin:
            results = admin.delete_group_offsets(args.group, _partitions(admin, args.topic))
        topics = ", ".join(dict.fromkeys(tp.topic for tp in results))
        failed = any(error is not None for error in results.values())
        if failed:
            print("odradek groups: error: some partitions kept their offsets:", file=sys.stderr)
        else:
            print(f"Request succeed for deleting offsets with topic {topics} group {args.group}")
        rows = [("TOPIC", "PARTITION", "STATUS")]
        for tp, error in sorted(results.items()):
            status = "Successful" if error is None else f"Error: {type(error).__name__}"
            rows.append((tp.topic, tp.partition, status))
        print()
        print(table(rows))
        return int(failed)

    return run_reported("groups", body)


def _delete(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            admin.delete_groups(args.groups)
        names = ", ".join(f"'{g}'" for g in args.groups)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
        return 0

    return run_reported("groups", body)


# ---- odradek consume --group -----------------------------------------------------------------
def consume_group(args: argparse.Namespace, out: BinaryIO) -> int:
    """Read ``args.topic`` as a member of ``args.group``: ``--from-beginning`` applies only
    where the group has no committed offset (auto.offset.reset=earliest); offsets are
    auto-committed every second and on exit, when the member leaves the group."""
    from odradek.cli.consume import _print_records
    from odradek.client import Consumer
    from odradek.client.errors import UnknownTopicOrPartitionError

    consumer = Consumer(
        bootstrap_servers=args.bootstrap_server,
        group_id=args.group,
        client_id="odradek-console-consumer",
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        enable_auto_commit=True,
        auto_commit_interval_ms=1000,
        **client_options(args),
    )
    count = 0
    try:
        if not consumer.partitions_for_topic(args.topic):
            raise UnknownTopicOrPartitionError(f"topic {args.topic!r} does not exist")
        consumer.subscribe([args.topic])
        count = _print_records(consumer, args, out)
    finally:
        consumer.close()  # commits what was printed, then leaves the group
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
