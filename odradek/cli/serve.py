"""``odradek serve``: run the broker."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_CONFIG = Path("config/server.properties")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the broker",
        description="Run the broker until SIGTERM or SIGINT (a clean shutdown).",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help=f"server.properties file (default: {DEFAULT_CONFIG} if it exists, "
        "else the embedded defaults)",
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key (repeatable)",
    )
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--log-format", choices=["console", "json"], default="console")
    parser.add_argument("--log-level", default="INFO")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from odradek.broker.config import ConfigError, load_config
    from odradek.broker.listeners import ListenError
    from odradek.broker.logs import configure_logging, get_logger
    from odradek.broker.server import run_server
    from odradek.storage.errors import StorageError

    configure_logging(args.log_format, args.log_level)
    path = args.config
    if path is None and DEFAULT_CONFIG.exists():
        path = DEFAULT_CONFIG
    try:
        config = load_config(path, args.override)
    except ConfigError as exc:
        print(f"odradek serve: configuration error: {exc}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        get_logger().warning("configuration ignored", reason=warning)
    try:
        run_server(config, backend=args.backend)
    except (StorageError, ListenError) as exc:
        get_logger().error("broker failed to start", error=str(exc))
        return 1
    except KeyboardInterrupt:
        pass
    return 0
