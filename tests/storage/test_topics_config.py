"""Topic names, partition directory names and topic-level configs (Kafka's names and rules)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.storage.config import CONFIG_KEYS, LONG_MAX, LogConfig
from odradek.storage.errors import InvalidConfigError, InvalidTopicError
from odradek.storage.topics import (
    MAX_TOPIC_NAME_LENGTH,
    delete_dir_name,
    parse_partition_dir,
    partition_dir_name,
    validate_topic_name,
)

LEGAL_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
legal_names = st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=MAX_TOPIC_NAME_LENGTH).filter(
    lambda n: n not in (".", "..")
)


# -- topic names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["../x", "", "x" * 250, "a/b", "a\x00b", ".", "..", "a b", "caf\u00e9", "t\n", "a\\b", None, 5],
)
def test_illegal_topic_names(name: object) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)
    if isinstance(name, str):
        with pytest.raises(InvalidTopicError):
            partition_dir_name(name, 0)


@pytest.mark.parametrize(
    "name", ["a", "x" * 249, "...", "-", "_", "a.b_c-D9", "__consumer_offsets"]
)
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


@given(name=legal_names, partition=st.integers(0, 2**31 - 1))
def test_partition_dir_names_round_trip(name: str, partition: int) -> None:
    assert parse_partition_dir(partition_dir_name(name, partition)) == (name, partition)


@pytest.mark.parametrize(
    "dir_name",
    [
        "t",
        "t-",
        "-0",
        "t-01",
        "t-x",
        "t-2147483648",
        "t-0.0123456789abcdef0123456789abcdef-delete",
        "t-0.0123456789abcdef0123456789abcdef-future",
        "..-0",
        "a b-0",
        "lost+found",
    ],
)
def test_not_partition_dirs(dir_name: str) -> None:
    assert parse_partition_dir(dir_name) is None


def test_partition_number_follows_the_last_dash() -> None:
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("a--3") == ("a-", 3)


@given(name=legal_names, partition=st.integers(0, 2**31 - 1))
def test_delete_dir_names_fit_255_bytes(name: str, partition: int) -> None:
    unique = "0123456789abcdef0123456789abcdef"
    dir_name = delete_dir_name(name, partition, unique)
    assert len(dir_name.encode()) <= 255
    assert dir_name.endswith(f"-{partition}.{unique}-delete")
    assert name.startswith(dir_name.removesuffix(f"-{partition}.{unique}-delete"))
    assert parse_partition_dir(dir_name) is None  # never mistaken for a live partition
    if len(name) < 200:
        assert dir_name == f"{name}-{partition}.{unique}-delete"


# -- configs ---------------------------------------------------------------------------------


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    kafka = config.to_kafka()
    assert kafka["segment.bytes"] == "1073741824"
    assert kafka["segment.ms"] == str(7 * 24 * 3600 * 1000)
    assert kafka["segment.index.bytes"] == "10485760"
    assert kafka["index.interval.bytes"] == "4096"
    assert kafka["max.message.bytes"] == "1048588"
    assert kafka["flush.messages"] == str(LONG_MAX)
    assert kafka["retention.bytes"] == "-1"
    assert kafka["cleanup.policy"] == "delete"
    assert kafka["message.timestamp.type"] == "CreateTime"
    assert kafka["compression.type"] == "producer"
    assert kafka["min.cleanable.dirty.ratio"] == "0.5"
    assert config.delete and not config.compact and not config.log_append_time


def test_every_key_round_trips_through_its_kafka_name() -> None:
    config = LogConfig()
    assert set(config.to_kafka()) == set(CONFIG_KEYS)
    assert config.with_overrides(config.to_kafka()) == config
    for name, key in CONFIG_KEYS.items():
        assert key.name == name
        assert hasattr(config, key.attribute), name
        assert key.broker_keys, name


def test_overrides_apply_and_parse() -> None:
    config = LogConfig().with_overrides(
        {
            "segment.bytes": " 2048 ",
            "retention.ms": "-1",
            "cleanup.policy": "delete, compact",
            "message.timestamp.type": "LogAppendTime",
            "min.cleanable.dirty.ratio": "0.25",
            "flush.messages": "+3",
        }
    )
    assert config.segment_bytes == 2048
    assert config.retention_ms == -1
    assert config.cleanup_policy == ("compact", "delete")
    assert config.compact and config.delete and config.log_append_time
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.flush_messages == 3
    assert config.to_kafka()["cleanup.policy"] == "compact,delete"
    assert LogConfig().with_overrides({}) == LogConfig()


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("segment.bytes", "13"),
        ("segment.bytes", "2147483648"),
        ("segment.bytes", "1_000"),
        ("segment.bytes", "\u0661\u0662\u0663"),  # non-ASCII digits
        ("segment.bytes", ""),
        ("segment.bytes", "1e6"),
        ("segment.ms", "0"),
        ("segment.index.bytes", "11"),
        ("index.interval.bytes", "-1"),
        ("flush.messages", "0"),
        ("retention.ms", "-2"),
        ("retention.bytes", "9223372036854775808"),
        ("max.compaction.lag.ms", "0"),
        ("min.cleanable.dirty.ratio", "x"),
        ("min.cleanable.dirty.ratio", "-0.1"),
        ("cleanup.policy", ""),
        ("cleanup.policy", "compact,forever"),
        ("message.timestamp.type", "createtime"),
        ("compression.type", "brotli"),
        ("segmentbytes", "1000"),
    ],
)
def test_bad_values_and_keys_name_the_key(name: str, raw: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig().with_overrides({name: raw})
    assert name in str(caught.value)
