"""The ``__consumer_offsets`` record format (golden bytes from Kafka's schemas) and the replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.groups.offsets import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hashcode,
    partition_for,
)
from odradek.broker.groups.schema import RecordFormatError
from odradek.broker.groups.store import OffsetStore, load
from odradek.protocol.batch_builder import encode_batch
from odradek.storage.config import LogConfig
from odradek.storage.manager import LogManager

# Hand-assembled from OffsetCommitKey.json (v1), OffsetCommitValue.json (v3),
# GroupMetadataKey.json (v2), GroupMetadataValue.json (v3) and ConsumerProtocol v0.
OFFSET_KEY = bytes.fromhex("00010001 670001 7400000003".replace(" ", ""))
OFFSET_VALUE = bytes.fromhex(
    "0003000000000000002affffffff0002 6d64".replace(" ", "") + "0000018bcfe56800"
)
GROUP_KEY = bytes.fromhex("00020001 67".replace(" ", ""))
SUBSCRIPTION = bytes.fromhex("0000000000010001 74ffffffff".replace(" ", ""))
ASSIGNMENT = bytes.fromhex("0000000000010001 74000000020000000000000002ffffffff".replace(" ", ""))
GROUP_VALUE = b"".join(
    (
        bytes.fromhex("0003"),
        b"\x00\x08consumer",
        bytes.fromhex("00000005"),  # generation
        b"\x00\x05range",
        b"\x00\x01m",  # leader
        bytes.fromhex("0000018bcfe56800"),  # currentStateTimestamp
        bytes.fromhex("00000001"),  # one member
        b"\x00\x01m",
        bytes.fromhex("ffff"),  # groupInstanceId: null
        b"\x00\x01c",
        b"\x00\x02/h",
        bytes.fromhex("000493e0"),  # rebalanceTimeout 300000
        bytes.fromhex("0000afc8"),  # sessionTimeout 45000
        len(SUBSCRIPTION).to_bytes(4, "big") + SUBSCRIPTION,
        len(ASSIGNMENT).to_bytes(4, "big") + ASSIGNMENT,
    )
)
TS = 1_700_000_000_000

GROUP = GroupValue(
    protocol_type="consumer",
    generation=5,
    protocol="range",
    leader="m",
    current_state_timestamp_ms=TS,
    members=(
        MemberValue(
            member_id="m",
            client_id="c",
            client_host="/h",
            rebalance_timeout_ms=300_000,
            session_timeout_ms=45_000,
            topics=("t",),
            assignment={"t": [0, 2]},
        ),
    ),
)


def test_golden_bytes_encode_and_decode() -> None:
    assert encode_offset_key(OffsetKey("g", "t", 3)) == OFFSET_KEY
    assert encode_offset_value(OffsetValue(42, -1, "md", TS)) == OFFSET_VALUE
    assert encode_group_key(GroupKey("g")) == GROUP_KEY
    assert encode_group_value(GROUP) == GROUP_VALUE
    assert decode_key(OFFSET_KEY) == OffsetKey("g", "t", 3)
    assert decode_key(GROUP_KEY) == GroupKey("g")
    assert decode_offset_value(OFFSET_VALUE) == OffsetValue(42, -1, "md", TS)
    assert decode_group_value(GROUP_VALUE) == GROUP


def test_older_versions_decode() -> None:
    v0_key = bytes.fromhex("0000") + OFFSET_KEY[2:]
    assert decode_key(v0_key) == OffsetKey("g", "t", 3)
    # OffsetCommitValue v1: offset, metadata, commitTimestamp, expireTimestamp
    v1 = bytes.fromhex("0001000000000000000700000000018bcfe56800ffffffffffffffff")
    assert decode_offset_value(v1) == OffsetValue(7, -1, "", TS)
    assert decode_key(bytes.fromhex("0004") + b"\x00\x01g") is None  # KIP-848 record: skipped


@pytest.mark.parametrize(
    "data", [OFFSET_VALUE[:-1], OFFSET_VALUE + b"\x00", bytes.fromhex("0009") + OFFSET_VALUE[2:]]
)
def test_malformed_values_are_errors(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_offset_value(data)


def test_java_hashcode_and_partition() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert java_string_hashcode("é😀") == (0xE9 * 31 + 0xD83D) * 31 + 0xDE00  # UTF-16 units


# -- replay ------------------------------------------------------------------------------------


class Clock:
    def __call__(self) -> int:
        return TS


def manager_at(path: Path) -> LogManager:
    manager = LogManager([path], LogConfig(), node_id=1, clock_ms=Clock())
    manager.startup()
    return manager


def append(manager: LogManager, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
    log = manager.partitions.get_log("__consumer_offsets", partition)
    return log.append(encode_batch([(k, v, TS) for k, v in records]), now_ms=TS).first_offset


def test_replay_rebuilds_offsets_and_groups(tmp_path: Path) -> None:
    manager = manager_at(tmp_path / "logs")
    manager.create_topic("__consumer_offsets", 3, {"cleanup.policy": "compact"})
    key = lambda g, p: encode_offset_key(OffsetKey(g, "t", p))  # noqa: E731
    value = lambda o: encode_offset_value(OffsetValue(o, -1, "", TS))  # noqa: E731
    append(manager, 0, [(key("g", 0), value(5)), (key("g", 1), value(6))])
    append(manager, 0, [(key("g", 0), value(9))])  # a later commit wins
    append(manager, 0, [(key("g", 1), None)])  # a tombstone deletes
    append(manager, 1, [(GROUP_KEY, GROUP_VALUE), (key("h", 0), b"\x00\x09garbage")])
    append(manager, 2, [(key("gone", 0), value(1)), (encode_group_key(GroupKey("gone")), None)])
    append(manager, 2, [(key("gone", 0), None)])
    manager.shutdown()

    manager = manager_at(tmp_path / "logs")  # a fresh process reading the same files
    loaded = load(manager)
    assert {g: {tp: c.value.offset for tp, c in o.items()} for g, o in loaded.offsets.items()} == {
        "g": {("t", 0): 9}
    }
    assert loaded.offsets["g"][("t", 0)].record_offset == 2
    assert loaded.groups == {"g": GROUP}
    assert loaded.records == 9 and loaded.skipped == 1  # the undecodable value
    manager.shutdown()


def test_store_keeps_the_later_record() -> None:
    store = OffsetStore()
    store.apply("g", [(("t", 0), OffsetValue(10), None)], first_record_offset=5)
    store.apply("g", [(("t", 0), OffsetValue(3), None)], first_record_offset=4)  # durable late
    assert store.committed("g")[("t", 0)].value.offset == 10
    store.remove("g", [("t", 0)], tombstone_offset=5)  # older than the entry: no effect
    assert ("t", 0) in store.committed("g")
    store.remove("g", [("t", 0)], tombstone_offset=6)
    assert store.committed("g") == {} and store.groups() == []


def test_retention_rules() -> None:
    store = OffsetStore()
    store.apply("g", [(("t", 0), OffsetValue(1, commit_timestamp_ms=100), None)], 0)
    store.apply("g", [(("u", 0), OffsetValue(1, commit_timestamp_ms=100), None)], 1)
    # an Empty group: everything expires retention after it became empty
    assert store.expired("g", 1000, 500, empty_since_ms=600) == []
    assert sorted(store.expired("g", 1100, 500, empty_since_ms=600)) == [("t", 0), ("u", 0)]
    # a Stable group: offsets of unsubscribed topics expire by commit time
    assert store.expired("g", 600, 500, keep_topics=["t"]) == [("u", 0)]
