"""The path docs/scaling.md promises: odradek as the *source cluster* of a Kafka-protocol mirror
(MirrorMaker 2), walked with an unmodified Kafka client (kafka-python) in MirrorMaker 2's order:

1. the source's topics, partitions and topic configs (Metadata, DescribeConfigs);
2. its offset-sync topic, created and written **on the source** (CreateTopics, Produce), as
   MirrorMaker 2 does by default (``offset-syncs.topic.location=source``);
3. every record copied with an assigned consumer (ListOffsets, Fetch) and written to the target
   (here a second odradek broker, through Kafka's protocol too);
4. the consumer groups and their committed offsets, to translate (ListGroups, DescribeGroups,
   OffsetFetch).

The target ends with the same topics, configs, records (keys, values, headers, timestamps) and a
group whose commits match the source's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from tests.broker_process import BrokerProcess

TOPIC = "orders"
PARTITIONS = 2
GROUP = "billing"
OFFSET_SYNCS = "mm2-offset-syncs.target.internal"


@pytest.fixture
def target(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess([tmp_path / "target-logs"]) as broker:
        yield broker


def _records(bootstrap: str, topic: str, partitions: int) -> list[tuple]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    rows = sorted((r.partition, r.offset, r.key, r.value, r.timestamp, r.headers) for r in consumer)
    consumer.close()
    return rows


def test_a_kafka_protocol_mirror_moves_topics_records_and_group_offsets(
    shared_broker: BrokerProcess, target: BrokerProcess
) -> None:
    source = shared_broker.bootstrap
    source_admin = KafkaAdminClient(bootstrap_servers=source)
    source_admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 1, topic_configs={"retention.ms": "604800000"})]
    )
    producer = KafkaProducer(bootstrap_servers=source, acks="all", compression_type="lz4")
    for i in range(40):
        producer.send(
            TOPIC,
            key=b"k%d" % i,
            value=b"order %d" % i,
            headers=[("n", b"%d" % i)],
            partition=i % PARTITIONS,
            timestamp_ms=1_700_000_000_000 + i,
        )
    producer.flush()
    committed = {TopicPartition(TOPIC, 0): 7, TopicPartition(TOPIC, 1): 12}
    billing = KafkaConsumer(bootstrap_servers=source, group_id=GROUP, enable_auto_commit=False)
    billing.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in committed.items()})
    billing.close()

    # 1. what the source has
    assert TOPIC in source_admin.list_topics()
    (described,) = source_admin.describe_topics([TOPIC])
    assert len(described["partitions"]) == PARTITIONS
    configs = source_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    retention = configs["topic"][TOPIC]["retention.ms"]
    assert retention["config_source"] == "DYNAMIC_TOPIC_CONFIG"  # an override, to copy
    overrides = {"retention.ms": retention["value"]}
    assert overrides == {"retention.ms": "604800000"}

    # 2. the offset-sync topic lives on the source
    source_admin.create_topics(
        [NewTopic(OFFSET_SYNCS, 1, 1, topic_configs={"cleanup.policy": "compact"})]
    )
    syncs = KafkaProducer(bootstrap_servers=source, acks="all")

    # 3. copy every record, remembering (source offset -> target offset) syncs
    target_admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    target_admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, topic_configs=overrides)])
    copier = KafkaProducer(bootstrap_servers=target.bootstrap, acks="all")
    reader = KafkaConsumer(bootstrap_servers=source, enable_auto_commit=False)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    reader.assign(tps)
    ends = reader.end_offsets(tps)
    assert reader.beginning_offsets(tps) == {tp: 0 for tp in tps}
    reader.seek_to_beginning()
    copied = 0
    while copied < sum(ends.values()):
        for records in reader.poll(timeout_ms=2000).values():
            for r in records:
                meta = copier.send(
                    TOPIC,
                    key=r.key,
                    value=r.value,
                    headers=r.headers,
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                ).get(timeout=30)
                sync = b"%s:%d:%d:%d" % (TOPIC.encode(), r.partition, r.offset, meta.offset)
                syncs.send(OFFSET_SYNCS, key=b"%d" % r.partition, value=sync)
                copied += 1
    reader.close()
    syncs.flush()
    assert len(_records(source, OFFSET_SYNCS, 1)) == copied

    # 4. translate the group's commits
    assert GROUP in [g["group_id"] for g in source_admin.list_groups()]
    group = source_admin.describe_groups([GROUP])[GROUP]
    assert group["group_state"] == "Empty"  # no active members: its offsets may be synced
    offsets = source_admin.list_group_offsets({GROUP: None})[GROUP]
    assert {tp: om.offset for tp, om in offsets.items()} == committed
    translated = KafkaConsumer(
        bootstrap_servers=target.bootstrap, group_id=GROUP, enable_auto_commit=False
    )
    translated.commit({tp: OffsetAndMetadata(om.offset, "", -1) for tp, om in offsets.items()})
    translated.close()

    assert _records(target.bootstrap, TOPIC, PARTITIONS) == _records(source, TOPIC, PARTITIONS)
    moved = target_admin.list_group_offsets({GROUP: None})[GROUP]
    assert {tp: om.offset for tp, om in moved.items()} == committed
    for client in (source_admin, target_admin, producer, copier, syncs):
        client.close()
