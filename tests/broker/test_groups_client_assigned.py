"""Client-assigned groups (Kafka's classic protocol) in the coordinator alone: a fake clock,
no broker, no I/O. The Harness is the server-side tests' (test_groups_coordinator.py)."""

from __future__ import annotations

import struct

import msgspec
import pytest

from odradek.broker.groups.consumer_protocol import encode_assignment, encode_subscription
from odradek.broker.groups.group import GroupState
from odradek.broker.groups.member import Pending
from odradek.broker.groups.offsets import decode_group_value, encode_group_value
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode as E
from tests.broker.test_groups_coordinator import REBALANCE_MS, SESSION_MS, Harness, ok


def subscription_v3(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    """A Java-style ConsumerProtocol subscription v3 (owned partitions, generation, rack):
    the broker must keep it byte for byte and still read its topics."""
    out = struct.pack(">hi", 3, len(topics))
    out += b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    out += struct.pack(">i", 4) + b"user"  # userData
    out += struct.pack(">i", len(owned))
    for topic, parts in owned.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", 7) + struct.pack(">h", -1)  # generationId, rackId null


def protocols(*names: str, topics: tuple[str, ...] = ("t",)) -> list[m.JoinGroupProtocol]:
    return [
        m.JoinGroupProtocol(name=n, metadata=subscription_v3(list(topics), {}) + n.encode())
        for n in names
    ]


KAFKA = {"protocols": protocols("range", "cooperative-sticky")}


def sync(
    h: Harness,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    **kw: object,
) -> Pending[m.SyncGroupResponse]:
    req = m.SyncGroupRequest(
        correlation_id=0,
        group_id="g",
        generation_id=generation,
        member_id=member_id,
        assignments=[
            m.SyncGroupAssignment(member_id=k, assignment=v) for k, v in (assignments or {}).items()
        ],
        **kw,  # type: ignore[arg-type]
    )
    return h.c.sync(req, h.clock.now_ms)


def form_two(h: Harness) -> tuple[str, str, int]:
    """a forms generation 1 alone, b joins, a rejoins: generation 2 with a as leader, in
    CompletingRebalance (nothing synced)."""
    a = ok(h.new_member(**KAFKA)).member_id
    b_join = h.new_member(**KAFKA)
    assert not b_join.done  # the rebalance waits for a
    ra, rb = ok(h.join(a, **KAFKA)), ok(b_join)
    assert ra.generation_id == rb.generation_id == 2 and ra.leader == a
    return a, rb.member_id, ra.generation_id


def stable_two(h: Harness) -> tuple[str, str, int]:
    a, b, gen = form_two(h)
    sa = sync(h, a, gen, {a: b"A", b: b"B"})
    sb = sync(h, b, gen)
    h.store_all()
    assert sa.result.assignment_bytes == b"A" and sb.result.assignment_bytes == b"B"
    return a, b, gen


def test_leader_sees_members_metadata_and_assigns_followers_wait() -> None:
    h = Harness()
    a = ok(h.new_member(**KAFKA)).member_id
    b_join = h.new_member(**KAFKA)
    ra, rb = ok(h.join(a, **KAFKA)), ok(b_join)  # a's rejoin completed the rebalance
    b = rb.member_id
    assert ra.leader == rb.leader == a and ra.protocol_name == "range"
    assert ra.protocol_type == "consumer"
    meta = KAFKA["protocols"][0].metadata
    assert [(mb.member_id, mb.metadata) for mb in ra.members] == [(a, meta), (b, meta)]
    assert [mb.topics for mb in ra.members] == [["t"], ["t"]]  # decoded from the metadata
    assert rb.members == []  # followers get no member list
    assert h.c.outbox == [] or h.c.outbox[-1].generation < ra.generation_id  # nothing new
    h.store_all()
    gen = ra.generation_id
    sb = sync(h, b, gen)
    h.tick(SESSION_MS - 1)  # the follower waits: no timer answers it with b""
    assert not sb.done
    assignment_a = encode_assignment({"t": [0, 1, 2]})
    assignment_b = encode_assignment({"t": [3, 4, 5]})
    sa = sync(h, a, gen, {a: assignment_a, b: assignment_b})
    assert not sa.done and not sb.done  # until the group record is durable
    (item,) = h.c.outbox
    h.store_all()
    assert sa.result.assignment_bytes == assignment_a
    assert sb.result.assignment_bytes == assignment_b
    assert sb.result.assignment == {"t": [3, 4, 5]}  # the decoded view rides along
    assert sb.result.protocol_type == "consumer" and sb.result.protocol_name == "range"
    assert h.group().state == GroupState.STABLE
    # the record holds the bytes exactly as the clients sent them
    stored = decode_group_value(encode_group_value(item.value))
    assert [(mv.subscription_bytes, mv.assignment_bytes) for mv in stored.members] == [
        (meta, assignment_a),
        (meta, assignment_b),
    ]
    assert stored.protocol == "range" and stored.leader == a
    # a follower syncing again once Stable gets its bytes at once
    again = sync(h, b, gen)
    assert again.done and again.result.assignment_bytes == assignment_b


def test_member_left_out_gets_empty_bytes_and_unknown_ids_are_ignored() -> None:
    h = Harness()
    a, b, gen = form_two(h)
    sb = sync(h, b, gen)
    sa = sync(h, a, gen, {a: b"all", "ghost": b"x"})
    h.store_all()
    assert sa.result.assignment_bytes == b"all"
    assert sb.result.error_code == 0 and sb.result.assignment_bytes == b""
    assert sb.result.assignment == {}
    assert "ghost" not in h.group().members


def test_rebalance_during_sync_answers_waiting_syncs_rebalance_in_progress() -> None:
    h = Harness()
    a, b, gen = form_two(h)
    sb = sync(h, b, gen)
    c_join = h.new_member(**KAFKA)  # a third member: a new rebalance
    assert sb.result.error_code == E.REBALANCE_IN_PROGRESS
    assert h.group().state == GroupState.PREPARING_REBALANCE
    assert sync(h, a, gen, {a: b"x"}).result.error_code == E.REBALANCE_IN_PROGRESS
    ja, jb = h.join(a, **KAFKA), h.join(b, **KAFKA)
    assert ok(ja).generation_id == ok(jb).generation_id == ok(c_join).generation_id == gen + 1
    assert len(ok(ja).members) == 3


def test_a_late_store_of_an_old_generation_is_ignored() -> None:
    h = Harness()
    a, b, gen = form_two(h)
    sb = sync(h, b, gen)
    sync(h, a, gen, {a: b"A", b: b"B"})
    item = h.c.outbox.pop()
    h.new_member(**KAFKA)  # a rebalance before the record is durable
    h.c.stored(item.group_id, item.generation, h.clock.now_ms)
    assert sb.result.error_code == E.REBALANCE_IN_PROGRESS
    assert h.group().state == GroupState.PREPARING_REBALANCE


def test_leader_leaving_mid_sync_makes_the_follower_the_next_leader() -> None:
    h = Harness()
    a, b, gen = form_two(h)
    sb = sync(h, b, gen)
    code, _ = h.c.leave("g", [m.MemberIdentity(member_id=a)], h.clock.now_ms)
    assert code == E.NONE and sb.result.error_code == E.REBALANCE_IN_PROGRESS
    rb = ok(h.join(b, **KAFKA))
    assert rb.leader == b and rb.generation_id == gen + 1
    assert [mb.member_id for mb in rb.members] == [b]
    sync_b = sync(h, b, gen + 1, {b: b"everything"})
    h.store_all()
    assert sync_b.result.assignment_bytes == b"everything"


def test_leader_that_never_syncs_expires_and_followers_are_told_to_rejoin() -> None:
    h = Harness()
    a, b, gen = form_two(h)
    sb = sync(h, b, gen)
    h.tick(SESSION_MS - 1)
    assert not sb.done
    h.tick(1)  # the leader's session, running since the join completed, ends
    assert a not in h.group().members
    assert sb.result.error_code == E.REBALANCE_IN_PROGRESS


def test_session_expiry_in_stable_rebalances() -> None:
    h = Harness()
    a, b, gen = stable_two(h)
    h.tick(SESSION_MS - 1)
    assert h.heartbeat(a, gen) == E.NONE
    h.tick(1)
    assert b not in h.group().members
    assert h.group().state == GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, gen) == E.REBALANCE_IN_PROGRESS


def test_leader_rejoin_in_stable_rebalances_follower_rejoin_does_not() -> None:
    h = Harness()
    a, b, gen = stable_two(h)
    same = ok(h.join(b, **KAFKA))  # a follower with nothing changed: the current generation
    assert same.generation_id == gen and same.members == []
    assert h.group().state == GroupState.STABLE
    ja = h.join(a, **KAFKA)  # Kafka: the leader rejoins to compute a new assignment
    assert not ja.done and h.group().state == GroupState.PREPARING_REBALANCE
    ok(h.join(b, **KAFKA))
    assert ok(ja).generation_id == gen + 1


def test_changed_metadata_rebalances() -> None:
    h = Harness()
    a, b, gen = stable_two(h)
    changed = {"protocols": protocols("range", "cooperative-sticky", topics=("t", "u"))}
    jb = h.join(b, **changed)
    assert not jb.done and h.group().state == GroupState.PREPARING_REBALANCE
    ra = ok(h.join(a, **KAFKA))
    assert ra.generation_id == gen + 1
    assert {mb.member_id: mb.topics for mb in ra.members} == {a: ["t"], b: ["t", "u"]}


def test_protocol_selection_votes_among_common_protocols() -> None:
    h = Harness(delay_ms=3000)  # the three join within the initial delay
    first = h.new_member(protocols=protocols("roundrobin", "range", "x"))
    second = h.new_member(protocols=protocols("x", "range"))
    third = h.new_member(protocols=protocols("x", "roundrobin", "range"))
    h.tick(3000)
    h.tick(3000)  # the delay, extended once for the members that came during it
    # common: range and x; votes: first -> range, second -> x, third -> x
    assert ok(first).protocol_name == ok(second).protocol_name == ok(third).protocol_name == "x"
    leader = next(r for r in (first, second, third) if r.result.members)
    x_meta = protocols("x")[0].metadata
    assert {mb.metadata for mb in leader.result.members} == {x_meta}
    refused = h.join(protocols=protocols("sticky"))
    assert refused.result.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    other_type = h.join(protocol_type="connect", protocols=protocols("x"))
    assert other_type.result.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_any_protocol_type_and_name_is_accepted() -> None:
    h = Harness()
    connect = [m.JoinGroupProtocol(name="sessioned", metadata=b"\x00\x01opaque")]
    a = ok(h.new_member(protocol_type="connect", protocols=connect))
    assert (a.protocol_type, a.protocol_name) == ("connect", "sessioned")
    assert a.members[0].metadata == b"\x00\x01opaque" and a.members[0].topics == []
    s = sync(h, a.member_id, a.generation_id, {a.member_id: b"\xffnot consumer bytes"})
    h.store_all()
    assert s.result.assignment_bytes == b"\xffnot consumer bytes" and s.result.assignment == {}


def test_sync_v5_protocol_type_and_name_are_checked() -> None:
    h = Harness()
    _, b, gen = stable_two(h)
    bad_type = sync(h, b, gen, protocol_type="connect")
    bad_name = sync(h, b, gen, protocol_name="roundrobin")
    good = sync(h, b, gen, protocol_type="consumer", protocol_name="range")
    assert bad_type.result.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert bad_name.result.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert good.result.error_code == 0 and good.result.assignment_bytes == b"B"


def test_old_join_versions_are_admitted_without_member_id_required() -> None:
    h = Harness()
    joined = ok(h.join(require_known_member_id=False, **KAFKA))
    assert joined.member_id == "c-1" and joined.leader == "c-1" and joined.generation_id == 1
    assert h.group().pending == {}


@pytest.mark.parametrize("first_kind", ["kafka", "native"])
def test_members_of_the_other_kind_are_refused(first_kind: str) -> None:
    h = Harness()
    kafka, native = KAFKA, {"assignors": ["range"]}
    first, other = (kafka, native) if first_kind == "kafka" else (native, kafka)
    a = ok(h.new_member(**first)).member_id
    assert h.join(**other).result.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    h.c.leave("g", [m.MemberIdentity(member_id=a)], h.clock.now_ms)
    assert h.group().state == GroupState.EMPTY
    ok(h.new_member(**other))  # an Empty group takes either kind


def test_static_member_restart_keeps_its_bytes_without_rebalance() -> None:
    h = Harness()
    static = {"group_instance_id": "i-a", **KAFKA}
    a = ok(h.join(**static)).member_id  # static: admitted at once
    b_join = h.new_member(**KAFKA)
    a_join = h.join(a, **static)
    b = ok(b_join).member_id
    gen = ok(a_join).generation_id
    assert a_join.result.leader == a and gen == 2
    sync(h, a, gen, {a: b"A", b: b"B"})
    h.store_all()
    again = ok(h.join(**static))  # the static leader restarted: same protocols and metadata
    assert again.member_id != a and again.generation_id == gen
    assert again.leader == a and again.members == []  # the old id: it must not assign
    assert h.group().state == GroupState.STABLE and h.group().leader == again.member_id
    item = h.c.outbox[-1]  # the record learns the new id
    assert {mv.member_id for mv in item.value.members} == {again.member_id, b}
    h.store_all()
    s = sync(h, again.member_id, gen)
    assert s.result.assignment_bytes == b"A"
    assert h.heartbeat(a, gen) == E.UNKNOWN_MEMBER_ID
    fenced = sync(h, a, gen, group_instance_id="i-a")
    assert fenced.result.error_code == E.FENCED_INSTANCE_ID


def test_commit_validation_is_the_same_as_for_server_assigned_groups() -> None:
    h = Harness()
    a, b, gen = form_two(h)
    now = h.clock.now_ms
    assert h.c.validate_commit("g", gen, a, None, now) == E.REBALANCE_IN_PROGRESS
    sync(h, a, gen, {a: b"A", b: b"B"})
    h.store_all()
    assert h.c.validate_commit("g", gen, b, None, now) == E.NONE
    assert h.c.validate_commit("g", gen - 1, b, None, now) == E.ILLEGAL_GENERATION
    assert h.c.validate_commit("g", gen, "ghost", None, now) == E.UNKNOWN_MEMBER_ID
    assert h.c.validate_commit("g", -1, "", None, now) == E.UNKNOWN_MEMBER_ID


def test_partitions_added_rebalance_a_client_assigned_consumer_group() -> None:
    h = Harness()
    _, b, gen = stable_two(h)
    h.c.topics_changed(["t"], h.clock.now_ms)
    assert h.group().state == GroupState.STABLE
    h.partitions["t"] = 8
    h.c.topics_changed(["t"], h.clock.now_ms)
    assert h.group().state == GroupState.PREPARING_REBALANCE
    assert h.heartbeat(b, gen) == E.REBALANCE_IN_PROGRESS


def replayed(h: Harness) -> Harness:
    """A second coordinator fed the last stored group record, as a restart replays it."""
    records = [item for item in h.c.outbox]
    h.store_all()
    assert records, "nothing was stored"
    value = decode_group_value(encode_group_value(records[-1].value))
    fresh = Harness()
    fresh.c.load({"g": value}, [], fresh.clock.now_ms)
    return fresh


def test_restart_replays_a_stable_group_with_its_bytes() -> None:
    h = Harness()
    a, b, gen = form_two(h)
    assignment_a = encode_assignment({"t": [0, 1, 2]})
    sync(h, a, gen, {a: assignment_a, b: encode_assignment({"t": [3, 4, 5]})})
    r = replayed(h)
    group = r.group()
    assert group.state == GroupState.STABLE and group.generation == gen
    assert (group.protocol, group.leader) == ("range", a)
    described = group.describe()
    meta = KAFKA["protocols"][0].metadata
    assert [(mb.member_id, mb.metadata, mb.assignment_bytes) for mb in described.members] == [
        (a, meta, assignment_a),
        (b, meta, encode_assignment({"t": [3, 4, 5]})),
    ]
    assert [mb.assignment for mb in described.members] == [{"t": [0, 1, 2]}, {"t": [3, 4, 5]}]
    assert r.heartbeat(b, gen) == E.NONE  # members carry on in their generation
    s = sync(r, b, gen)
    assert s.result.assignment_bytes == encode_assignment({"t": [3, 4, 5]})
    # the replayed record is written back byte for byte by the next store
    assert encode_group_value(group.to_value()) == encode_group_value(
        decode_group_value(encode_group_value(group.to_value()))
    )
    # the members rejoin (Kafka's leader does, to reassign): a new generation of the same kind
    ja, jb = r.join(a, **KAFKA), r.join(b, **KAFKA)
    assert ok(ja).generation_id == ok(jb).generation_id == gen + 1
    assert r.join(assignors=["range"]).result.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_restart_replays_a_group_of_an_unknown_protocol() -> None:
    h = Harness()
    connect = [m.JoinGroupProtocol(name="sessioned", metadata=b"opaque")]
    a = ok(h.new_member(protocol_type="connect", protocols=connect))
    sync(h, a.member_id, a.generation_id, {a.member_id: b"work"})
    r = replayed(h)
    group = r.group()
    assert group.state == GroupState.STABLE and group.protocol == "sessioned"
    (member,) = group.describe().members
    assert (member.metadata, member.assignment_bytes) == (b"opaque", b"work")
    # only a client-assigned member can rejoin it: the protocol is no assignor of ours
    native = r.join(protocol_type="connect", assignors=["range"])
    assert native.result.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_describe_gives_server_assigned_groups_consumer_protocol_bytes() -> None:
    h = Harness()
    a = ok(h.new_member()).member_id
    h.sync(a, 1)
    h.store_all()
    (member,) = h.group().describe().members
    assert member.metadata == encode_subscription(("t",))
    assert member.assignment_bytes == encode_assignment({"t": [0, 1, 2, 3, 4, 5]})
    sync_again = h.sync(a, 1)
    assert sync_again.result.assignment_bytes == b""  # server-assigned: the dict only


def test_rebalance_timeout_removes_a_member_that_does_not_rejoin() -> None:
    h = Harness()
    a, b, gen = stable_two(h)
    ja = h.join(a, **KAFKA)  # the leader rejoins; b keeps heartbeating but never rejoins
    for _ in range(REBALANCE_MS // 5000):
        h.heartbeat(b, gen)
        h.tick(5000)
    h.tick(1)
    assert ok(ja).generation_id == gen + 1 and list(h.group().members) == [a]


def test_old_frames_decode_with_the_new_fields_defaulted() -> None:
    """A peer that predates the fields sends shorter arrays: they decode with the defaults."""
    for msg, new_fields in (
        (m.JoinGroupRequest(correlation_id=1, group_id="g"), 2),
        (m.JoinGroupMember(member_id="x"), 1),
        (m.SyncGroupRequest(correlation_id=1, group_id="g", generation_id=1, member_id="x"), 3),
        (m.SyncGroupResponse(correlation_id=1), 2),
        (m.DescribedGroupMember(member_id="x"), 2),
    ):
        fields = msgspec.msgpack.decode(msgspec.msgpack.encode(msg))
        old = msgspec.msgpack.encode(fields[:-new_fields])
        assert msgspec.msgpack.decode(old, type=type(msg)) == msg


def test_a_record_the_broker_wrote_replays_open_to_native_members() -> None:
    h = Harness()
    a = ok(h.new_member()).member_id  # server-assigned
    h.sync(a, 1)
    r = replayed(h)
    assert r.group().members[a].client_assigned is None  # either kind may rejoin
    assert r.sync(a, 1).result.assignment == {"t": [0, 1, 2, 3, 4, 5]}
    assert ok(r.join(a)).generation_id == 2  # the native member rejoins (assignors differ)
    assert r.group().members[a].client_assigned is False
