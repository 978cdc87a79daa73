"""Admin operations against a real broker."""

from __future__ import annotations

from odradek.client import (
    Admin,
    NewTopic,
    OffsetAndTimestamp,
    PartitionInfo,
    Producer,
    TopicPartition,
    UnknownTopicOrPartitionError,
)


def test_topic_lifecycle_configs_offsets_and_log_dirs(bootstrap: str, topic: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1, {"retention.ms": "3600000"})])
        admin.create_topics([NewTopic(topic + "-v", 1)], validate_only=True)
        topics = admin.list_topics()
        assert topic in topics and topic + "-v" not in topics
        assert not any(name.startswith("__") for name in topics)

        with Producer(bootstrap) as producer:
            for i in range(10):
                producer.send(topic, b"%d" % i, partition=i % 2, timestamp_ms=100 + i)
            producer.flush()

        [description] = admin.describe_topics([topic])
        assert description.name == topic and not description.internal
        assert description.partitions == [PartitionInfo(0, 0, 5), PartitionInfo(1, 0, 5)]

        configs = admin.describe_configs(topic)
        entry = configs["retention.ms"]
        assert entry.value == "3600000" and not entry.is_default
        admin.alter_configs(topic, set={"retention.ms": "7200000"})
        assert admin.describe_configs(topic)["retention.ms"].value == "7200000"
        admin.alter_configs(topic, delete=["retention.ms"])
        assert admin.describe_configs(topic)["retention.ms"].is_default

        admin.create_partitions({topic: 3})
        [description] = admin.describe_topics([topic])
        assert [p.partition for p in description.partitions] == [0, 1, 2]

        tp0 = TopicPartition(topic, 0)
        assert admin.list_offsets({tp0: -1}) == {tp0: OffsetAndTimestamp(5, -1)}
        assert admin.list_offsets({tp0: 103})[tp0] == OffsetAndTimestamp(2, 104)
        assert admin.delete_records({tp0: 3}) == {tp0: 3}
        assert admin.list_offsets({tp0: -2})[tp0].offset == 3  # type: ignore[union-attr]

        dirs = admin.describe_log_dirs()
        [(_, log_dir)] = dirs.items()
        assert log_dir.error is None
        assert log_dir.partitions[tp0] > 0

        admin.delete_topics([topic])
        assert topic not in admin.list_topics()
        try:
            admin.describe_topics([topic])
        except UnknownTopicOrPartitionError:
            pass
        else:
            raise AssertionError("describing a deleted topic must fail")
