"""``odradek console``: the web UI (:mod:`odradek.console`), imported only when run."""

from __future__ import annotations

import argparse
import sys

from odradek.cli.common import add_bootstrap, client_options, positive_int

DEFAULT_LISTEN = "127.0.0.1:8080"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "console",
        help="a web UI: topics, partitions, groups and lag, messages, rates",
        description="Serve a web console that looks at the broker as a client does "
        "(docs/console.md). It has no authentication: keep it on loopback.",
    )
    add_bootstrap(parser)
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to serve the console (default {DEFAULT_LISTEN}; port 0 picks a free one)",
    )
    parser.add_argument(
        "--rate-interval-ms",
        type=positive_int,
        default=2000,
        metavar="MS",
        help="how often the rates chart polls the broker's offsets (default 2000)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        print(
            f"odradek console: error: {exc}; install the console extra: "
            "pip install 'odradek[console]'",
            file=sys.stderr,
        )
        return 1
    from odradek.console.server import serve

    try:
        serve(
            args.bootstrap_server,
            args.listen,
            rate_interval_ms=args.rate_interval_ms,
            client_options=client_options(args),
        )
    except (OSError, ValueError) as exc:
        print(f"odradek console: error: {exc}", file=sys.stderr)
        return 1
    return 0
