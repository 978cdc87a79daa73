"""The smaller defects of issue 14, finding 12, each as a hostile client meets them.

Topics whose names collide in Kafka's metric names (``a.b`` / ``a_b``), DeleteRecords with a
negative offset other than -1, AlterConfigs deleting a key that does not exist, and a
correlation id outside int32.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from tests.broker.wire import Wire, batch
from tests.broker_process import BrokerProcess, peer_of


def create(wire: Wire, name: str) -> m.CreatableTopicResult:
    response = wire.call(
        m.CreateTopicsRequest(
            correlation_id=0, topics=[m.CreatableTopic(name=name, num_partitions=1)]
        )
    )
    return response.topics[0]


@pytest.mark.parametrize(("first", "second"), [("a.b", "a_b"), ("x_y.z", "x.y_z")])
def test_topic_names_that_collide_cannot_coexist(
    shared_broker: BrokerProcess, first: str, second: str
) -> None:
    with Wire(shared_broker.port) as wire:  # type: ignore[arg-type]
        assert create(wire, first).error_code == 0
        result = create(wire, second)
        assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, result
        assert f"collides with existing topic: {first}" in (result.error_message or "")
        metadata = wire.metadata([second], auto_create=False)
        assert metadata.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_name_colliding_with_an_internal_topic_is_refused_before_it_exists(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """``__consumer.offsets`` created first would keep the coordinator from ever creating
    ``__consumer_offsets``: every group would fail."""
    broker = broker_factory(overrides=["offsets.topic.num.partitions=1"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        result = create(wire, "__consumer.offsets")
        assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, result
        assert "collides with existing topic: __consumer_offsets" in (result.error_message or "")
        wire.create_topic("t")
        response = wire.call(
            m.OffsetCommitRequest(
                correlation_id=0,
                group_id="g",
                topics=[
                    m.OffsetCommitTopic(
                        name="t",
                        partitions=[m.OffsetCommitPartition(partition_index=0, committed_offset=7)],
                    )
                ],
            )
        )
        assert response.topics[0].partitions[0].error_code == 0, response


@pytest.mark.parametrize("offset", [-2, -5, -(2**63)])
def test_delete_records_refuses_negative_offsets_but_minus_one(
    shared_broker: BrokerProcess, topic: str, offset: int
) -> None:
    with Wire(shared_broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic(topic)
        assert wire.produce(topic, 0, batch(3)).error_code == 0
        result = wire.delete_records(topic, 0, offset)
        assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE, result
        assert wire.list_offset(topic, 0, m.EARLIEST_TIMESTAMP).offset == 0
        result = wire.delete_records(topic, 0, -1)  # -1: up to the high watermark
        assert result.error_code == 0 and result.low_watermark == 3, result


def test_alter_configs_deleting_an_unknown_key_is_invalid_config(
    shared_broker: BrokerProcess, topic: str
) -> None:
    delete = m.AlterConfigOp.DELETE
    with Wire(shared_broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic(topic, configs={"retention.ms": "60000"})
        result = wire.alter_configs(
            topic, m.AlterableConfig(name="no.such.key", config_operation=delete)
        )
        assert result.error_code == ErrorCode.INVALID_CONFIG, result
        assert "no.such.key" in (result.error_message or "")
        # a known key without an override: nothing to delete, as in Kafka
        result = wire.alter_configs(
            topic, m.AlterableConfig(name="segment.ms", config_operation=delete)
        )
        assert result.error_code == 0, result
        result = wire.alter_configs(
            topic, m.AlterableConfig(name="retention.ms", config_operation=delete)
        )
        assert result.error_code == 0, result


@pytest.mark.parametrize("correlation_id", [2**31, -(2**31) - 1, 2**63])
@pytest.mark.parametrize("version", [0, 7], ids=["supported", "unsupported"])
def test_a_correlation_id_outside_int32_closes_the_connection_unechoed(
    shared_broker: BrokerProcess, correlation_id: int, version: int
) -> None:
    header = msgspec.msgpack.encode([m.ApiKey.METADATA, version, correlation_id, None, False])
    body = len(header).to_bytes(4, "big") + header
    since = len(shared_broker.lines)
    with Wire(shared_broker.port) as wire:  # type: ignore[arg-type]
        peer = peer_of(wire.sock)
        wire.send_bytes(len(body).to_bytes(4, "big") + body)
        assert wire.sock.recv(1 << 16) == b"", "the broker answered"
    # the module's broker: the previous test's closing may be parsed after `since` was read,
    # so keep the lines about this test's connection (the broker logs it as its peer)
    closing = shared_broker.wait_for_events(
        "closing connection", since_line=since, where=lambda e: e.get("peer") == peer
    )
    assert any("outside int32" in e["reason"] for e in closing), closing
    with Wire(shared_broker.port) as wire:  # type: ignore[arg-type]
        assert wire.metadata([], auto_create=False).error_code == 0
