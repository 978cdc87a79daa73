"""ACLs on a real broker (``authorizer.class.name`` set, SASL only): for each api, a principal
without the operation gets Kafka's authorization error and one granted exactly that operation
(through CreateAcls, by a super user) gets through; deny overrides allow; prefixed
patterns; Metadata hides what a principal may not describe; the ACLs survive a restart; and
unmodified clients (confluent-kafka's admin, ``odradek acls``) manage them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol import kafka
from odradek.protocol.acl import Operation, PatternType, Permission, ResourceType
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.sasl import derive_credential
from odradek.storage.atomic import make_directories
from odradek.storage.credentials import CredentialStore
from tests.broker.kafka.kwire import KafkaWire
from tests.broker_process import REPO, BrokerProcess

pytestmark = pytest.mark.slow

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED = 29, 30, 31


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    logs = tmp_path_factory.mktemp("acls") / "logs"
    make_directories(logs)
    upserts = [
        (user, derive_credential("SCRAM-SHA-256", pw, os.urandom(16))) for user, pw in USERS.items()
    ]
    CredentialStore([logs]).apply([logs], upserts=upserts)
    process = BrokerProcess(
        [logs],
        listeners=("SASL_PLAINTEXT",),
        overrides=[
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "super.users=User:admin",
            "connection.failed.authentication.delay.ms=0",
            "auto.create.topics.enable=false",
        ],
    ).start()
    yield process
    process.stop()


def login(broker: BrokerProcess, user: str) -> KafkaWire:
    wire = KafkaWire(broker.port)  # type: ignore[arg-type]
    assert wire.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    token = b"\0" + user.encode() + b"\0" + USERS[user].encode()
    assert wire.call(36, 2, {"auth_bytes": token})["error_code"] == 0
    return wire


def fill(layout: tuple, version: int, values: dict[str, Any]) -> dict[str, Any]:
    """A request struct: ``values``, and Kafka's default for every field not given."""
    out = {}
    for f in layout:
        if not f.present(version):
            continue
        value = values.get(f.name, f.default_value(version))
        item = getattr(f.type, "item", None)
        if isinstance(item, tuple) and isinstance(value, list):
            value = [fill(item, version, v) for v in value]
        out[f.name] = value
    return out


def call(wire: KafkaWire, name: str, values: dict[str, Any]) -> dict[str, Any]:
    key, api = next((k, a) for k, a in kafka.APIS.items() if a.name == name)
    version = api.versions[1]
    return wire.call(key, version, fill(api.request, version, values))


def grant(
    admin: KafkaWire,
    resource_type: ResourceType,
    name: str,
    operation: Operation,
    principal: str = "User:alice",
    permission: Permission = Permission.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
) -> None:
    creation = {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": operation,
        "permission_type": permission,
    }
    answer = call(admin, "CreateAcls", {"creations": [creation]})
    assert answer["results"][0]["error_code"] == 0, answer


def create_topic(admin: KafkaWire, name: str) -> None:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1}
    assert call(admin, "CreateTopics", {"topics": [topic]})["topics"][0]["error_code"] == 0


def _records() -> bytes:
    return encode_batch([(None, b"v", 1_700_000_000_000)])


# api -> (resource type, operation, the request for resource ``r``, the error code it answers)
Case = tuple[ResourceType, Operation, Callable[[KafkaWire, str], int]]
CASES: dict[str, Case] = {
    "Produce": (
        ResourceType.TOPIC,
        Operation.WRITE,
        lambda w, r: call(
            w,
            "Produce",
            {
                "acks": 1,
                "timeout_ms": 5000,
                "topic_data": [
                    {"name": r, "partition_data": [{"index": 0, "records": _records()}]}
                ],
            },
        )["responses"][0]["partition_responses"][0]["error_code"],
    ),
    "Fetch": (
        ResourceType.TOPIC,
        Operation.READ,
        lambda w, r: call(
            w,
            "Fetch",
            {
                "replica_id": -1,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic": r,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
            },
        )["responses"][0]["partitions"][0]["error_code"],
    ),
    "ListOffsets": (
        ResourceType.TOPIC,
        Operation.DESCRIBE,
        lambda w, r: call(
            w,
            "ListOffsets",
            {
                "replica_id": -1,
                "topics": [{"name": r, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )["topics"][0]["partitions"][0]["error_code"],
    ),
    "Metadata": (
        ResourceType.TOPIC,
        Operation.DESCRIBE,
        lambda w, r: call(w, "Metadata", {"topics": [{"name": r}]})["topics"][0]["error_code"],
    ),
    "CreatePartitions": (
        ResourceType.TOPIC,
        Operation.ALTER,
        lambda w, r: call(
            w, "CreatePartitions", {"topics": [{"name": r, "count": 2, "assignments": None}]}
        )["results"][0]["error_code"],
    ),
    "DescribeConfigs": (
        ResourceType.TOPIC,
        Operation.DESCRIBE_CONFIGS,
        lambda w, r: call(
            w,
            "DescribeConfigs",
            {"resources": [{"resource_type": 2, "resource_name": r, "configuration_keys": None}]},
        )["results"][0]["error_code"],
    ),
    "IncrementalAlterConfigs": (
        ResourceType.TOPIC,
        Operation.ALTER_CONFIGS,
        lambda w, r: call(
            w,
            "IncrementalAlterConfigs",
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": r,
                        "configs": [
                            {"name": "retention.ms", "config_operation": 0, "value": "60000"}
                        ],
                    }
                ]
            },
        )["responses"][0]["error_code"],
    ),
    "DeleteRecords": (
        ResourceType.TOPIC,
        Operation.DELETE,
        lambda w, r: call(
            w,
            "DeleteRecords",
            {"topics": [{"name": r, "partitions": [{"partition_index": 0, "offset": 0}]}]},
        )["topics"][0]["partitions"][0]["error_code"],
    ),
    "DeleteTopics": (
        ResourceType.TOPIC,
        Operation.DELETE,
        lambda w, r: call(w, "DeleteTopics", {"topic_names": [r]})["responses"][0]["error_code"],
    ),
    "FindCoordinator": (
        ResourceType.GROUP,
        Operation.DESCRIBE,
        lambda w, r: call(w, "FindCoordinator", {"key": r})["error_code"],
    ),
    "JoinGroup": (
        ResourceType.GROUP,
        Operation.READ,
        lambda w, r: call(
            w,
            "JoinGroup",
            {
                "group_id": r,
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
                "group_instance_id": None,
            },
        )["error_code"],
    ),
    "OffsetFetch": (
        ResourceType.GROUP,
        Operation.DESCRIBE,
        lambda w, r: call(w, "OffsetFetch", {"group_id": r, "topics": None})["error_code"],
    ),
    "DescribeGroups": (
        ResourceType.GROUP,
        Operation.DESCRIBE,
        lambda w, r: call(w, "DescribeGroups", {"groups": [r]})["groups"][0]["error_code"],
    ),
    "DeleteGroups": (
        ResourceType.GROUP,
        Operation.DELETE,
        lambda w, r: call(w, "DeleteGroups", {"groups_names": [r]})["results"][0]["error_code"],
    ),
    "OffsetDelete": (  # and READ on each topic (an unknown one here: not reached)
        ResourceType.GROUP,
        Operation.DELETE,
        lambda w, r: call(
            w, "OffsetDelete", {"group_id": r, "topics": [{"name": r, "partitions": []}]}
        )["error_code"],
    ),
    "DescribeLogDirs": (
        ResourceType.CLUSTER,
        Operation.DESCRIBE,
        lambda w, r: call(w, "DescribeLogDirs", {"topics": None})["results"][0]["error_code"],
    ),
    "InitProducerId": (
        ResourceType.CLUSTER,
        Operation.IDEMPOTENT_WRITE,
        lambda w, r: call(
            w, "InitProducerId", {"transactional_id": None, "producer_id": -1, "producer_epoch": -1}
        )["error_code"],
    ),
    "DescribeUserScramCredentials": (
        ResourceType.CLUSTER,
        Operation.DESCRIBE,
        lambda w, r: call(w, "DescribeUserScramCredentials", {"users": None})["error_code"],
    ),
    "DescribeAcls": (
        ResourceType.CLUSTER,
        Operation.DESCRIBE,
        lambda w, r: call(
            w,
            "DescribeAcls",
            {
                "resource_type_filter": 1,
                "pattern_type_filter": 1,
                "operation": 1,
                "permission_type": 1,
            },
        )["error_code"],
    ),
}
DENIED = {ResourceType.TOPIC: TOPIC_DENIED, ResourceType.GROUP: GROUP_DENIED}


@pytest.mark.parametrize("api", sorted(CASES))
def test_each_api_needs_its_operation(broker: BrokerProcess, api: str) -> None:
    resource_type, operation, request = CASES[api]
    name = "kafka-cluster" if resource_type == ResourceType.CLUSTER else f"{api.lower()}-res"
    with login(broker, "admin") as admin, login(broker, "bob") as bob:
        if resource_type == ResourceType.TOPIC:
            create_topic(admin, name)
        denied = DENIED.get(resource_type, CLUSTER_DENIED)
        assert request(bob, name) == denied, f"{api}: bob has no ACL"
        grant(admin, resource_type, name, operation)
        with login(broker, "alice") as alice:
            assert request(alice, name) not in (TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED), api
        assert request(bob, name) == denied, f"{api}: alice's ACL is not bob's"


def test_deny_wins_and_prefixes_apply(broker: BrokerProcess) -> None:
    produce = CASES["Produce"][2]
    with login(broker, "admin") as admin:
        for name in ("pfx-a", "pfx-b", "other"):
            create_topic(admin, name)
        grant(admin, ResourceType.TOPIC, "pfx-", Operation.WRITE, pattern=PatternType.PREFIXED)
        grant(admin, ResourceType.TOPIC, "pfx-b", Operation.ALL, permission=Permission.DENY)
        with login(broker, "alice") as alice:
            assert produce(alice, "pfx-a") == 0  # the prefix allows
            assert produce(alice, "pfx-b") == TOPIC_DENIED  # deny wins over the prefix
            assert produce(alice, "other") == TOPIC_DENIED  # no ACL names it
            listed = {t["name"] for t in call(alice, "Metadata", {"topics": None})["topics"]}
            assert "pfx-a" in listed and "pfx-b" not in listed and "other" not in listed
        everyone = "User:*"
        grant(admin, ResourceType.TOPIC, "other", Operation.WRITE, principal=everyone)
        with login(broker, "bob") as bob:
            assert produce(bob, "other") == 0  # User:* is everyone


def test_super_user_and_no_auth_before_sasl(broker: BrokerProcess) -> None:
    with login(broker, "admin") as admin:
        create_topic(admin, "super")
        assert CASES["Produce"][2](admin, "super") == 0  # no ACL needed
    with KafkaWire(broker.port) as anonymous:  # type: ignore[arg-type]
        anonymous.send(3, 8, {"topics": None, "allow_auto_topic_creation": False})
        assert anonymous.closed_by_peer()


def test_acls_survive_a_restart_and_odradek_acls_manages_them(broker: BrokerProcess) -> None:
    produce = CASES["Produce"][2]
    with login(broker, "admin") as admin:
        create_topic(admin, "kept")
        grant(admin, ResourceType.TOPIC, "kept", Operation.WRITE)
    broker.stop()
    broker.start()
    with login(broker, "alice") as alice:
        assert produce(alice, "kept") == 0
    # odradek acls speaks to an unauthenticated listener: there it is User:ANONYMOUS, which
    # may not alter ACLs; a second broker process on the same dirs is not possible (the lock),
    # so check its refusal here and its success in test_cli_against_an_open_listener.
    done = _odradek_acls("list", "--bootstrap-server", broker.bootstrap)
    assert done.returncode == 2 and "closed the connection" in done.stderr


def _odradek_acls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "acls", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_cli_against_an_open_listener(tmp_path: Path) -> None:
    """``odradek acls`` add/list/remove on a PLAINTEXT listener whose anonymous principal is
    a super user (a loopback-only admin listener, say)."""
    broker = BrokerProcess(
        [tmp_path / "logs"],
        overrides=[
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "super.users=User:ANONYMOUS",
        ],
    ).start()
    try:
        common = ["--bootstrap-server", broker.bootstrap, "--topic", "orders"]
        added = _odradek_acls(
            "add", *common, "--consumer", "--group", "billing", "--allow-principal", "User:app"
        )
        assert added.returncode == 0, added.stderr
        listed = _odradek_acls("list", "--bootstrap-server", broker.bootstrap)
        lines = sorted(listed.stdout.splitlines())
        assert "GROUP:LITERAL:billing ALLOW User:app from * READ" in lines
        assert "TOPIC:LITERAL:orders ALLOW User:app from * DESCRIBE" in lines
        assert "TOPIC:LITERAL:orders ALLOW User:app from * READ" in lines
        removed = _odradek_acls(
            "remove", *common, "--operation", "Read", "--allow-principal", "User:app"
        )
        assert removed.returncode == 0, removed.stderr
        left = _odradek_acls("list", "--bootstrap-server", broker.bootstrap, "--topic", "orders")
        assert left.stdout.strip() == "TOPIC:LITERAL:orders ALLOW User:app from * DESCRIBE"
    finally:
        broker.stop()


def test_odradek_acls_with_a_command_config(broker: BrokerProcess, tmp_path: Path) -> None:
    """``--command-config`` with Kafka's client properties: SASL PLAIN as the super user."""
    admin = tmp_path / "admin.properties"
    admin.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{USERS["admin"]}";\n'
    )
    common = ["--bootstrap-server", broker.bootstrap, "--command-config", str(admin)]
    added = _odradek_acls("add", *common, "--allow-principal", "User:carol",
                          "--operation", "Describe", "--group", "carols")  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = _odradek_acls("list", *common, "--group", "carols")
    assert listed.stdout.strip() == "GROUP:LITERAL:carols ALLOW User:carol from * DESCRIBE"
    bob = tmp_path / "bob.properties"
    bob.write_text(admin.read_text().replace("admin", "bob").replace(USERS["admin"], USERS["bob"]))
    refused = _odradek_acls("list", "--bootstrap-server", broker.bootstrap,
                            "--command-config", str(bob))  # fmt: skip
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(admin.read_text().replace(USERS["admin"], "not-it"))
    failed = _odradek_acls("list", "--bootstrap-server", broker.bootstrap,
                           "--command-config", str(wrong))  # fmt: skip
    assert failed.returncode == 2 and "authentication failed" in failed.stderr
    assert "not-it" not in failed.stderr
