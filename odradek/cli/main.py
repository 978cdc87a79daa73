"""The ``odradek`` command: one argparse parser, one module per subcommand.

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an exit status).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Subcommand modules, in the order ``odradek --help`` lists them.
SUBCOMMANDS: list[str] = [
    "odradek.cli.serve",
    "odradek.cli.topics",
    "odradek.cli.produce",
    "odradek.cli.consume",
    "odradek.cli.groups",
    "odradek.cli.perf",
    "odradek.cli.console",
    "odradek.cli.dump_log",
    "odradek.cli.repair_log",
    "odradek.cli.users",
    "odradek.cli.acls",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek", description="A single-node, Kafka-style log broker."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `odradek ... | head` is not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
