"""What the client subcommands share: ``--bootstrap-server`` and ``--command-config``,
``key=value`` options, errors.

Every client subcommand reports a failure the same way: one line on stderr naming the
command, the exception class (Kafka's error name) and its message, and exit status 1. A
usage mistake (bad ``key=value``) is argparse's exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"the broker to connect to (default {DEFAULT_BOOTSTRAP}; a comma-separated list "
        "is tried in order)",
    )
    add_command_config(parser)


def add_command_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="Kafka client properties for the connection (security.protocol, ssl.*, "
        "sasl.mechanism, sasl.jaas.config, ...), as Kafka's tools take them",
    )


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The client options ``--command-config`` gives (TLS, SASL); ``ValueError`` naming a
    property the client does not know."""
    from odradek.cli.kafka_call import read_command_config
    from odradek.client.security import options_from_properties

    return options_from_properties(read_command_config(args.command_config))


def key_value(text: str) -> tuple[str, str]:
    """argparse type for ``key=value`` (the value may be empty or contain ``=``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key, value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def fail(command: str, error: BaseException) -> int:
    """Print ``odradek COMMAND: error: ...`` naming the error on stderr; the exit status (1).

    A client error already reads ``[Error 17] InvalidTopicError: <message>``; anything else
    is shown as ``<ExceptionName>: <message>``."""
    from odradek.client.errors import KafkaError

    text = str(error) if isinstance(error, KafkaError) else f"{type(error).__name__}: {error}"
    print(f"odradek {command}: error: {text}", file=sys.stderr)
    return 1


def run_reported(command: str, body: Callable[[], int | None]) -> int:
    """Run ``body``; a client error becomes exit status 1 with a one-line message."""
    from odradek.client.errors import KafkaError

    try:
        return int(body() or 0)
    except (KafkaError, OSError, TimeoutError, ValueError) as exc:
        return fail(command, exc)
