"""Offset retention through the real GroupApi, in process: real logs in a temp dir, a fake clock.

(A broker process would need ``offsets.retention.minutes`` of real time; here the clock moves.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from odradek.broker.config import load_config
from odradek.broker.context import BrokerContext
from odradek.broker.groups.api import GroupApi
from odradek.broker.groups.group import GroupState
from odradek.broker.logs import get_logger
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode as E
from odradek.storage.manager import LogManager

RETENTION_MS = 60_000  # offsets.retention.minutes=1


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        pytest.param(("trio", {}), id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return request.param


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
async def groups(tmp_path: Path) -> AsyncIterator[tuple[GroupApi, Clock]]:
    config = load_config(
        overrides=[
            f"log.dirs={tmp_path / 'logs'}",
            "offsets.retention.minutes=1",
            "offsets.topic.num.partitions=3",
            "group.initial.rebalance.delay.ms=0",
        ]
    )
    clock = Clock()
    manager = LogManager(config.log_dirs, config.log_config(), node_id=1, clock_ms=clock)
    manager.startup()
    manager.create_topic("t", 2)
    ctx = BrokerContext(config, manager, get_logger("test"))
    api = GroupApi(ctx)
    await api.load()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ctx.group_commit.run)
        yield api, clock
        tg.cancel_scope.cancel()
    manager.shutdown()


async def commit(
    api: GroupApi, group: str, offset: int, generation: int = -1, member: str = ""
) -> E:
    reply = await api.offsets.offset_commit(
        m.OffsetCommitRequest(
            correlation_id=0,
            group_id=group,
            generation_id=generation,
            member_id=member,
            topics=[
                m.OffsetCommitTopic(
                    name="t",
                    partitions=[
                        m.OffsetCommitPartition(partition_index=0, committed_offset=offset)
                    ],
                )
            ],
        )
    )
    return E(reply.topics[0].partitions[0].error_code)


@pytest.mark.anyio
async def test_simple_group_offsets_expire_by_commit_time(
    groups: tuple[GroupApi, Clock],
) -> None:
    api, clock = groups
    assert await commit(api, "simple", 5) == E.NONE
    clock.now_ms += RETENTION_MS - 1
    await api.expire_offsets(clock.now_ms)
    assert api.store.committed("simple")
    clock.now_ms += 1
    await api.expire_offsets(clock.now_ms)
    assert not api.store.committed("simple")
    assert "simple" not in api.coordinator.groups  # Empty and without offsets: deleted
    # the tombstones are on disk: a replay finds nothing
    reloaded = GroupApi(api.ctx)
    await reloaded.load()
    assert not reloaded.store.committed("simple")


@pytest.mark.anyio
async def test_consumer_group_offsets_expire_only_once_empty(
    groups: tuple[GroupApi, Clock],
) -> None:
    api, clock = groups
    coordinator = api.coordinator
    join = m.JoinGroupRequest(correlation_id=0, group_id="g", topics=["t"])
    member_id = coordinator.join(join, "", clock.now_ms).result.member_id
    join = m.JoinGroupRequest(correlation_id=0, group_id="g", topics=["t"], member_id=member_id)
    generation = coordinator.join(join, "", clock.now_ms).result.generation_id
    await api._store_groups()  # what the timer task does
    assert coordinator.groups["g"].state == GroupState.STABLE
    assert await commit(api, "g", 7, generation, member_id) == E.NONE
    clock.now_ms += 2 * RETENTION_MS  # subscribed topic of a Stable group: kept
    coordinator.heartbeat(
        m.HeartbeatRequest(
            correlation_id=0, group_id="g", generation_id=generation, member_id=member_id
        ),
        clock.now_ms,
    )
    await api.expire_offsets(clock.now_ms)
    assert api.store.committed("g")
    coordinator.leave("g", [m.MemberIdentity(member_id=member_id)], clock.now_ms)
    assert coordinator.groups["g"].state == GroupState.EMPTY
    clock.now_ms += RETENTION_MS - 1
    await api.expire_offsets(clock.now_ms)
    assert api.store.committed("g")  # retention counts from when it became empty
    clock.now_ms += 1
    await api.expire_offsets(clock.now_ms)
    assert not api.store.committed("g") and "g" not in coordinator.groups


@pytest.mark.anyio
async def test_active_groups_keep_offsets_unless_stable_consumer_groups(
    groups: tuple[GroupApi, Clock],
) -> None:
    """Kafka's rule: a Stable "connect" group (client-assigned, topics unknown) and a group in
    the middle of a rebalance keep their offsets past retention."""
    api, clock = groups
    coordinator = api.coordinator
    protocols = [m.JoinGroupProtocol(name="sessioned", metadata=b"opaque")]
    join = m.JoinGroupRequest(
        correlation_id=0,
        group_id="g",
        protocol_type="connect",
        protocols=protocols,
        require_known_member_id=False,
    )
    joined = coordinator.join(join, "", clock.now_ms).result
    member_id, generation = joined.member_id, joined.generation_id
    sync = m.SyncGroupRequest(
        correlation_id=0,
        group_id="g",
        generation_id=generation,
        member_id=member_id,
        assignments=[m.SyncGroupAssignment(member_id=member_id, assignment=b"work")],
    )
    synced = coordinator.sync(sync, clock.now_ms)
    await api._store_groups()
    assert synced.result.assignment_bytes == b"work"
    assert await commit(api, "g", 7, generation, member_id) == E.NONE
    clock.now_ms += 2 * RETENTION_MS
    beat = m.HeartbeatRequest(
        correlation_id=0, group_id="g", generation_id=generation, member_id=member_id
    )
    coordinator.heartbeat(beat, clock.now_ms)
    await api.expire_offsets(clock.now_ms)
    assert api.store.committed("g")  # Stable, not "consumer": kept
    coordinator.topics_changed(["t"], clock.now_ms)
    rejoin = m.JoinGroupRequest(
        correlation_id=0,
        group_id="g",
        member_id=member_id,
        protocol_type="connect",
        protocols=protocols,
    )
    coordinator.join(rejoin, "", clock.now_ms)  # the leader rejoins: a rebalance
    assert coordinator.groups["g"].state != GroupState.STABLE
    await api.expire_offsets(clock.now_ms)
    assert api.store.committed("g")
