"""storage.partition_metadata: Kafka's partition.metadata byte for byte, read as leniently as
Kafka reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.storage.partition_metadata import read_partition_metadata, write_partition_metadata
from tests.storage.conftest import expect_checkpoint_error

TOPIC_ID = "oPbqxUvkSMmsDDmB7Rnxpw"


def test_partition_metadata_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    write_partition_metadata(path, TOPIC_ID)
    # PartitionMetadata.encode(): "version: " + version + "\ntopic_id: " + topicId, no final \n.
    assert path.read_bytes() == b"version: 0\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw"
    assert read_partition_metadata(path) == TOPIC_ID


def test_partition_metadata_lenient_where_kafka_is(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    path.write_bytes(b"version: 0\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw\n")
    assert read_partition_metadata(path) == TOPIC_ID
    path.write_bytes(b"version: 1\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw==\nfuture: field\n")
    assert read_partition_metadata(path) == TOPIC_ID


def test_partition_metadata_missing(tmp_path: Path) -> None:
    assert read_partition_metadata(tmp_path / "partition.metadata") is None


@pytest.mark.parametrize(
    "data,line",
    [
        (b"", 1),
        (b"version: 0\n", 2),
        (b"version: 0", 2),
        (b"version:0\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw", 1),
        (b"version: x\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw", 1),
        (b"version: -1\ntopic_id: oPbqxUvkSMmsDDmB7Rnxpw", 1),
        (b"topic_id: oPbqxUvkSMmsDDmB7Rnxpw\nversion: 0", 1),
        (b"version: 0\ntopicid: oPbqxUvkSMmsDDmB7Rnxpw", 2),
        (b"version: 0\ntopic_id: oPbqxUvkSMmsDDmB7Rnx", 2),
        (b"version: 0\ntopic_id: oPbqxUvkSMmsDDmB7Rnxp+", 2),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2),
    ],
)
def test_partition_metadata_garbage(tmp_path: Path, data: bytes, line: int) -> None:
    path = tmp_path / "partition.metadata"
    path.write_bytes(data)
    expect_checkpoint_error(path, line, read_partition_metadata)


def test_partition_metadata_writer_rejects_bad_ids(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    for bad in ("AAAAAAAAAAAAAAAAAAAAAA", "short", "oPbqxUvkSMmsDDmB7Rnxp/"):
        with pytest.raises(ValueError):
            write_partition_metadata(path, bad)
    assert not path.exists()
