"""``odradek acls add|list|remove``: ACLs, with ``kafka-acls``' options, through a running
broker (Kafka's CreateAcls, DescribeAcls and DeleteAcls requests).

    odradek acls add --allow-principal User:alice --operation Read --topic orders \\
        --resource-pattern-type prefixed --bootstrap-server 127.0.0.1:9092
    odradek acls add --producer --allow-principal User:app --topic orders ...
    odradek acls add --consumer --allow-principal User:app --topic orders --group billing ...
    odradek acls list --topic orders ...
    odradek acls remove --allow-principal User:alice --operation Read --topic orders ...

``--producer`` is Write, Describe and Create on the topics; ``--consumer`` Read and Describe
on the topics and Read on the groups (as ``kafka-acls`` expands them). The request goes to a
listener that needs no authentication, as the caller's principal (a super user's listener,
or ``allow.everyone.if.no.acl.found``); ``remove`` removes every binding matching the
options given (a missing option matches anything).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.broker.config import ConfigError
from odradek.cli.common import add_command_config
from odradek.protocol.acl import (
    CLUSTER_NAME,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from odradek.protocol.errors import ErrorCode

_DESCRIBE, _CREATE, _DELETE = 29, 30, 31
_VERSION = 3
_OPERATIONS = {o.name.replace("_", "").lower(): o for o in Operation if o > Operation.ANY}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "acls",
        help="add, list or remove ACLs (authorizer.class.name)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    for name in ("add", "list", "remove"):
        command = commands.add_parser(name, help=f"{name} ACLs")
        command.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
        add_command_config(command)
        command.add_argument("--topic", action="append", default=[])
        command.add_argument("--group", action="append", default=[])
        command.add_argument("--cluster", action="store_true")
        command.add_argument("--transactional-id", action="append", default=[])
        command.add_argument(
            "--resource-pattern-type",
            choices=["literal", "prefixed"] + (["match", "any"] if name != "add" else []),
            default="literal" if name == "add" else "any",
        )
        if name == "list":
            command.add_argument("--principal", help="only the bindings of this principal")
            command.set_defaults(func=run)
            continue
        command.add_argument("--allow-principal", action="append", default=[])
        command.add_argument("--deny-principal", action="append", default=[])
        command.add_argument("--allow-host", action="append", default=[])
        command.add_argument("--deny-host", action="append", default=[])
        command.add_argument(
            "--operation",
            action="append",
            default=[],
            type=lambda text: _OPERATIONS[text.replace("_", "").replace("-", "").lower()],
            help=f"repeatable: {', '.join(o.name.title() for o in _OPERATIONS.values())}",
        )
        command.add_argument("--producer", action="store_true")
        command.add_argument("--consumer", action="store_true")
        command.set_defaults(func=run)


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, t) for t in args.topic]
    resources += [(ResourceType.GROUP, g) for g in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _operations(args: argparse.Namespace, resource_type: ResourceType) -> list[Operation]:
    operations = list(args.operation)
    if args.producer and resource_type == ResourceType.TOPIC:
        operations += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
    if args.consumer and resource_type == ResourceType.TOPIC:
        operations += [Operation.READ, Operation.DESCRIBE]
    if args.consumer and resource_type == ResourceType.GROUP:
        operations += [Operation.READ]
    return list(dict.fromkeys(operations))


def _bindings(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (resource, principal, host, operation, permission) the options name."""
    pattern = PatternType[args.resource_pattern_type.upper()]
    who = [(p, Permission.ALLOW, args.allow_host or ["*"]) for p in args.allow_principal]
    who += [(p, Permission.DENY, args.deny_host or ["*"]) for p in args.deny_principal]
    out = []
    for resource_type, name in _resources(args):
        for principal, permission, hosts in who:
            for host in hosts:
                for operation in _operations(args, resource_type):
                    out.append(
                        {
                            "resource_type": resource_type,
                            "resource_name": name,
                            "resource_pattern_type": pattern,
                            "principal": principal,
                            "host": host,
                            "operation": operation,
                            "permission_type": permission,
                        }
                    )
    return out


def _filter(binding: dict[str, Any] | None, args: argparse.Namespace) -> dict[str, Any]:
    if binding is None:  # list: by resource type and name, and principal
        (resource_type, name), *_ = _resources(args) or [(ResourceType.ANY, None)]
        return {
            "resource_type_filter": resource_type,
            "resource_name_filter": name,
            "pattern_type_filter": PatternType[args.resource_pattern_type.upper()],
            "principal_filter": args.principal,
            "host_filter": None,
            "operation": Operation.ANY,
            "permission_type": Permission.ANY,
        }
    return {
        "resource_type_filter": binding["resource_type"],
        "resource_name_filter": binding["resource_name"],
        "pattern_type_filter": binding["resource_pattern_type"],
        "principal_filter": binding["principal"],
        "host_filter": binding["host"],
        "operation": binding["operation"],
        "permission_type": binding["permission_type"],
    }


def _show(resource_type: int, name: str, pattern: int, acl: dict[str, Any]) -> str:
    return (
        f"{ResourceType(resource_type).name}:{PatternType(pattern).name}:{name} "
        f"{Permission(acl['permission_type']).name} {acl['principal']} from {acl['host']} "
        f"{Operation(acl['operation']).name}"
    )


def run(args: argparse.Namespace) -> int:
    try:
        if args.acls_command == "list":
            return _list(args)
        bindings = _bindings(args)
        if not bindings:
            print("odradek acls: name a resource, a principal and an operation", file=sys.stderr)
            return 2
        if args.acls_command == "add":
            answer = _call(args, _CREATE, {"creations": bindings})
            errors = [r for r in answer["results"] if r["error_code"]]
        else:
            filters = [_filter(b, args) for b in bindings]
            answer = _call(args, _DELETE, {"filters": filters})
            errors = [r for r in answer["filter_results"] if r["error_code"]]
    except (OSError, ValueError, ConfigError) as exc:  # ssl.SSLError is an OSError
        print(f"odradek acls: {exc}", file=sys.stderr)
        return 2
    for error in errors:
        code = ErrorCode(error["error_code"]).name
        print(f"odradek acls: {code}: {error['error_message'] or ''}", file=sys.stderr)
    if not errors:
        print(f"{len(bindings)} ACLs {'added' if args.acls_command == 'add' else 'removed'}")
    return 1 if errors else 0


def _call(args: argparse.Namespace, api_key: int, fields: dict[str, Any]) -> dict[str, Any]:
    from odradek.cli.kafka_call import call_once  # the codecs load only when a request is sent

    return call_once(args.bootstrap_server, args.command_config, api_key, _VERSION, fields)


def _list(args: argparse.Namespace) -> int:
    answer = _call(args, _DESCRIBE, _filter(None, args))
    if answer["error_code"]:
        code = ErrorCode(answer["error_code"]).name
        print(f"odradek acls: {code}: {answer['error_message'] or ''}", file=sys.stderr)
        return 1
    for resource in answer["resources"]:
        for acl in resource["acls"]:
            print(
                _show(
                    resource["resource_type"],
                    resource["resource_name"],
                    resource["pattern_type"],
                    acl,
                )
            )
    return 0
