"""storage.meta_properties: Kafka's meta.properties byte for byte, java.util.Properties syntax."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from odradek.storage.meta_properties import (
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from odradek.storage.uuids import new_uuid
from tests.storage.conftest import expect_checkpoint_error

CLUSTER_ID = "J8qXRwI-Qyi2G0guFTiuYw"
DIRECTORY_ID = "Lrwnmu6-Bk6Bi0YHBtjudA"
NOW = datetime(2024, 1, 4, 17, 31, 46, tzinfo=UTC)


def test_meta_properties_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    meta = MetaProperties(node_id=1, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID)
    write_meta_properties(path, meta, now=NOW)
    assert path.read_bytes() == (
        b"#\n"
        b"#Thu Jan 04 17:31:46 UTC 2024\n"
        b"cluster.id=J8qXRwI-Qyi2G0guFTiuYw\n"
        b"directory.id=Lrwnmu6-Bk6Bi0YHBtjudA\n"
        b"node.id=1\n"
        b"version=1\n"
    )
    assert read_meta_properties(path) == meta


def test_meta_properties_date_comment_is_in_utc(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    meta = MetaProperties(node_id=0, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID)
    write_meta_properties(
        path, meta, now=datetime(2023, 12, 31, 23, 5, 9, tzinfo=timezone(timedelta(hours=-3)))
    )
    assert path.read_text().splitlines()[1] == "#Mon Jan 01 02:05:09 UTC 2024"
    write_meta_properties(path, meta)  # the real clock
    assert path.read_text().splitlines()[1].startswith("#")
    assert read_meta_properties(path) == meta


def test_meta_properties_reads_java_properties_syntax(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text(
        "#\n"
        "#Fri Jun 07 06:32:12 UTC 2024\n"
        "! another comment style\n"
        "\n"
        "  version = 1\n"
        "node.id:3\n"
        "cluster.id=J8qXRwI\\\n"
        "    -Qyi2G0guFTiuYw\n"
        "directory.id  Lrwnmu6-Bk6Bi0YHBtjudA\n"
        "some.future.key=ignored\n"
    )
    assert read_meta_properties(path) == MetaProperties(
        node_id=3, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID
    )


def test_meta_properties_escapes_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    odd = " lead=a:b #!\\ tail\tx\u00e9"
    meta = MetaProperties(node_id=2**31 - 1, cluster_id=odd, directory_id=new_uuid())
    write_meta_properties(path, meta, now=NOW)
    assert "cluster.id=\\ lead\\=a\\:b \\#\\!\\\\ tail\\tx\u00e9\n" in path.read_text()
    assert read_meta_properties(path) == meta


def test_meta_properties_missing(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path / "meta.properties") is None


GOOD_META = [
    f"cluster.id={CLUSTER_ID}",
    f"directory.id={DIRECTORY_ID}",
    "node.id=1",
    "version=1",
]


@pytest.mark.parametrize(
    "replace,line,problem",
    [
        ({2: None}, None, "'node.id' is missing"),
        ({3: None}, None, "'version' is missing"),
        ({0: None}, None, "'cluster.id' is missing"),
        ({1: None}, None, "'directory.id' is missing"),
        ({3: None, 2: "broker.id=1"}, None, "'version' is missing"),
        ({2: "node.id=one"}, 5, "node.id"),
        ({2: "node.id=-1"}, 5, "node.id"),
        ({3: "version=0"}, 6, "version"),
        ({3: "version=2"}, 6, "version"),
        ({0: "cluster.id="}, 3, "cluster.id"),
        ({1: "directory.id=not-a-uuid"}, 4, "directory.id"),
        ({1: "directory.id=Lrwnmu6-Bk6Bi0YHBtjud\\u00"}, 4, "escape"),
    ],
)
def test_meta_properties_garbage(
    tmp_path: Path, replace: dict[int, str | None], line: int | None, problem: str
) -> None:
    lines = [replace.get(i, text) for i, text in enumerate(GOOD_META)]
    path = tmp_path / "meta.properties"
    path.write_text("#\n#Thu Jan 04 17:31:46 UTC 2024\n" + "".join(f"{x}\n" for x in lines if x))
    error = expect_checkpoint_error(path, line, read_meta_properties)
    assert problem in str(error)


def test_meta_properties_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_bytes(b"")
    expect_checkpoint_error(path, None, read_meta_properties)


def test_meta_properties_writer_rejects_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    for bad in (
        MetaProperties(node_id=-1, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID),
        MetaProperties(node_id=1, cluster_id="", directory_id=DIRECTORY_ID),
        MetaProperties(node_id=1, cluster_id=CLUSTER_ID, directory_id="nope"),
        MetaProperties(node_id=1, cluster_id=CLUSTER_ID, directory_id=DIRECTORY_ID, version=0),
    ):
        with pytest.raises(ValueError):
            write_meta_properties(path, bad)
    assert not path.exists()
