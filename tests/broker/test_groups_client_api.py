"""Client-assigned groups (the fields the Kafka listener fills) through a real broker process,
over the native wire (tests/broker/wire.py): the leader's assignment reaches the follower, the
group record survives SIGKILL with its bytes, and ``odradek groups describe`` shows members and
lag decoded from the consumer-protocol bytes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from odradek.broker.groups.consumer_protocol import encode_assignment, encode_subscription
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode as E
from tests.broker.test_groups_api import FAST, commit, describe, poll
from tests.broker.wire import Wire, batch
from tests.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
METADATA = encode_subscription(["t"]) + b"-v0"  # trailing bytes: kept as the client sent them
PROTOCOLS = [m.JoinGroupProtocol(name="range", metadata=METADATA)]


class KafkaMember:
    """A member as the Kafka listener would present a Kafka client: protocols, bytes."""

    def __init__(self, port: int) -> None:
        self.wire = Wire(port)
        self.member_id = ""
        self.generation = -1

    def join_request(self, **kw: object) -> m.JoinGroupRequest:
        return m.JoinGroupRequest(
            correlation_id=0,
            group_id="g",
            member_id=self.member_id,
            client_id="rdkafka",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            protocols=PROTOCOLS,
            **kw,  # type: ignore[arg-type]
        )

    def finish_join(self) -> m.JoinGroupResponse:
        reply, _ = self.wire.recv()
        assert reply.error_code == 0, E(reply.error_code).name
        self.member_id, self.generation = reply.member_id, reply.generation_id
        return reply

    def sync_request(self, assignments: dict[str, bytes] | None = None) -> m.SyncGroupRequest:
        return m.SyncGroupRequest(
            correlation_id=0,
            group_id="g",
            generation_id=self.generation,
            member_id=self.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                m.SyncGroupAssignment(member_id=k, assignment=v)
                for k, v in (assignments or {}).items()
            ],
        )

    def heartbeat(self) -> E:
        reply = self.wire.call(
            m.HeartbeatRequest(
                correlation_id=0,
                group_id="g",
                generation_id=self.generation,
                member_id=self.member_id,
            )
        )
        return E(reply.error_code)


def test_leader_assignment_reaches_the_follower_and_survives_sigkill(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=FAST)
    admin = Wire(broker.port)
    admin.create_topic("t", 4)
    admin.produce("t", 2, batch(3))
    a, b = KafkaMember(broker.port), KafkaMember(broker.port)
    # a: a JoinGroup v0-v3 client, admitted without MEMBER_ID_REQUIRED; alone in generation 1
    a.wire.send(a.join_request(require_known_member_id=False))
    assert a.finish_join().leader == a.member_id
    a.wire.call(a.sync_request({a.member_id: encode_assignment({"t": [0, 1, 2, 3]})}))
    # b: KIP-394, then its join waits for a to rejoin
    first = b.wire.call(b.join_request())
    assert first.error_code == E.MEMBER_ID_REQUIRED
    b.member_id = first.member_id
    b.wire.send(b.join_request())
    poll(lambda: a.heartbeat() == E.REBALANCE_IN_PROGRESS)  # b's join, on its own socket
    a.wire.send(a.join_request())
    leader, follower = a.finish_join(), b.finish_join()
    assert leader.generation_id == follower.generation_id == 2
    assert [(mb.member_id, mb.metadata) for mb in leader.members] == [
        (a.member_id, METADATA),
        (b.member_id, METADATA),
    ]
    assert follower.members == []
    b.wire.send(b.sync_request())  # the follower's sync waits for the leader's
    mine, theirs = encode_assignment({"t": [0, 1]}), encode_assignment({"t": [2, 3]})
    reply_a = a.wire.call(a.sync_request({a.member_id: mine, b.member_id: theirs}))
    reply_b, _ = b.wire.recv()
    assert (reply_a.error_code, reply_b.error_code) == (0, 0)
    assert (reply_a.assignment_bytes, reply_b.assignment_bytes) == (mine, theirs)
    assert reply_b.protocol_type == "consumer" and reply_b.protocol_name == "range"
    assert commit(b.wire, "g", {("t", 2): 3}, b.generation, b.member_id) == E.NONE

    def check_described() -> None:
        group = describe(admin, "g")
        assert (group.group_state, group.protocol_type, group.protocol_data) == (
            "Stable",
            "consumer",
            "range",
        )
        assert [
            (mb.member_id, mb.client_id, mb.metadata, mb.assignment_bytes, mb.assignment)
            for mb in group.members
        ] == [
            (a.member_id, "rdkafka", METADATA, mine, {"t": [0, 1]}),
            (b.member_id, "rdkafka", METADATA, theirs, {"t": [2, 3]}),
        ]

    check_described()
    broker.kill()
    broker.start()
    admin = Wire(broker.port)
    check_described()  # replayed from __consumer_offsets, bytes unchanged
    b.wire = Wire(broker.port)
    assert b.heartbeat() == E.NONE  # the member carries on in its generation
    again = b.wire.call(b.sync_request())
    assert again.error_code == 0 and again.assignment_bytes == theirs
    # the odradek command decodes the consumer-protocol bytes: members and lag
    members = odradek(broker, "groups", "describe", "g", "--members")
    assert f"g {b.member_id} /127.0.0.1 rdkafka 2 t:2,t:3" in " ".join(members.split())
    lag = [line.split() for line in odradek(broker, "groups", "describe", "g").splitlines()]
    assert ["g", "t", "2", "3", "3", "0", b.member_id, "/127.0.0.1", "rdkafka"] in lag
    # a native (server-assigned) member cannot join the Kafka clients' group
    native = admin.call(
        m.JoinGroupRequest(correlation_id=0, group_id="g", topics=["t"], assignors=["range"])
    )
    assert native.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def odradek(broker: BrokerProcess, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", *args, "--bootstrap-server", broker.bootstrap],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    return done.stdout
