"""ListOffsets (earliest, latest, by timestamp) and DeleteRecords, across restarts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess


def test_list_offsets(wire: Wire, topic: str) -> None:
    wire.create_topic(topic)
    empty = wire.list_offset(topic, 0, m.EARLIEST_TIMESTAMP)
    assert (empty.error_code, empty.offset) == (0, 0)
    assert wire.list_offset(topic, 0, m.LATEST_TIMESTAMP).offset == 0
    assert wire.list_offset(topic, 0, 1_000).offset == -1

    wire.produce(topic, 0, batch(3, timestamp_ms=1_000))  # offsets 0..2 at 1000..1002
    wire.produce(topic, 0, batch(3, timestamp_ms=2_000))  # offsets 3..5 at 2000..2002
    wire.produce(topic, 0, batch(2, timestamp_ms=3_000))  # offsets 6..7 at 3000..3001

    def at(timestamp: int) -> tuple[int, int, int]:
        found = wire.list_offset(topic, 0, timestamp)
        return found.error_code, found.offset, found.timestamp

    assert at(m.EARLIEST_TIMESTAMP) == (0, 0, -1)
    assert at(m.LATEST_TIMESTAMP) == (0, 8, -1)
    assert at(0) == (0, 0, 1_000)
    assert at(1_001) == (0, 1, 1_001)
    assert at(1_500) == (0, 3, 2_000)
    assert at(2_002) == (0, 5, 2_002)
    assert at(3_001) == (0, 7, 3_001)
    assert at(3_002) == (0, -1, -1)  # nothing that recent
    assert at(m.MAX_TIMESTAMP) == (0, 7, 3_001)  # KIP-734: the largest timestamp's record
    assert at(-4)[0] == ErrorCode.INVALID_REQUEST  # tiered storage's: not here
    unknown = wire.list_offset(topic, 5, m.LATEST_TIMESTAMP)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def delete_records(wire: Wire, topic: str, offset: int, partition: int = 0) -> tuple[int, int]:
    result = wire.delete_records(topic, partition, offset)
    return result.error_code, result.low_watermark


def test_delete_records(wire: Wire, topic: str) -> None:
    wire.create_topic(topic)
    for i in range(5):
        wire.produce(topic, 0, batch(2, tag=f"b{i}-"))  # offsets 2i, 2i+1
    assert delete_records(wire, topic, 4) == (0, 4)
    assert wire.list_offset(topic, 0, m.EARLIEST_TIMESTAMP).offset == 4
    below, tail = wire.fetch(topic, 0, 3)
    assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and len(tail) == 0
    assert below.log_start_offset == 4 and below.high_watermark == 10
    assert [r.offset for r in fetch_all(wire, topic, start=4)] == list(range(4, 10))
    assert delete_records(wire, topic, 2) == (0, 4)  # never moves back
    assert delete_records(wire, topic, 11)[0] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert delete_records(wire, topic, -1) == (0, 10)  # -1: the high watermark
    assert wire.fetch(topic, 0, 9)[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    at_end, tail = wire.fetch(topic, 0, 10)
    assert (at_end.error_code, len(tail)) == (0, 0)
    assert delete_records(wire, topic + "-nope", 0)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Appends continue after the new start.
    assert wire.produce(topic, 0, batch(1)).base_offset == 10


def test_delete_records_of_a_compact_only_topic_is_a_policy_violation(
    wire: Wire, topic: str
) -> None:
    """Kafka's Partition.deleteRecordsOnLeader: POLICY_VIOLATION unless ``cleanup.policy``
    has ``delete``; the log start stays."""
    wire.create_topic(topic, configs={"cleanup.policy": "compact"})
    wire.create_topic(topic + "-both", configs={"cleanup.policy": "compact,delete"})
    for name in (topic, topic + "-both"):
        wire.produce(name, 0, batch(4))
    assert delete_records(wire, topic, 2)[0] == ErrorCode.POLICY_VIOLATION
    assert wire.list_offset(topic, 0, m.EARLIEST_TIMESTAMP).offset == 0
    assert delete_records(wire, topic + "-both", 2) == (0, 2)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_delete_records_survives_restart(
    broker_factory: Callable[..., BrokerProcess], how: str
) -> None:
    broker = broker_factory()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("trimmed")
        for _ in range(4):
            wire.produce("trimmed", 0, batch(5), acks=m.ACKS_ALL)
        assert delete_records(wire, "trimmed", 7) == (0, 7)
    if how == "sigterm":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker.start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert wire.list_offset("trimmed", 0, m.EARLIEST_TIMESTAMP).offset == 7
        assert wire.list_offset("trimmed", 0, m.LATEST_TIMESTAMP).offset == 20
        assert wire.fetch("trimmed", 0, 6)[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert [r.offset for r in fetch_all(wire, "trimmed", start=7)] == list(range(7, 20))
