"""``__consumer_offsets`` belongs to the group coordinator (issue 14, finding 3).

A hostile client over the native protocol must not be able to write it (Produce), delete it
(DeleteTopics), truncate it (DeleteRecords) or make it drop committed offsets (AlterConfigs
cleanup.policy); and a batch on
disk whose records do not parse must not stop the replay at start-up: the latest valid commit
survives a restart.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from odradek.broker.groups.api import GroupApi
from odradek.broker.groups.offsets import OffsetKey, OffsetValue, encode_offset_key, partition_for
from odradek.broker.groups.offsets import encode_offset_value as offset_value
from odradek.broker.groups.store import load
from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import HEADER_SIZE, CorruptRecordError, recompute_crc
from odradek.storage.config import LogConfig
from odradek.storage.log import FetchInfo
from odradek.storage.manager import LogManager
from odradek.storage.topics import OFFSETS_TOPIC
from tests.broker.wire import Wire, bad_events, batch
from tests.broker_process import BrokerProcess

GROUP = "victims"


@pytest.fixture
def broker(tmp_path: Path) -> BrokerProcess:
    process = BrokerProcess([tmp_path / "logs"], overrides=["offsets.topic.num.partitions=1"])
    process.start()
    yield process  # type: ignore[misc]
    if process.process is not None and process.process.poll() is None:
        assert process.stop() == 0


def commit(wire: Wire, topic: str, offset: int, group: str = GROUP) -> None:
    response = wire.call(
        m.OffsetCommitRequest(
            correlation_id=0,
            group_id=group,
            topics=[
                m.OffsetCommitTopic(
                    name=topic,
                    partitions=[
                        m.OffsetCommitPartition(partition_index=0, committed_offset=offset)
                    ],
                )
            ],
        )
    )
    assert response.topics[0].partitions[0].error_code == 0, response


def committed(wire: Wire, topic: str, group: str = GROUP) -> int:
    response = wire.call(
        m.OffsetFetchRequest(
            correlation_id=0,
            group_id=group,
            topics=[m.OffsetFetchTopic(name=topic, partition_indexes=[0])],
        )
    )
    assert response.error_code == 0, response
    return int(response.topics[0].partitions[0].committed_offset)


def test_clients_cannot_produce_to_the_offsets_topic(broker: BrokerProcess) -> None:
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        commit(wire, "t", 500)
        planted = encode_batch(
            [(encode_offset_key(OffsetKey(GROUP, "t", 0)), offset_value(OffsetValue(10)), 1)]
        )
        result = wire.produce(OFFSETS_TOPIC, 0, planted, acks=m.ACKS_ALL)
        assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert "internal topic" in (result.error_message or "")
        assert result.base_offset == -1
        assert committed(wire, "t") == 500
    broker.restart()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert committed(wire, "t") == 500


def test_clients_cannot_delete_the_offsets_topic(broker: BrokerProcess) -> None:
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        commit(wire, "t", 500)
        response = wire.call(m.DeleteTopicsRequest(correlation_id=0, topic_names=[OFFSETS_TOPIC]))
        assert response.topics[0].error_code == ErrorCode.INVALID_REQUEST
        assert "internal topic" in (response.topics[0].error_message or "")
        assert OFFSETS_TOPIC in {t.name for t in wire.metadata([OFFSETS_TOPIC]).topics}
        assert wire.metadata([OFFSETS_TOPIC]).topics[0].error_code == 0
        assert committed(wire, "t") == 500


def test_clients_cannot_create_or_grow_the_offsets_topic(tmp_path: Path) -> None:
    # Its partition count places every group: a client creating it first (with its own count
    # or cleanup.policy) or adding partitions would move groups away from their commits.
    with BrokerProcess([tmp_path / "logs"]) as fresh, Wire(fresh.port) as wire:  # type: ignore[arg-type]
        create = m.CreateTopicsRequest(
            correlation_id=0,
            topics=[
                m.CreatableTopic(
                    name=OFFSETS_TOPIC, num_partitions=3, configs={"cleanup.policy": "delete"}
                )
            ],
        )
        result = wire.call(create).topics[0]
        assert result.error_code == ErrorCode.INVALID_REQUEST, result
        assert "created by the broker" in (result.error_message or "")
        wire.create_topic("t")
        commit(wire, "t", 7)  # the coordinator creates it, with its own layout
        partitions = len(wire.metadata([OFFSETS_TOPIC]).topics[0].partitions)
        assert partitions == 50
        grow = m.CreatePartitionsRequest(
            correlation_id=0, topics=[m.CreatePartitionsTopic(name=OFFSETS_TOPIC, count=60)]
        )
        grown = wire.call(grow).results[0]
        assert grown.error_code == ErrorCode.INVALID_REQUEST, grown
        assert len(wire.metadata([OFFSETS_TOPIC]).topics[0].partitions) == partitions
        assert committed(wire, "t") == 7


def test_clients_cannot_delete_records_of_the_offsets_topic(broker: BrokerProcess) -> None:
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        commit(wire, "t", 500)
        result = wire.delete_records(OFFSETS_TOPIC, 0, -1)
        assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert wire.list_offset(OFFSETS_TOPIC, 0, m.EARLIEST_TIMESTAMP).offset == 0
    broker.restart()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert committed(wire, "t") == 500


@pytest.mark.parametrize(
    "op",
    [
        m.AlterableConfig(name="cleanup.policy", value="delete"),
        m.AlterableConfig(name="cleanup.policy", value="compact,delete"),
        m.AlterableConfig(name="cleanup.policy", config_operation=m.AlterConfigOp.DELETE),
    ],
    ids=["set-delete", "set-compact-delete", "delete-override"],
)
def test_offsets_topic_keeps_cleanup_policy_compact(
    broker: BrokerProcess, op: m.AlterableConfig
) -> None:
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        commit(wire, "t", 500)  # creates the offsets topic
        result = wire.alter_configs(OFFSETS_TOPIC, op)
        assert result.error_code == ErrorCode.INVALID_CONFIG, result
        described = wire.call(
            m.DescribeConfigsRequest(
                correlation_id=0,
                resources=[
                    m.DescribeConfigsResource(
                        resource_type=m.ConfigResourceType.TOPIC,
                        resource_name=OFFSETS_TOPIC,
                        configuration_keys=["cleanup.policy"],
                    )
                ],
            )
        )
        assert described.results[0].configs[0].value == "compact"
        # a harmless change is still allowed
        harmless = m.AlterableConfig(name="segment.ms", value="3600000")
        result = wire.alter_configs(OFFSETS_TOPIC, harmless)
        assert result.error_code == 0, result


def _poison_batch(base_offset: int) -> bytes:
    """A batch with a valid header and CRC whose records do not parse."""
    data = bytearray(batch(3))
    data[0:8] = base_offset.to_bytes(8, "big")
    data[HEADER_SIZE:] = b"\xff" * (len(data) - HEADER_SIZE)  # varints that never end
    recompute_crc(data)
    return bytes(data)


def test_replay_skips_an_unreadable_batch_and_keeps_the_latest_commit(
    broker: BrokerProcess,
) -> None:
    """The issue's case: a commit of 10, a planted record, then an acknowledged commit of 500
    that came back as 10 after a clean restart because the replay stopped at the plant."""
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        commit(wire, "t", 10)
        end = wire.list_offset(OFFSETS_TOPIC, 0, m.LATEST_TIMESTAMP).offset
    assert broker.stop() == 0
    # Planted on disk (clients cannot produce to the topic): appended to the active segment,
    # then the clean-shutdown marker removed so the loader re-validates the tail and keeps it
    # (its header and CRC are valid).
    root = broker.log_dirs[0]
    segment = sorted((root / f"{OFFSETS_TOPIC}-0").glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(_poison_batch(end))
    (root / ".kafka_cleanshutdown").unlink()
    broker.start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert wire.list_offset(OFFSETS_TOPIC, 0, m.LATEST_TIMESTAMP).offset == end + 3
        assert committed(wire, "t") == 10
        commit(wire, "t", 500)  # acknowledged, written after the planted batch
        assert committed(wire, "t") == 500
    broker.restart()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert committed(wire, "t") == 500
    loaded = broker.events("groups loaded")[-1]
    assert loaded["skipped"] >= 1
    assert not bad_events(broker.lines)


def test_a_partition_whose_replay_cannot_finish_is_not_served_stale(tmp_path: Path) -> None:
    """A partition the replay cannot read to its end (here: a read error at its second batch)
    is reported incomplete, its groups answer COORDINATOR_NOT_AVAILABLE rather than the offsets
    read before the damage, and the other partitions' groups are served.

    Unit level: on disk, the damage that stops a replay (a batch header lying about its length,
    after a clean shutdown) is today hidden by the loader, which silently ends the log before it
    (reported with issue 14, finding 1)."""
    manager = LogManager(
        [tmp_path / "logs"], LogConfig(), node_id=1, clock_ms=lambda: int(time.time() * 1000)
    )
    manager.startup()
    try:
        manager.create_topic(OFFSETS_TOPIC, 2, {"cleanup.policy": "compact"})
        damaged = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 2) == 0)
        healthy = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 2) == 1)
        for group, partition in ((damaged, 0), (healthy, 1)):
            log = manager.partitions.get_log(OFFSETS_TOPIC, partition)
            for offset in (10, 500):
                key = encode_offset_key(OffsetKey(group, "t", 0))
                log.append(encode_batch([(key, offset_value(OffsetValue(offset)), 1)]), now_ms=1)
        damaged_log = manager.partitions.get_log(OFFSETS_TOPIC, 0)
        read = damaged_log.read

        def read_failing_at_the_second_batch(offset: int, max_bytes: int) -> FetchInfo:
            if offset >= 1:
                raise CorruptRecordError("unreadable batch header")
            return read(offset, 1)  # one batch per read: the replay reads again from offset 1

        damaged_log.read = read_failing_at_the_second_batch  # type: ignore[method-assign]
        loaded = load(manager)
        assert loaded.incomplete == {0}
        assert loaded.offsets[healthy][("t", 0)].value.offset == 500

        api = GroupApi.__new__(GroupApi)
        api.loading, api._unloaded, api._offsets_partitions = False, loaded.incomplete, 2
        assert api.availability(damaged) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert api.availability(healthy) == ErrorCode.NONE
    finally:
        manager.shutdown()
