"""``odradek topics create|list|describe|delete|alter``: kafka-topics.sh / kafka-configs.sh.

Output is tab-separated as kafka-topics.sh prints it, with what a single node adds: each
partition's log start and end offsets, its size on disk and its log dir. ``describe`` shows
the topic-level overrides on the ``Configs:`` line (as Kafka does) or, with
``--all-configs``, every effective config and where its value comes from.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.cli.common import (
    add_bootstrap,
    client_options,
    key_value,
    positive_int,
    run_reported,
)

if TYPE_CHECKING:
    from odradek.client import Admin

DEFAULT_SOURCES = {"DEFAULT_CONFIG", "STATIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "topics",
        help="create, list, describe, delete and alter topics",
        description="Manage topics (like kafka-topics.sh and kafka-configs.sh).",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument(
        "--partitions", type=positive_int, default=None, help="default: num.partitions"
    )
    create.add_argument(
        "--replication-factor",
        type=positive_int,
        default=1,
        help="accepted for compatibility; a single node only has 1",
    )
    create.add_argument(
        "--config", type=key_value, action="append", default=[], metavar="KEY=VALUE"
    )
    create.add_argument("--if-not-exists", action="store_true")
    create.set_defaults(func=_create)

    listing = actions.add_parser("list", help="list topic names")
    listing.add_argument("--exclude-internal", action="store_true")
    listing.set_defaults(func=_list)

    describe = actions.add_parser("describe", help="partitions, offsets, sizes and configs")
    describe.add_argument("names", nargs="*", metavar="NAME", help="default: every topic")
    describe.add_argument(
        "--all-configs", action="store_true", help="every effective config, with its source"
    )
    describe.set_defaults(func=_describe)

    delete = actions.add_parser("delete", help="delete topics")
    delete.add_argument("names", nargs="+", metavar="NAME")
    delete.add_argument("--if-exists", action="store_true")
    delete.set_defaults(func=_delete)

    alter = actions.add_parser("alter", help="change configs or add partitions")
    alter.add_argument("name")
    alter.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE")
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="back to default"
    )
    alter.add_argument("--partitions", type=positive_int, help="the new total partition count")
    alter.set_defaults(func=_alter)

    for sub in (create, listing, describe, delete, alter):
        add_bootstrap(sub)


def _admin(args: argparse.Namespace) -> Admin:
    from odradek.client import Admin

    return Admin(args.bootstrap_server, **client_options(args))


def _create(args: argparse.Namespace) -> int:
    from odradek.client import NewTopic
    from odradek.client.errors import TopicAlreadyExistsError

    if args.replication_factor != 1:
        print(
            f"odradek topics: error: replication factor {args.replication_factor} is larger "
            "than the number of brokers (1)",
            file=sys.stderr,
        )
        return 1

    def body() -> int:
        topic = NewTopic(args.name, args.partitions or -1, 1, dict(args.config))
        with _admin(args) as admin:
            try:
                admin.create_topics([topic])
            except TopicAlreadyExistsError:
                if not args.if_not_exists:
                    raise
                return 0
        print(f"Created topic {args.name}.")
        return 0

    return run_reported("topics", body)


def _list(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            names = admin.list_topics(internal=not args.exclude_internal)
        for name in sorted(names):
            print(name)
        return 0

    return run_reported("topics", body)


def _describe(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            topics = admin.describe_topics(args.names or None)
            dirs = _partition_dirs(admin.describe_log_dirs(args.names or None))
            for topic in sorted(topics, key=lambda t: t.name):
                configs = admin.describe_configs(topic.name)
                print(_topic_line(topic, configs, all_configs=args.all_configs))
                for info in topic.partitions:
                    size, log_dir = dirs.get((topic.name, info.partition), (-1, "?"))
                    print(
                        f"\tTopic: {topic.name}\tPartition: {info.partition}\tLeader: 1"
                        f"\tReplicas: 1\tIsr: 1\tLogStartOffset: {info.log_start_offset}"
                        f"\tLogEndOffset: {info.high_watermark}\tSize: {size}\tLogDir: {log_dir}"
                    )
        return 0

    return run_reported("topics", body)


def _topic_line(topic: Any, configs: Mapping[str, Any], *, all_configs: bool) -> str:
    shown = [
        entry
        for name, entry in sorted(configs.items())
        if all_configs or _source_name(entry.source) not in DEFAULT_SOURCES
    ]
    if all_configs:
        rendered = ",".join(f"{e.name}={e.value}({_source_name(e.source)})" for e in shown)
    else:
        rendered = ",".join(f"{e.name}={e.value}" for e in shown)
    internal = "\tInternal: true" if topic.internal else ""
    return (
        f"Topic: {topic.name}\tPartitionCount: {len(topic.partitions)}\tReplicationFactor: 1"
        f"{internal}\tConfigs: {rendered}"
    )


def _source_name(source: int) -> str:
    from odradek.protocol.messages import ConfigSource

    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def _partition_dirs(log_dirs: Mapping[str, Any]) -> dict[tuple[str, int], tuple[int, str]]:
    """``(topic, partition) -> (size_bytes, log dir)`` from ``Admin.describe_log_dirs``."""
    return {
        (tp.topic, tp.partition): (size, log_dir)
        for log_dir, description in log_dirs.items()
        for tp, size in description.partitions.items()
    }


def _delete(args: argparse.Namespace) -> int:
    from odradek.client.errors import UnknownTopicOrPartitionError

    def body() -> int:
        with _admin(args) as admin:
            for name in args.names:
                try:
                    admin.delete_topics([name])
                except UnknownTopicOrPartitionError:
                    if not args.if_exists:
                        raise
        return 0

    return run_reported("topics", body)


def _alter(args: argparse.Namespace) -> int:
    if not (args.config or args.delete_config or args.partitions):
        print(
            "odradek topics alter: nothing to do: give --config, --delete-config or --partitions",
            file=sys.stderr,
        )
        return 2

    def body() -> int:
        with _admin(args) as admin:
            if args.config or args.delete_config:
                admin.alter_configs(args.name, set=dict(args.config), delete=args.delete_config)
            if args.partitions:
                admin.create_partitions({args.name: args.partitions})
        return 0

    return run_reported("topics", body)
