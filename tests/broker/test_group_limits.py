"""One group's bad state never stalls another (issue 14, finding 8).

A group id of 20,000 ``é`` is under the 32,767-character limit but 40,000 UTF-8 bytes: it could
not be written as a ``__consumer_offsets`` key, the write raised inside the coordinator's timer
and took the whole batch of group records with it, so an unrelated group's SyncGroup never
returned. Strings are now limited in bytes when a request decodes, and each group record is
written (or fails) on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from odradek.broker.groups.api import GroupApi
from odradek.broker.groups.coordinator import StoreGroup
from odradek.broker.groups.group import GroupState
from odradek.broker.groups.offsets import GroupValue
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode as E
from tests.broker.test_groups_api import FAST, Member, form_generation
from tests.broker.test_groups_coordinator import SESSION_MS, Harness, ok
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

HUGE = "é" * 20_000  # 20,000 characters, 40,000 UTF-8 bytes


@pytest.mark.parametrize(
    "request_",
    [
        m.JoinGroupRequest(correlation_id=0, group_id=HUGE, topics=["t"]),
        m.OffsetCommitRequest(
            correlation_id=0,
            group_id="g",
            topics=[
                m.OffsetCommitTopic(
                    name="t",
                    partitions=[
                        m.OffsetCommitPartition(
                            partition_index=0, committed_offset=1, committed_metadata=HUGE
                        )
                    ],
                )
            ],
        ),
    ],
    ids=["join-group-id", "commit-metadata"],
)
def test_a_string_over_32767_bytes_closes_only_its_connection(
    broker_factory: Callable[..., BrokerProcess], request_: m.Request
) -> None:
    broker = broker_factory(overrides=FAST)
    honest = Member(broker.port, "honest", ["t"])
    try:
        with Wire(broker.port) as setup:  # type: ignore[arg-type]
            setup.create_topic("t", partitions=2)
        honest.get_id()
        since = len(broker.lines)
        with Wire(broker.port) as hostile:  # type: ignore[arg-type]
            hostile.send(request_)
            assert hostile.closed_by_peer(), "the broker kept the connection"
        closing = broker.wait_for_events("closing connection", since_line=since)
        assert closing, "no logged reason"
        assert "40000 UTF-8 bytes" in closing[0]["reason"]
        form_generation(honest)  # the unrelated group's join and sync complete
        assert sorted(honest.assignment["t"]) == [0, 1]
        assert not broker.events("group coordinator timer failed")
    finally:
        honest.close()


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    info = exception = warning


class _Coordinator:
    def __init__(self, outbox: list[StoreGroup]) -> None:
        self.outbox = outbox
        self.stored_codes: dict[str, E] = {}

    def stored(self, group_id: str, generation: int, now_ms: int, code: E = E.NONE) -> None:
        self.stored_codes[group_id] = code


def test_a_group_record_that_cannot_be_written_fails_only_its_group() -> None:
    """The coordinator's batch of group records: one unencodable record (a string over the
    int16 length, as the broker wrote before decode checked bytes) and one good record."""
    api = GroupApi.__new__(GroupApi)
    api.ctx = type("Ctx", (), {"log": _Log()})()  # type: ignore[assignment]
    api.now_ms = lambda: 0  # type: ignore[method-assign]
    appended: list[str] = []

    async def append(group_id: str, records: list[Any]) -> tuple[int, E]:
        await anyio.sleep(0.01)  # a real append waits for its fsync
        appended.append(group_id)
        return 0, E.NONE

    api._append = append  # type: ignore[method-assign]
    bad = StoreGroup("bad", 1, GroupValue(protocol_type="x" * 40_000, generation=1))
    good = StoreGroup("good", 1, GroupValue(protocol_type="consumer", generation=1))
    coordinator = _Coordinator([bad, good])
    api.coordinator = coordinator  # type: ignore[assignment]
    anyio.run(api._store_groups)
    assert coordinator.stored_codes == {"bad": E.COORDINATOR_NOT_AVAILABLE, "good": E.NONE}
    assert appended == ["good"]


def test_offset_delete_answers_a_failed_write_for_the_whole_request() -> None:
    """The tombstones could not be written: COORDINATOR_NOT_AVAILABLE at the top level, which
    clients retry (Kafka's answer), not per partition, which they take as final."""
    from types import SimpleNamespace

    from odradek.broker.groups.api_offsets import OffsetApi

    tombstoned: list[list[tuple[str, int]]] = []

    async def remove_offsets(group_id: str, tps: list[tuple[str, int]]) -> E:
        tombstoned.append(tps)
        return E.COORDINATOR_NOT_AVAILABLE

    groups = SimpleNamespace(
        availability=lambda group_id: E.NONE,
        coordinator=SimpleNamespace(offsets_deletable=lambda group_id: (E.NONE, set())),
        store=SimpleNamespace(committed=lambda group_id: {("t", 0): object()}),
        ctx=SimpleNamespace(manager=SimpleNamespace(partitions=SimpleNamespace(logs={("t", 0)}))),
        remove_offsets=remove_offsets,
    )
    request = m.OffsetDeleteRequest(
        correlation_id=7, group_id="g", topics=[m.OffsetFetchTopic(name="t", partition_indexes=[0])]
    )
    reply = anyio.run(OffsetApi(groups).offset_delete, request)  # type: ignore[arg-type]
    assert (reply.error_code, reply.topics, reply.correlation_id) == (
        E.COORDINATOR_NOT_AVAILABLE,
        [],
        7,
    )
    assert tombstoned == [[("t", 0)]]


def test_a_group_whose_timers_raise_is_reset_and_the_others_still_fire() -> None:
    """A bug in one group's state (simulated: its session expiry raises) used to abort the
    coordinator's whole tick, every second, so the groups after it never rebalanced."""
    h = Harness()
    ok(h.new_member(group="broken"))
    victim = ok(h.new_member(group="victim")).member_id
    h.store_all()
    broken = h.group("broken")
    waiting = h.new_member(group="broken")  # parked until the first member rejoins
    assert not waiting.done

    def explode(member: object) -> None:
        raise RuntimeError("corrupted group state")

    broken.remove = explode  # type: ignore[method-assign]
    h.tick(SESSION_MS)  # both groups' sessions expire in this tick
    assert "broken" not in h.c.groups
    assert [g for g, _ in h.c.broken] == ["broken"]
    assert waiting.done and waiting.result.error_code == E.COORDINATOR_NOT_AVAILABLE
    assert victim not in h.group("victim").members  # the other group's timer fired
    assert h.group("victim").state == GroupState.EMPTY
