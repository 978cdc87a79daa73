"""``odradek users create|delete|list``: SCRAM credentials, as ``kafka-configs --alter
--add-config 'SCRAM-SHA-256=[...]' --entity-type users`` manages them.

Two ways to reach them:

- ``--bootstrap-server HOST:PORT``: through a running broker, with Kafka's own
  AlterUserScramCredentials and DescribeUserScramCredentials requests (what ``kafka-configs``
  sends), on a listener that needs no authentication (a PLAINTEXT listener bound to
  loopback, say). The broker salts nothing and sees no password: the salted password is
  computed here, as Kafka's clients do.
- ``--config server.properties``: in the log directories, with the broker stopped (each
  root's ``.lock`` is taken), as ``kafka-storage format --add-scram`` does before a broker's
  first start: how the first user of a SASL-only broker is made.

The password is read from the terminal without echo, or as one line from standard input
when it is not a terminal (``printf '%s\\n' "$PASSWORD" | odradek users create alice``); never
from the command line, where ``ps`` would show it.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import sys
from pathlib import Path
from typing import Any

from odradek.broker.config import ConfigError, load_config
from odradek.cli.common import add_command_config
from odradek.protocol.errors import ErrorCode
from odradek.protocol.sasl import (
    MECHANISM_IDS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    derive_credential,
    salted_password,
)
from odradek.storage.atomic import make_directories
from odradek.storage.checkpoints import DirLock, LockError
from odradek.storage.credentials import CredentialStore

_NUMBERS = {name: number for number, name in MECHANISM_IDS.items()}
_DESCRIBE, _ALTER = 50, 51
_SALT_BYTES = 32


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "users",
        help="create, delete or list SCRAM users (SASL authentication)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="users_command", metavar="ACTION", required=True)
    for name, text in (
        ("create", "create a user or change its password"),
        ("delete", "delete a user's credentials"),
        ("list", "list the users and their mechanisms"),
    ):
        command = commands.add_parser(name, help=text, description=text)
        where = command.add_mutually_exclusive_group(required=True)
        where.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a running broker")
        where.add_argument(
            "--config", type=Path, help="the broker's server.properties (broker stopped)"
        )
        command.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
        add_command_config(command)
        if name != "list":
            command.add_argument("user")
            command.add_argument(
                "--mechanism",
                action="append",
                choices=sorted(SCRAM_MECHANISMS),
                help="repeatable; default: both",
            )
        if name == "create":
            command.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
        command.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.bootstrap_server:
            return _online(args)
        return _offline(args)
    except (ConfigError, LockError, OSError, ValueError) as exc:
        print(f"odradek users: {exc}", file=sys.stderr)
        return 2


def _mechanisms(args: argparse.Namespace) -> list[str]:
    return args.mechanism or sorted(SCRAM_MECHANISMS)


def _password() -> str:
    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise ValueError("the passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        raise ValueError("empty password")
    return password


# -- through a running broker: Kafka's requests ------------------------------------------------
def _call(args: argparse.Namespace, api_key: int, fields: dict[str, Any]) -> dict[str, Any]:
    from odradek.cli.kafka_call import call_once  # the codecs load only when a request is sent

    return call_once(args.bootstrap_server, args.command_config, api_key, 0, fields)


def _online(args: argparse.Namespace) -> int:
    if args.users_command == "list":
        answer = _call(args, _DESCRIBE, {"users": None})
        for result in answer["results"]:
            infos = ", ".join(
                f"{MECHANISM_IDS[i['mechanism']]} (iterations {i['iterations']})"
                for i in result["credential_infos"]
            )
            print(f"{result['user']}: {infos}")
        return 0
    if args.users_command == "create":
        password = _password()
        upsertions = []
        for mechanism in _mechanisms(args):
            salt = os.urandom(_SALT_BYTES)
            upsertions.append(
                {
                    "name": args.user,
                    "mechanism": _NUMBERS[mechanism],
                    "iterations": args.iterations,
                    "salt": salt,
                    "salted_password": salted_password(mechanism, password, salt, args.iterations),
                }
            )
        fields = {"deletions": [], "upsertions": upsertions}
    else:
        deletions = [{"name": args.user, "mechanism": _NUMBERS[m]} for m in _mechanisms(args)]
        fields = {"deletions": deletions, "upsertions": []}
    status = 0
    for result in _call(args, _ALTER, fields)["results"]:
        if result["error_code"]:
            name = ErrorCode(result["error_code"]).name
            print(f"{result['user']}: {name}: {result['error_message']}", file=sys.stderr)
            status = 1
        else:
            print(f"{result['user']}: {args.users_command}d")
    return status


# -- in the log directories, the broker stopped ----------------------------------------------
def _offline(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.override)
    roots = config.log_dirs
    with contextlib.ExitStack() as locks:
        for root in roots:
            make_directories(root)
            try:
                locks.enter_context(DirLock.acquire(root))
            except LockError:
                raise LockError(
                    f"{root} is locked by a running broker: use --bootstrap-server"
                ) from None
        store = CredentialStore(roots)
        if args.users_command == "list":
            for user, mechanisms in sorted(store.users.items()):
                infos = ", ".join(
                    f"{m} (iterations {c.iterations})" for m, c in sorted(mechanisms.items())
                )
                print(f"{user}: {infos}")
            return 0
        if args.users_command == "create":
            password = _password()
            upserts = [
                (
                    args.user,
                    derive_credential(m, password, os.urandom(_SALT_BYTES), args.iterations),
                )
                for m in _mechanisms(args)
            ]
            store.apply(roots, upserts=upserts)
        else:
            missing = [m for m in _mechanisms(args) if store.lookup(args.user, m) is None]
            if missing == _mechanisms(args):
                print(f"odradek users: {args.user} has no such credential", file=sys.stderr)
                return 1
            store.apply(roots, deletes=[(args.user, m) for m in _mechanisms(args)])
        print(f"{args.user}: {args.users_command}d")
    return 0
