"""Consumer groups through the blocking client against real broker processes: partitions split
between members, rebalance callbacks, commits and resuming after consumer and broker restarts,
auto-commit on close, ``auto_offset_reset="none"``, regex subscriptions, admin group calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from odradek.client import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    CommitFailedError,
    Consumer,
    ConsumerRecord,
    NewTopic,
    OffsetAndMetadata,
    OffsetOutOfRangeError,
    Producer,
    TopicPartition,
    UnknownMemberIdError,
)
from tests.broker_process import BrokerProcess

FAST = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=200"]
MEMBER = {
    "heartbeat_interval_ms": 100,
    "session_timeout_ms": 5000,
    "max_poll_interval_ms": 10_000,
    "auto_offset_reset": "earliest",
}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess([tmp_path_factory.mktemp("groups") / "logs"], overrides=FAST) as process:
        yield process


@pytest.fixture
def bootstrap(group_broker: BrokerProcess) -> str:
    return group_broker.bootstrap


def wait_until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        pause.wait(0.02)


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    with Producer(bootstrap) as producer:
        for i in range(per_partition):
            for p in range(partitions):
                producer.send(topic, b"%d-%d" % (p, i), partition=p)


def key(record: ConsumerRecord) -> tuple[int, int]:
    return record.partition, record.offset


class Member:
    """A blocking consumer polled on its own thread (a member must keep polling to rejoin);
    its callbacks keep the current assignment and the history of calls."""

    def __init__(self, bootstrap: str, group: str, *topics: str, **options: Any) -> None:
        self.lock = threading.Lock()
        self.owned: set[TopicPartition] = set()
        self.calls: list[tuple[str, set[TopicPartition]]] = []
        self.records: list[ConsumerRecord] = []
        self.consumer = Consumer(
            *topics,
            bootstrap_servers=bootstrap,
            group_id=group,
            on_assigned=self._assigned,
            on_revoked=self._revoked,
            **{**MEMBER, **options},
        )
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, tps: set[TopicPartition]) -> None:
        with self.lock:
            self.owned |= tps
            self.calls.append(("assigned", tps))

    def _revoked(self, tps: set[TopicPartition]) -> None:
        with self.lock:
            self.owned -= tps
            self.calls.append(("revoked", tps))

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for records in self.consumer.poll(timeout_ms=100).values():
                    with self.lock:
                        self.records += records
        except BaseException as exc:
            self.error = exc
        finally:
            self.consumer.close()

    def current(self) -> set[TopicPartition]:
        with self.lock:
            return set(self.owned)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        assert self.error is None, self.error


def test_two_members_split_then_one_leaves(bootstrap: str) -> None:
    fill(bootstrap, "split", 6, 5)
    everything = {TopicPartition("split", p) for p in range(6)}
    a = Member(bootstrap, "g-split", "split")
    wait_until(lambda: a.current() == everything)
    b = Member(bootstrap, "g-split", "split")
    wait_until(lambda: len(b.current()) == 3 and len(a.current()) == 3)
    assert a.current() | b.current() == everything  # each partition to exactly one member
    assert a.calls[:3] == [("assigned", everything), ("revoked", everything), a.calls[2]]
    b_share = b.current()
    b.stop()  # close() leaves the group: a gets everything back
    wait_until(lambda: a.current() == everything)
    assert a.calls[-2:] == [("revoked", everything - b_share), ("assigned", everything)]
    with Admin(bootstrap) as admin:
        (group,) = admin.describe_groups(["g-split"])
        assert group.state == "Stable" and [m.assignment for m in group.members] == [everything]
    wait_until(lambda: len({key(r) for r in a.records + b.records}) == 30)
    a.stop()


def consume(consumer: Consumer, count: int, commit: bool = True) -> list[ConsumerRecord]:
    """Poll until ``count`` records, committing after each poll (manual commits)."""
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + 30
    while len(out) < count:
        assert time.monotonic() < deadline, f"only {len(out)} of {count} records"
        for records in consumer.poll(timeout_ms=200, max_records=count - len(out)).values():
            out += records
        if commit:
            consumer.commit()
    return out


def test_commit_and_resume_after_a_consumer_restart(bootstrap: str) -> None:
    fill(bootstrap, "resume", 3, 20)
    options = {**MEMBER, "enable_auto_commit": False}
    first = Consumer("resume", bootstrap_servers=bootstrap, group_id="g-resume", **options)
    read = consume(first, 25)
    positions = {tp: first.position(tp) for tp in first.assignment()}
    assert {tp: first.committed(tp) for tp in positions} == positions
    assert sum(positions.values()) == 25
    first.close()
    second = Consumer("resume", bootstrap_servers=bootstrap, group_id="g-resume", **options)
    read += consume(second, 35)
    assert second.poll(timeout_ms=300) == {}
    second.close()
    assert sorted(key(r) for r in read) == [(p, o) for p in range(3) for o in range(20)]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["restart", "kill"])
def test_commits_survive_a_broker_restart(
    broker_factory: Callable[..., BrokerProcess], how: str
) -> None:
    broker = broker_factory(overrides=FAST)
    fill(broker.bootstrap, "t", 2, 30)
    options = {**MEMBER, "enable_auto_commit": False}
    consumer = Consumer("t", bootstrap_servers=broker.bootstrap, group_id="g", **options)
    read = consume(consumer, 30)
    committed = {tp: consumer.committed(tp) for tp in consumer.assignment()}
    if how == "restart":
        broker.restart()
    else:
        broker.kill()
        broker.start()
    with Admin(broker.bootstrap) as admin:
        assert {tp: om.offset for tp, om in admin.list_group_offsets("g").items()} == committed
    read += consume(consumer, 30)  # the same member carries on across the restart
    consumer.close()
    assert sorted(key(r) for r in read) == [(p, o) for p in range(2) for o in range(30)]
    broker.kill()
    broker.start()
    after = Consumer("t", bootstrap_servers=broker.bootstrap, group_id="g", **options)
    assert {after.committed(TopicPartition("t", p)) for p in range(2)} == {30}
    assert after.poll(timeout_ms=500) == {}
    after.close()


def test_auto_commit_on_close_and_leave(bootstrap: str) -> None:
    fill(bootstrap, "auto", 1, 20)
    options = {**MEMBER, "auto_commit_interval_ms": 600_000}  # only close() commits
    consumer = Consumer("auto", bootstrap_servers=bootstrap, group_id="g-auto", **options)
    records = consume(consumer, 12, commit=False)
    assert [r.offset for r in records] == list(range(12))
    with Admin(bootstrap) as admin:
        assert admin.list_group_offsets("g-auto") == {}
        consumer.close()
        assert admin.list_group_offsets("g-auto")[TopicPartition("auto", 0)].offset == 12
        (group,) = admin.describe_groups(["g-auto"])
        assert group.state == "Empty" and group.members == []


def test_iteration_commits_only_what_was_yielded(bootstrap: str) -> None:
    fill(bootstrap, "iter", 1, 20)
    consumer = Consumer(
        "iter", bootstrap_servers=bootstrap, group_id="g-iter", consumer_timeout_ms=5000, **MEMBER
    )
    for record in consumer:  # one poll drains all 20; only 5 are handed out
        if record.offset == 4:
            break
    consumer.close()
    with Admin(bootstrap) as admin:
        assert admin.list_group_offsets("g-iter")[TopicPartition("iter", 0)].offset == 5


def test_auto_offset_reset_none_raises_without_a_commit(bootstrap: str) -> None:
    fill(bootstrap, "none", 1, 3)
    options = {**MEMBER, "auto_offset_reset": "none"}
    consumer = Consumer("none", bootstrap_servers=bootstrap, group_id="g-none", **options)
    with consumer, pytest.raises(OffsetOutOfRangeError):
        consume(consumer, 1, commit=False)
    with Admin(bootstrap) as admin:  # an admin commit on the (now empty) group fixes it
        admin.alter_group_offsets("g-none", {TopicPartition("none", 0): 1})
    with Consumer("none", bootstrap_servers=bootstrap, group_id="g-none", **options) as consumer:
        assert [r.offset for r in consume(consumer, 2, commit=False)] == [1, 2]


def test_regex_subscription_picks_up_a_new_topic(bootstrap: str) -> None:
    fill(bootstrap, "rx-a", 1, 2)
    consumer = Consumer(
        bootstrap_servers=bootstrap, group_id="g-rx", metadata_max_age_ms=200, **MEMBER
    )
    consumer.subscribe(pattern=r"rx-.*")
    assert {r.topic for r in consume(consumer, 2)} == {"rx-a"}
    fill(bootstrap, "rx-b", 2, 1)
    fill(bootstrap, "other", 1, 1)
    assert {r.topic for r in consume(consumer, 2)} == {"rx-b"}
    assert consumer.assignment() == {
        TopicPartition("rx-a", 0),
        TopicPartition("rx-b", 0),
        TopicPartition("rx-b", 1),
    }
    consumer.close()


def test_lag_highwater_and_admin_group_calls(bootstrap: str) -> None:
    fill(bootstrap, "lag", 1, 10)
    tp = TopicPartition("lag", 0)
    consumer = Consumer("lag", bootstrap_servers=bootstrap, group_id="g-lag", **MEMBER)
    consume(consumer, 4)
    assert consumer.highwater(tp) == 10 and consumer.lag() == {tp: 6}
    with Admin(bootstrap) as admin:
        listed = {g.group_id: g for g in admin.list_groups()}
        assert listed["g-lag"].state == "Stable" and listed["g-lag"].protocol_type == "consumer"
        (group,) = admin.describe_groups(["g-lag"])
        assert group.assignor == "range" and group.members[0].assignment == {tp}
        with pytest.raises(UnknownMemberIdError):  # an active group refuses an admin reset
            admin.alter_group_offsets("g-lag", {tp: 0})
        consumer.close()
        admin.alter_group_offsets("g-lag", {tp: OffsetAndMetadata(2, "reset")})
        assert admin.list_group_offsets("g-lag") == {tp: OffsetAndMetadata(2, "reset")}
        admin.delete_groups(["g-lag"])
        assert "g-lag" not in {g.group_id for g in admin.list_groups()}
        assert admin.describe_groups(["g-lag"])[0].state == "Dead"


async def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    with anyio.fail_after(timeout_s):
        while not condition():
            await anyio.sleep(0.02)


class Listener:
    """kafka-python's ConsumerRebalanceListener shape, with coroutine callbacks."""

    def __init__(self) -> None:
        self.owned: set[TopicPartition] = set()

    async def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        self.owned |= tps

    async def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        await anyio.sleep(0)
        self.owned -= tps


@pytest.mark.anyio
async def test_async_members_split_commit_and_leave(bootstrap: str, topic: str) -> None:
    fill(bootstrap, topic, 4, 10)
    everything = {TopicPartition(topic, p) for p in range(4)}
    options = {**MEMBER, "auto_commit_interval_ms": 600_000}
    a_owned: set[TopicPartition] = set()
    a = AsyncConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=topic,
        on_assigned=a_owned.update,
        on_revoked=a_owned.difference_update,
        **options,
    )
    b = AsyncConsumer(bootstrap_servers=bootstrap, group_id=topic, **options)
    listener = Listener()
    b.subscribe([topic], listener=listener)
    read: list[ConsumerRecord] = []
    async with a:
        await wait_for(lambda: a_owned == everything)
        async with b:
            await wait_for(lambda: len(a_owned) == len(listener.owned) == 2)
            assert a_owned | listener.owned == everything
            assert a.assignment() == a_owned and b.assignment() == listener.owned
            while len(read) < 40:
                for consumer in (a, b):
                    batch = await consumer.getmany(timeout_ms=100)
                    read += [r for records in batch.values() for r in records]
            await b.commit()
            for tp in listener.owned:
                assert await b.committed(tp) == await b.position(tp) == 10
            assert b.lag() == dict.fromkeys(listener.owned, 0)
        await wait_for(lambda: a_owned == everything)  # b left on stop()
        assert await a.getmany(timeout_ms=200) == {}  # b's partitions resume at its commits
    assert sorted(key(r) for r in read) == [(p, o) for p in range(4) for o in range(10)]
    async with AsyncAdmin(bootstrap) as admin:  # a committed on stop() (auto-commit)
        offsets = await admin.list_group_offsets(topic)
        assert {tp: om.offset for tp, om in offsets.items()} == dict.fromkeys(everything, 10)
        (group,) = await admin.describe_groups([topic])
        assert group.state == "Empty"


def test_one_to_p_plus_one_members_split_without_overlap_or_gap(bootstrap: str) -> None:
    fill(bootstrap, "grow", 3, 1)
    everything = {TopicPartition("grow", p) for p in range(3)}
    members: list[Member] = []
    # range: chunks of ceil(P / C) per member in member-id order
    for expected in ([3], [1, 2], [1, 1, 1], [0, 1, 1, 1]):
        members.append(Member(bootstrap, "g-grow", "grow"))

        def split(expected: list[int] = expected) -> bool:
            return sorted(len(mb.current()) for mb in members) == expected

        wait_until(split)
        owned = [tp for mb in members for tp in mb.current()]
        assert sorted(owned) == sorted(everything)  # no partition twice, none missing
    for mb in members:
        mb.stop()


def test_cooperative_sticky_moves_only_what_it_must(bootstrap: str) -> None:
    fill(bootstrap, "coop", 4, 1)
    everything = {TopicPartition("coop", p) for p in range(4)}
    options = {"partition_assignment_strategy": ["cooperative-sticky"]}
    a = Member(bootstrap, "g-coop", "coop", **options)
    wait_until(lambda: a.current() == everything)
    b = Member(bootstrap, "g-coop", "coop", **options)
    wait_until(lambda: len(a.current()) == 2 and len(b.current()) == 2)
    assert a.current() | b.current() == everything
    revoked = [tps for kind, tps in a.calls if kind == "revoked"]
    assert revoked == [everything - a.current()]  # a kept its other two all along
    with Admin(bootstrap) as admin:
        assert admin.describe_groups(["g-coop"])[0].assignor == "cooperative-sticky"
    b.stop()
    a.stop()


KILLED_MEMBER = """
import sys
from odradek.client import Consumer
consumer = Consumer(
    sys.argv[2], bootstrap_servers=sys.argv[1], group_id=sys.argv[3], enable_auto_commit=False,
    auto_offset_reset="earliest", session_timeout_ms=1000, heartbeat_interval_ms=100,
)
while True:
    for records in consumer.poll(timeout_ms=200, max_records=3).values():
        for r in records:
            print("record", r.partition, r.offset, flush=True)
        consumer.commit()
        print("committed", flush=True)
"""


@pytest.mark.slow
def test_a_killed_member_is_replaced_from_its_last_commit(
    bootstrap: str, tmp_path: pytest.TempPathFactory
) -> None:
    import signal
    import subprocess
    import sys

    from tests.broker_process import REPO

    fill(bootstrap, "killed", 2, 15)
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_MEMBER, bootstrap, "killed", "g-killed"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    seen: set[tuple[int, int]] = set()

    def read_lines(until_committed: int | None) -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            fields = line.split()
            if fields[:1] == ["record"] and len(fields) == 3 and line.endswith("\n"):
                seen.add((int(fields[1]), int(fields[2])))  # a kill may cut the last line
            elif until_committed is not None and len(seen) >= until_committed:
                return

    read_lines(until_committed=12)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    read_lines(until_committed=None)  # to the end: what it printed before the kill landed
    with Admin(bootstrap) as admin:
        committed = admin.list_group_offsets("g-killed")
    assert sum(om.offset for om in committed.values()) >= 12
    # a new member waits for the dead one's session (1 s) to end, then takes everything
    survivor = Consumer("killed", bootstrap_servers=bootstrap, group_id="g-killed", **MEMBER)
    rest = consume(survivor, 30 - sum(om.offset for om in committed.values()))
    survivor.close()
    for tp, om in committed.items():  # it starts exactly at the last commit
        offsets = [r.offset for r in rest if r.partition == tp.partition]
        assert min(offsets, default=15) == om.offset
    assert sorted(seen | {key(r) for r in rest}) == [(p, o) for p in range(2) for o in range(15)]


def test_a_member_that_stops_polling_is_fenced_then_rejoins(bootstrap: str) -> None:
    fill(bootstrap, "fence", 2, 5)
    options = {**MEMBER, "enable_auto_commit": False, "max_poll_interval_ms": 1000}
    idle = Consumer("fence", bootstrap_servers=bootstrap, group_id="g-fence", **options)
    consume(idle, 10)
    other = Member(bootstrap, "g-fence", "fence", max_poll_interval_ms=1000)
    # idle does not poll, so after max_poll_interval_ms (1 s) it is out of the generation
    # (it left, or the broker's rebalance timeout, 1 s too, removed it first): its commits
    # are refused until it polls again
    wait_until(lambda: len(other.current()) == 2)
    with pytest.raises(CommitFailedError):
        idle.commit({TopicPartition("fence", 0): 1})
    assert idle.committed(TopicPartition("fence", 0)) == 5
    wait_until(lambda: not idle.poll(timeout_ms=50) and len(idle.assignment()) == 1)
    wait_until(lambda: len(other.current()) == 1)
    assert idle.assignment() | other.current() == {TopicPartition("fence", p) for p in (0, 1)}
    other.stop()
    idle.close()


@pytest.mark.anyio
async def test_async_iteration_hands_out_no_record_of_a_revoked_partition(
    bootstrap: str, topic: str
) -> None:
    """``async for``/``getone`` drain records ahead of the application; when a rebalance (in
    the background) revokes their partition, the ones not handed out yet are dropped, not
    handed out by the member that no longer owns them."""
    fill(bootstrap, topic, 2, 50)
    options = {**MEMBER, "auto_commit_interval_ms": 600_000, "max_poll_records": 500}
    a = AsyncConsumer(topic, bootstrap_servers=bootstrap, group_id=topic, **options)
    b = AsyncConsumer(bootstrap_servers=bootstrap, group_id=topic, **options)
    async with a:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        await wait_for(lambda: all(a.highwater(tp) == 50 for tp in tps))  # both buffered
        first = await a.getone()  # the other 99 records are drained for iteration
        assert first.offset == 0
        b.subscribe([topic])
        async with b:
            await wait_for(lambda: len(a.assignment()) == len(b.assignment()) == 1)
            owned = a.assignment()
            got = []
            with anyio.move_on_after(1):
                while True:
                    record = await a.getone()
                    assert TopicPartition(record.topic, record.partition) in owned
                    got.append(record)
            assert got  # what it owns, from the commit made on revoking (1 record was read)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("strategy", "kept"), [("range", False), ("cooperative-sticky", True)], ids=["eager", "coop"]
)
async def test_a_rebalance_keeps_pauses_only_when_it_revokes_nothing_first(
    bootstrap: str, topic: str, strategy: str, kept: bool
) -> None:
    """As Java's consumer: an eager rebalance revokes every partition first, and with them
    their pauses; a cooperative one keeps the pause of a partition the member keeps."""
    fill(bootstrap, topic, 2, 1)
    options = {**MEMBER, "partition_assignment_strategy": [strategy]}
    a = AsyncConsumer(topic, bootstrap_servers=bootstrap, group_id=topic, **options)
    b = AsyncConsumer(topic, bootstrap_servers=bootstrap, group_id=topic, **options)
    async with a:
        await wait_for(lambda: len(a.assignment()) == 2)
        a.pause(*a.assignment())
        async with b:
            await wait_for(lambda: len(a.assignment()) == len(b.assignment()) == 1)
            assert a.paused() == (a.assignment() if kept else set())
