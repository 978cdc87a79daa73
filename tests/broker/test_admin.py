"""Topics, partitions, metadata and configs through the admin APIs of a real broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess

TOPIC = m.ConfigResourceType.TOPIC
BROKER = m.ConfigResourceType.BROKER


def create(wire: Wire, *topics: m.CreatableTopic, validate_only: bool = False) -> list:
    response = wire.call(
        m.CreateTopicsRequest(correlation_id=0, topics=list(topics), validate_only=validate_only)
    )
    assert response.error_code == 0
    return response.topics


def metadata_topic(wire: Wire, name: str, auto_create: bool = False) -> m.MetadataTopic:
    response = wire.metadata([name], auto_create=auto_create)
    (found,) = response.topics
    return found


def partition_dirs(broker: BrokerProcess) -> set[str]:
    return {p.name for root in broker.log_dirs for p in root.iterdir() if p.is_dir()}


# -- CreateTopics -----------------------------------------------------------------------------


def test_create_topic_and_describe_it(shared_broker: BrokerProcess, wire: Wire, topic: str) -> None:
    (result,) = create(wire, m.CreatableTopic(name=topic, num_partitions=3))
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 3, 1)
    assert result.topic_id
    found = metadata_topic(wire, topic)
    assert found.error_code == 0 and found.topic_id == result.topic_id
    assert [p.partition_index for p in found.partitions] == [0, 1, 2]
    for p in found.partitions:
        assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) == (0, 1, [1], [1])
    assert {f"{topic}-{i}" for i in range(3)} <= partition_dirs(shared_broker)
    response = wire.metadata(None)
    assert topic in {t.name for t in response.topics}
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (1, "127.0.0.1", shared_broker.port)
    ]
    assert response.controller_id == 1 and response.cluster_id


def test_create_topics_errors(shared_broker: BrokerProcess, wire: Wire, topic: str) -> None:
    wire.create_topic(topic)
    before = partition_dirs(shared_broker)
    longest = "x" * 249
    results = create(
        wire,
        m.CreatableTopic(name="../x"),
        m.CreatableTopic(name=""),
        m.CreatableTopic(name="y" * 250),
        m.CreatableTopic(name="a/b"),
        m.CreatableTopic(name="."),
        m.CreatableTopic(name=".."),
        m.CreatableTopic(name="caf\u00e9"),
        m.CreatableTopic(name=topic),
        m.CreatableTopic(name=topic + "-rf", replication_factor=3),
        m.CreatableTopic(name=topic + "-rf0", replication_factor=0),
        m.CreatableTopic(name=topic + "-zero", num_partitions=0),
        m.CreatableTopic(name=topic + "-cfg", configs={"no.such.key": "1"}),
        m.CreatableTopic(name=topic + "-val", configs={"retention.ms": "soon"}),
        m.CreatableTopic(name=longest),
    )
    codes = [ErrorCode(r.error_code).name for r in results]
    assert codes == [
        *["INVALID_TOPIC_EXCEPTION"] * 7,
        "TOPIC_ALREADY_EXISTS",
        "INVALID_REPLICATION_FACTOR",
        "INVALID_REPLICATION_FACTOR",
        "INVALID_PARTITIONS",
        "INVALID_CONFIG",
        "INVALID_CONFIG",
        "NONE",
    ]
    assert all(r.error_message for r in results[:-1])
    assert "factor of 3 cannot be reached because only 1 broker(s)" in results[8].error_message
    assert "must be larger than 0, or -1" in results[9].error_message  # Kafka's message
    assert "no.such.key" in results[11].error_message
    assert "retention.ms" in results[12].error_message and "soon" in results[12].error_message
    assert partition_dirs(shared_broker) - before == {f"{longest}-0"}
    assert not any(p.exists() for p in (shared_broker.log_dirs[0].parent / "x",))


def test_create_topics_validate_only_creates_nothing(
    shared_broker: BrokerProcess, wire: Wire, topic: str
) -> None:
    wire.create_topic(topic + "-exists")
    results = create(
        wire,
        m.CreatableTopic(name=topic, num_partitions=2),
        m.CreatableTopic(name=topic + "-exists"),
        m.CreatableTopic(name=topic + "-bad", configs={"cleanup.policy": "shred"}),
        validate_only=True,
    )
    assert [r.error_code for r in results] == [
        0,
        ErrorCode.TOPIC_ALREADY_EXISTS,
        ErrorCode.INVALID_CONFIG,
    ]
    assert results[1].error_message == f"Topic '{topic}-exists' already exists."
    assert metadata_topic(wire, topic).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not any(
        d.startswith(topic + "-") and d[-1].isdigit() and "exists" not in d
        for d in partition_dirs(shared_broker)
    )


# -- DeleteTopics / CreatePartitions ----------------------------------------------------------


def test_delete_topic(shared_broker: BrokerProcess, wire: Wire, topic: str) -> None:
    wire.create_topic(topic, partitions=2)
    wire.produce(topic, 1, batch(5))
    response = wire.call(
        m.DeleteTopicsRequest(correlation_id=0, topic_names=[topic, topic + "-nope", "../etc"])
    )
    assert [(t.name, t.error_code) for t in response.topics] == [
        (topic, 0),
        (topic + "-nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("../etc", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]
    assert not {d for d in partition_dirs(shared_broker) if d.startswith(topic)}
    assert metadata_topic(wire, topic).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    result, _ = wire.fetch(topic, 1, 0)
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # The name can be used again, for a new, empty topic.
    wire.create_topic(topic)
    assert wire.produce(topic, 0, batch(1)).base_offset == 0


def test_delete_topic_wakes_a_long_poll_on_it(shared_broker: BrokerProcess, topic: str) -> None:
    with Wire(shared_broker.port) as waiter, Wire(shared_broker.port) as admin:  # type: ignore[arg-type]
        admin.create_topic(topic)
        cid = waiter.send(
            m.FetchRequest(
                correlation_id=0,
                max_wait_ms=10_000,
                topics=[
                    m.FetchTopic(
                        name=topic,
                        partitions=[m.FetchPartition(partition_index=0, fetch_offset=0)],
                    )
                ],
            )
        )
        admin.call(m.DeleteTopicsRequest(correlation_id=0, topic_names=[topic]))
        response, _ = waiter.recv(timeout_s=5.0)
    assert response.correlation_id == cid
    assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions(wire: Wire, topic: str) -> None:
    wire.create_topic(topic)

    def grow(name: str, count: int, validate_only: bool = False) -> m.CreatePartitionsTopicResult:
        response = wire.call(
            m.CreatePartitionsRequest(
                correlation_id=0,
                topics=[m.CreatePartitionsTopic(name=name, count=count)],
                validate_only=validate_only,
            )
        )
        return response.results[0]

    assert grow(topic, 4, validate_only=True).error_code == 0
    assert len(metadata_topic(wire, topic).partitions) == 1
    assert grow(topic, 3).error_code == 0
    assert len(metadata_topic(wire, topic).partitions) == 3
    assert wire.produce(topic, 2, batch(2)).error_code == 0
    assert [r.offset for r in fetch_all(wire, topic, 2)] == [0, 1]
    shrink = grow(topic, 2)
    assert shrink.error_code == ErrorCode.INVALID_PARTITIONS and shrink.error_message
    assert grow(topic, 3).error_code == ErrorCode.INVALID_PARTITIONS
    assert grow(topic + "-nope", 3).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- Metadata and auto-creation ---------------------------------------------------------------


def test_metadata_auto_creates_with_num_partitions(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=["num.partitions=3"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        not_asked = metadata_topic(wire, "lazy", auto_create=False)
        assert not_asked.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        auto = metadata_topic(wire, "lazy", auto_create=True)
        assert auto.error_code == 0 and len(auto.partitions) == 3
        bad = metadata_topic(wire, "no/slashes", auto_create=True)
        assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        (created,) = create(wire, m.CreatableTopic(name="explicit"))  # -1: num.partitions
        assert created.num_partitions == 3
    assert partition_dirs(broker) == {f"{t}-{i}" for t in ("lazy", "explicit") for i in range(3)}
    assert broker.wait_for_events("topic auto-created")


def test_metadata_does_not_auto_create_when_disabled(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=["auto.create.topics.enable=false"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        found = metadata_topic(wire, "lazy", auto_create=True)
        assert found.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert wire.metadata(None).topics == []
    assert partition_dirs(broker) == set()


# -- DescribeConfigs / AlterConfigs -----------------------------------------------------------


def describe(wire: Wire, name: str, keys: list[str] | None = None, kind: int = TOPIC) -> Any:
    response = wire.call(
        m.DescribeConfigsRequest(
            correlation_id=0,
            resources=[
                m.DescribeConfigsResource(
                    resource_type=kind, resource_name=name, configuration_keys=keys
                )
            ],
        )
    )
    return response.results[0]


def alter(
    wire: Wire,
    name: str,
    *ops: tuple[str, str | None, int],
    validate_only: bool = False,
    kind: int = TOPIC,
) -> m.AlterConfigsResourceResult:
    configs = [m.AlterableConfig(name=k, value=v, config_operation=op) for k, v, op in ops]
    return wire.alter_configs(name, *configs, validate_only=validate_only, resource_type=kind)


SET, DELETE = m.AlterConfigOp.SET, m.AlterConfigOp.DELETE


def test_describe_configs(wire: Wire, topic: str) -> None:
    wire.create_topic(topic, configs={"retention.ms": "12345"})
    result = describe(wire, topic)
    assert result.error_code == 0
    entries = {e.name: e for e in result.configs}
    assert entries["retention.ms"].value == "12345"
    assert entries["retention.ms"].config_source == m.ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["cleanup.policy"].value == "delete"
    assert entries["segment.bytes"].value == "1073741824"
    only = describe(wire, topic, keys=["cleanup.policy"])
    assert [e.name for e in only.configs] == ["cleanup.policy"]
    assert describe(wire, topic + "-nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    broker_result = describe(wire, "", kind=BROKER, keys=["num.partitions"])
    assert [(e.name, e.value) for e in broker_result.configs] == [("num.partitions", "1")]
    assert describe(wire, "x", kind=99).error_code == ErrorCode.INVALID_REQUEST


def test_alter_configs_errors_name_the_key_and_value(wire: Wire, topic: str) -> None:
    wire.create_topic(topic)
    unknown = alter(wire, topic, ("no.such.key", "1", SET))
    assert unknown.error_code == ErrorCode.INVALID_CONFIG and "no.such.key" in unknown.error_message
    bad = alter(wire, topic, ("retention.ms", "forever", SET))
    assert bad.error_code == ErrorCode.INVALID_CONFIG
    assert "retention.ms" in bad.error_message and "forever" in bad.error_message
    missing = alter(wire, topic, ("retention.ms", None, SET), ("segment.ms", None, SET))
    assert missing.error_code == ErrorCode.INVALID_REQUEST  # Kafka's code and words
    assert missing.error_message == "Null value not supported for : retention.ms, segment.ms"
    assert alter(wire, topic, ("retention.ms", "1", 7)).error_code == ErrorCode.INVALID_REQUEST
    twice = alter(wire, topic, ("retention.ms", "1", SET), ("retention.ms", None, DELETE))
    assert twice.error_code == ErrorCode.INVALID_REQUEST  # Kafka: duplicate config keys
    assert twice.error_message == "Error due to duplicate config keys : retention.ms"
    assert (
        alter(wire, topic + "-nope", ("retention.ms", "1", SET)).error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert alter(wire, "1", ("num.partitions", "2", SET), kind=BROKER).error_code != 0
    # Nothing of the failed requests was applied.
    entries = {e.name: e for e in describe(wire, topic).configs}
    assert entries["retention.ms"].config_source != m.ConfigSource.DYNAMIC_TOPIC_CONFIG


def test_alter_configs_applies_at_once(wire: Wire, topic: str) -> None:
    wire.create_topic(topic)
    ok = alter(wire, topic, ("max.message.bytes", "200", SET), validate_only=True)
    assert ok.error_code == 0
    assert wire.produce(topic, 0, batch(1, value_bytes=500)).error_code == 0  # not applied
    assert alter(wire, topic, ("max.message.bytes", "200", SET)).error_code == 0
    too_big = wire.produce(topic, 0, batch(1, value_bytes=500))
    assert too_big.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert alter(wire, topic, ("max.message.bytes", None, DELETE)).error_code == 0
    assert wire.produce(topic, 0, batch(1, value_bytes=500)).error_code == 0


@pytest.mark.slow
def test_topic_config_override_survives_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("configured", partitions=2)
        assert alter(wire, "configured", ("retention.ms", "86400000", SET)).error_code == 0
        assert alter(wire, "configured", ("cleanup.policy", "compact", SET)).error_code == 0
        topic_id = metadata_topic(wire, "configured").topic_id
    assert broker.stop() == 0
    broker.start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        entries = {e.name: e for e in describe(wire, "configured").configs}
        assert entries["retention.ms"].value == "86400000"
        assert entries["cleanup.policy"].value == "compact"
        assert entries["retention.ms"].config_source == m.ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert metadata_topic(wire, "configured").topic_id == topic_id
    assert broker.kill() == -9  # and after a crash too
    broker.start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        entries = {e.name: e for e in describe(wire, "configured").configs}
        assert entries["cleanup.policy"].value == "compact"
