"""Consumer groups: commit throughput and latency, and rebalance time when members join and leave.

One broker process (``group.initial.rebalance.delay.ms=0``); everything else in this process.

1. Commits, raw protocol. A member of a one-member generation commits one partition per
   OffsetCommit (one record in ``__consumer_offsets``, fsynced before the answer). Baseline: a
   Produce ``acks=all`` carrying the same record (same key and value bytes, built with the
   broker's encoders) to a one-partition topic on the same broker: both cost one write and one
   fsync. One request at a time (requests/s, and round-trip p50/p99), and ``window`` in flight
   (the fsync is shared by whatever arrived meanwhile).
2. ``Consumer.commit(offsets)``, the public blocking client (a member of its own group),
   latency p50/p99 against the Produce ``acks=all`` round trip of the same record.
3. Rebalances, raw protocol, a group of N members in this process (one socket each, as
   ``tests.broker.test_groups_api.Member``): *form* — N members holding ids join and sync a
   first generation; *join* — one more member joins (from its first JoinGroup, including the
   member-id round trip) until all N+1 have synced; *leave* — one member sends LeaveGroup until
   the N others have synced. The existing members learn of a rebalance from a Heartbeat answer
   (REBALANCE_IN_PROGRESS), sent back to back as if the heartbeat interval were 0: the figure is
   the coordinator's time, not detection. Baseline: one *heartbeat round* of the same N members
   (all send a Heartbeat, then all read the answer) — a rebalance needs at least three such
   rounds (Heartbeat, JoinGroup, SyncGroup) plus one fsync of the group record, so a ratio near
   3 means the coordinator adds little beyond the protocol's round trips.
4. Rebalances, public client: real ``Consumer``s polled on threads
   (``tests.client.test_groups.Member``, ``heartbeat_interval_ms`` 100): a second member joins
   until both own half the partitions; it closes (commit + LeaveGroup) until the first owns all
   of them again. Baseline: the configured heartbeat interval (members notice a rebalance on
   their next heartbeat, then rejoin from ``poll``). Observed by polling every 20 ms.

Repeats of a figure and its baseline are interleaved, after one untimed warm-up round; medians.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Figure, Figures, median, percentile
from odradek.broker.groups.offsets import (
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
)
from odradek.client import Consumer, TopicPartition
from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.errors import ErrorCode as E
from tests.broker.test_groups_api import FAST, Member, assert_split, form_generation
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "consumer groups: commit throughput and latency, rebalance on join and leave"

Say = Callable[[str], None]

_TOPIC = "t"  # committed (16 partitions)
_SINK = "sink"  # the Produce baseline (1 partition)
_GROUP_TOPIC = "g"  # subscribed by the rebalancing groups
_HEARTBEAT_MS = 100  # the client-level members' heartbeat interval


@dataclass(frozen=True)
class Params:
    commits: int = 1_000  # one-at-a-time requests per round (and as many Produce requests)
    pipelined: int = 10_000  # requests per round with `window` in flight
    window: int = 64
    client_commits: int = 1_000  # Consumer.commit() calls per round
    commit_repeats: int = 5
    group_sizes: str = "2,10,30"
    rebalances: int = 10  # repeats per group size
    group_partitions: int = 64
    client_rebalances: int = 5  # 0: skip the client-level figures

    @classmethod
    def quick(cls) -> Params:
        return cls(
            commits=200,
            pipelined=2_000,
            client_commits=200,
            commit_repeats=2,
            rebalances=3,
            client_rebalances=2,
        )


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    figures = Figures()
    with BrokerProcess([scratch / "logs"], overrides=FAST) as broker:
        assert broker.port is not None
        with Wire(broker.port) as admin:
            admin.create_topic(_TOPIC, 16)
            admin.create_topic(_SINK, 1)
            admin.create_topic(_GROUP_TOPIC, params.group_partitions)
        say("commits: raw OffsetCommit against Produce acks=all, and Consumer.commit()")
        _commits(broker, params, figures)
        sizes = [int(n) for n in params.group_sizes.split(",") if n.strip()]
        say(f"rebalances, raw protocol, groups of {sizes}")
        _rebalances(broker.port, sizes, params, figures)
        if params.client_rebalances > 0:
            say("rebalances, public Consumer")
            _client_rebalances(broker.bootstrap, params.client_rebalances, figures)
    return figures.items


# -- commits --------------------------------------------------------------------------------


def _commits(broker: BrokerProcess, params: Params, figures: Figures) -> None:
    assert broker.port is not None
    member = Member(broker.port, "commits", [_TOPIC], session_timeout_ms=120_000)
    member.get_id()
    form_generation(member)
    record = (
        encode_offset_key(OffsetKey("commits", _TOPIC, 0)),
        encode_offset_value(
            OffsetValue(offset=1 << 20, commit_timestamp_ms=int(time.time() * 1e3))
        ),
    )
    sink = Wire(broker.port)
    produce = sink.produce_request([(_SINK, 0, encode_batch([record]))], acks=m.ACKS_ALL)

    def commit_request(i: int) -> m.OffsetCommitRequest:
        part = m.OffsetCommitPartition(partition_index=i % 16, committed_offset=i)
        return m.OffsetCommitRequest(
            correlation_id=0,
            group_id=member.group,
            generation_id=member.generation,
            member_id=member.member_id,
            topics=[m.OffsetCommitTopic(name=_TOPIC, partitions=[part])],
        )

    consumer = Consumer(
        _TOPIC,
        bootstrap_servers=broker.bootstrap,
        group_id="client-commits",
        enable_auto_commit=False,
        session_timeout_ms=120_000,
    )
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the client never got its partitions"
            consumer.poll(timeout_ms=100)

        rtt: dict[str, list[float]] = {"produce": [], "commit": [], "client": []}
        rate: dict[str, list[float]] = {
            k: [] for k in ("produce", "commit", "produce_w", "commit_w")
        }
        commit_wire = member.wire
        for round_ in range(1 + params.commit_repeats):
            member.heartbeat()
            produce_s = [
                _timed(lambda: _check(sink.call(produce[0], produce[1]), _ok))
                for _ in range(params.commits)
            ]
            commit_s = [
                _timed(lambda i=i: _check(commit_wire.call(commit_request(i)), _ok))
                for i in range(params.commits)
            ]
            produce_w = _pipelined(sink, lambda _: produce, _ok, params.pipelined, params.window)
            commit_w = _pipelined(
                commit_wire,
                lambda i: (commit_request(i), b""),
                _ok,
                params.pipelined,
                params.window,
            )
            client_s = [
                _timed(lambda i=i: consumer.commit({TopicPartition(_TOPIC, i % 16): i}))
                for i in range(params.client_commits)
            ]
            consumer.poll(timeout_ms=0)
            if round_ == 0:
                continue  # warm-up
            rtt["produce"] += produce_s
            rtt["commit"] += commit_s
            rtt["client"] += client_s
            rate["produce"].append(len(produce_s) / sum(produce_s))
            rate["commit"].append(len(commit_s) / sum(commit_s))
            rate["produce_w"].append(produce_w)
            rate["commit_w"].append(commit_w)
    finally:
        consumer.close()
        member.leave()
        member.close()
        sink.close()

    add = figures.add
    size = f"{len(record[0]) + len(record[1])} B record"
    add("Produce acks=all, one at a time", median(rate["produce"]), "requests/s",
        samples=rate["produce"], is_baseline=True,
        note=f"the commit's {size}, fsync each")  # fmt: skip
    add("OffsetCommit, one at a time", median(rate["commit"]), "commits/s",
        baseline="Produce acks=all, one at a time", samples=rate["commit"],
        note="1 partition per commit, raw protocol")  # fmt: skip
    add(f"Produce acks=all, {params.window} in flight", median(rate["produce_w"]), "requests/s",
        samples=rate["produce_w"], is_baseline=True)  # fmt: skip
    add(f"OffsetCommit, {params.window} in flight", median(rate["commit_w"]), "commits/s",
        baseline=f"Produce acks=all, {params.window} in flight",
        samples=rate["commit_w"])  # fmt: skip
    for p in (50, 99):
        base = f"Produce acks=all round trip, p{p}"
        add(base, percentile(rtt["produce"], p) * 1e3, "ms", is_baseline=True)
        add(f"OffsetCommit round trip, p{p}", percentile(rtt["commit"], p) * 1e3, "ms",
            baseline=base, note="raw protocol")  # fmt: skip
        add(f"Consumer.commit(), p{p}", percentile(rtt["client"], p) * 1e3, "ms",
            baseline=base, note=f"{len(rtt['client']):,} calls, public client")  # fmt: skip


def _timed(action: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def _check(reply: object, ok: Callable[[Any], bool]) -> None:
    assert ok(reply), reply


def _ok(reply: m.ProduceResponse | m.OffsetCommitResponse) -> bool:
    """The one partition of a Produce or OffsetCommit answer succeeded."""
    return reply.topics[0].partitions[0].error_code == 0


def _pipelined(
    wire: Wire,
    request: Callable[[int], tuple[m.Request, Any]],
    ok: Callable[[Any], bool],
    count: int,
    window: int,
) -> float:
    """Requests/s with ``window`` requests in flight on one connection (answers in order)."""
    t0 = time.perf_counter()
    sent = 0
    for _ in range(min(window, count)):
        wire.send(*request(sent))
        sent += 1
    for _ in range(count):
        reply, _ = wire.recv()
        assert ok(reply), reply
        if sent < count:
            wire.send(*request(sent))
            sent += 1
    return count / (time.perf_counter() - t0)


# -- rebalances, raw protocol -----------------------------------------------------------------


def _rebalances(port: int, sizes: list[int], params: Params, figures: Figures) -> None:
    samples = {(n, what): [] for n in sizes for what in ("heartbeat", "form", "join", "leave")}
    for round_ in range(1 + params.rebalances):
        for n in sizes:
            timings = _rebalance_once(port, f"rb{n}-{round_}", n, params.group_partitions)
            if round_ > 0:  # round 0 warms up
                for what, seconds in timings.items():
                    samples[(n, what)].append(seconds * 1e3)
    add = figures.add
    for n in sizes:
        heartbeat = f"heartbeat round, {n} members"
        add(heartbeat, median(samples[(n, "heartbeat")]), "ms", is_baseline=True,
            samples=samples[(n, "heartbeat")], note="all send, then all read")  # fmt: skip
        add(f"form a generation, {n} members", median(samples[(n, "form")]), "ms",
            baseline=heartbeat, samples=samples[(n, "form")],
            note="join + sync, ids already held")  # fmt: skip
        add(f"one joins, {n} -> {n + 1} members", median(samples[(n, "join")]), "ms",
            baseline=heartbeat, samples=samples[(n, "join")],
            note="id round trip, heartbeat, rejoin, sync")  # fmt: skip
        add(f"one leaves, {n + 1} -> {n} members", median(samples[(n, "leave")]), "ms",
            baseline=heartbeat, samples=samples[(n, "leave")],
            note="LeaveGroup, heartbeat, rejoin, sync")  # fmt: skip


def _rebalance_once(port: int, group: str, n: int, partitions: int) -> dict[str, float]:
    """Seconds to form a generation of ``n``, for one more to join, for one to leave; and the
    median heartbeat round of the ``n`` (the baseline)."""
    members = [Member(port, group, [_GROUP_TOPIC]) for _ in range(n)]
    newcomer = Member(port, group, [_GROUP_TOPIC])
    everyone = [*members, newcomer]
    try:
        for member in members:
            member.get_id()
        timings = {"form": _timed(lambda: form_generation(*members))}
        assert_split(members, _GROUP_TOPIC, partitions)
        rounds = [_timed(lambda: _heartbeat_round(members, E.NONE)) for _ in range(5)]
        timings["heartbeat"] = median(rounds)

        t0 = time.perf_counter()
        newcomer.get_id()
        newcomer.send_join()
        _until_told_to_rejoin(members)
        form_generation(*members)
        newcomer.finish_join()
        newcomer.sync()
        timings["join"] = time.perf_counter() - t0
        assert newcomer.generation == members[0].generation
        assert_split(everyone, _GROUP_TOPIC, partitions)

        leaver, rest = everyone[0], everyone[1:]
        t0 = time.perf_counter()
        assert leaver.leave() == E.NONE
        _until_told_to_rejoin(rest)
        form_generation(*rest)
        timings["leave"] = time.perf_counter() - t0
        assert_split(rest, _GROUP_TOPIC, partitions)
        for member in rest:
            member.leave()
        return timings
    finally:
        for member in everyone:
            member.close()


def _heartbeat_round(members: list[Member], expect: E | None = None) -> list[E]:
    """Every member sends a Heartbeat, then every member reads its answer."""
    for member in members:
        member.wire.send(
            m.HeartbeatRequest(
                correlation_id=0,
                group_id=member.group,
                generation_id=member.generation,
                member_id=member.member_id,
            )
        )
    codes = [E(member.wire.recv()[0].error_code) for member in members]
    assert expect is None or set(codes) == {expect}, codes
    return codes


def _until_told_to_rejoin(members: list[Member]) -> None:
    """Heartbeat back to back until every member has been answered REBALANCE_IN_PROGRESS."""
    waiting = members
    while waiting:
        codes = _heartbeat_round(waiting)
        assert set(codes) <= {E.NONE, E.REBALANCE_IN_PROGRESS}, codes
        waiting = [
            mb for mb, code in zip(waiting, codes, strict=True) if code != E.REBALANCE_IN_PROGRESS
        ]


# -- rebalances, public client ----------------------------------------------------------------


def _client_rebalances(bootstrap: str, repeats: int, figures: Figures) -> None:
    from tests.client.test_groups import fill

    topic = "cg"
    fill(bootstrap, topic, 8, 0)
    everything = {TopicPartition(topic, p) for p in range(8)}
    joins, leaves = [], []
    for round_ in range(1 + repeats):
        joined, left = _client_round(bootstrap, f"cg-{round_}", topic, everything)
        if round_ > 0:  # round 0 warms up
            joins.append(joined * 1e3)
            leaves.append(left * 1e3)
    add = figures.add
    interval = "heartbeat interval"
    add(interval, _HEARTBEAT_MS, "ms", is_baseline=True, note="configured, not measured")
    add("Consumer joins a 1-member group", median(joins), "ms", baseline=interval,
        samples=joins, note="until both own 4 of 8 partitions")  # fmt: skip
    add("Consumer closes, 2-member group", median(leaves), "ms", baseline=interval,
        samples=leaves, note="close() until the other owns all 8")  # fmt: skip


def _client_round(
    bootstrap: str, group: str, topic: str, everything: set[TopicPartition]
) -> tuple[float, float]:
    """Seconds for a second Consumer to join (both own half), then to close (one owns all)."""
    from tests.client.test_groups import Member as ClientMember
    from tests.client.test_groups import wait_until

    first = ClientMember(bootstrap, group, topic, heartbeat_interval_ms=_HEARTBEAT_MS)
    try:
        wait_until(lambda: first.current() == everything)
        t0 = time.perf_counter()
        second = ClientMember(bootstrap, group, topic, heartbeat_interval_ms=_HEARTBEAT_MS)
        half = len(everything) // 2
        wait_until(lambda: len(first.current()) == half and len(second.current()) == half)
        joined = time.perf_counter() - t0
        t0 = time.perf_counter()
        second.stop()  # close(): commit, LeaveGroup
        wait_until(lambda: first.current() == everything)
        return joined, time.perf_counter() - t0
    finally:
        first.stop()
