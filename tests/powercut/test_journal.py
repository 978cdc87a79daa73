"""The rewind rules of the power-cut journal, on a real directory, without FUSE or a broker."""

from __future__ import annotations

import os
import pickle
import random
import shutil
from pathlib import Path

import pytest

from tests.powercut.journal import Journal


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    (tmp_path / "root").mkdir()
    return Journal(tmp_path / "root", tmp_path / "graveyard")


def _create(journal: Journal, path: str, data: bytes = b"", *, sync: bool = False) -> int:
    node, fd = journal.create(path, 0o644, os.O_RDWR)
    try:
        if data:
            journal.write(node, fd, data, 0)
        if sync:
            journal.fsync_file(node)
    finally:
        os.close(fd)
    return node


def _append(journal: Journal, path: str, data: bytes) -> None:
    node = journal.node(path)
    fd = os.open(journal.real(path), os.O_RDWR)
    try:
        journal.write(node, fd, data, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _tree(root: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        found[str(path.relative_to(root))] = None if path.is_dir() else path.read_bytes()
    return found


def test_unsynced_data_and_unsynced_creation_are_both_lost(journal: Journal) -> None:
    _create(journal, "a", b"data", sync=True)  # data durable, name not: rule 2
    report = journal.rewind(random.Random(0))
    assert _tree(journal.root) == {}
    assert report.entries_undone == {"create": 1}


def test_fsynced_data_under_a_fsynced_name_survives_and_the_rest_is_dropped(
    journal: Journal,
) -> None:
    _create(journal, "a", b"durable", sync=True)
    journal.fsync_dir("")
    _append(journal, "a", b" lost")
    journal.rewind(random.Random(0), tear=False)
    assert _tree(journal.root) == {"a": b"durable"}


def test_a_torn_rewind_keeps_a_prefix_of_the_unsynced_writes(journal: Journal) -> None:
    _create(journal, "a", b"base", sync=True)
    journal.fsync_dir("")
    for chunk in (b"1111", b"2222", b"3333"):
        _append(journal, "a", chunk)
    full = b"base111122223333"
    seen = set()
    for seed in range(40):
        copy = pickle.loads(pickle.dumps(journal))  # the same cut, many times
        snapshot = journal.root.parent / f"run{seed}"
        shutil.copytree(journal.root, snapshot)
        copy.root = snapshot
        copy.rewind(random.Random(seed))
        data = (snapshot / "a").read_bytes()
        assert full.startswith(data) and len(data) >= 4, data
        seen.add(len(data))
    assert len(seen) > 3, f"the tear point never moved: {seen}"


def test_an_overwrite_is_undone_to_the_old_bytes(journal: Journal) -> None:
    node = _create(journal, "a", b"0123456789", sync=True)
    journal.fsync_dir("")
    fd = os.open(journal.real("a"), os.O_RDWR)
    journal.write(node, fd, b"XY", 3)
    journal.truncate(node, 6, fd)
    os.close(fd)
    assert (journal.root / "a").read_bytes() == b"012XY5"
    journal.rewind(random.Random(0), tear=False)
    assert (journal.root / "a").read_bytes() == b"0123456789"


def test_an_unsynced_rename_is_undone_and_the_replaced_file_comes_back(journal: Journal) -> None:
    _create(journal, "cp", b"old", sync=True)
    journal.fsync_dir("")
    _create(journal, "cp.tmp", b"new", sync=True)
    journal.rename("cp.tmp", "cp")
    assert _tree(journal.root) == {"cp": b"new"}
    report = journal.rewind(random.Random(0))
    assert _tree(journal.root) == {"cp": b"old"}
    assert report.files_revived == 1


def test_a_fsynced_rename_replaces_for_good(journal: Journal) -> None:
    _create(journal, "cp", b"old", sync=True)
    journal.fsync_dir("")
    _create(journal, "cp.tmp", b"new", sync=True)
    journal.rename("cp.tmp", "cp")
    journal.fsync_dir("")
    journal.rewind(random.Random(0))
    assert _tree(journal.root) == {"cp": b"new"}
    assert list(journal.graveyard.iterdir()) == []


def test_an_unsynced_unlink_is_restored_with_its_durable_data(journal: Journal) -> None:
    _create(journal, "seg", b"kept", sync=True)
    journal.fsync_dir("")
    _append(journal, "seg", b"-not-synced")
    journal.unlink("seg")
    assert _tree(journal.root) == {}
    journal.rewind(random.Random(0), tear=False)
    assert _tree(journal.root) == {"seg": b"kept"}


def test_a_new_directory_needs_its_parent_fsynced(journal: Journal) -> None:
    journal.mkdir("p-0", 0o755)
    _create(journal, "p-0/00.log", b"records", sync=True)
    journal.fsync_dir("p-0")  # the segment's entry is durable, the directory's is not
    journal.rewind(random.Random(0))
    assert _tree(journal.root) == {}


def test_with_the_parent_fsynced_the_new_directory_and_its_file_survive(journal: Journal) -> None:
    journal.mkdir("p-0", 0o755)
    _create(journal, "p-0/00.log", b"records", sync=True)
    journal.fsync_dir("p-0")
    journal.fsync_dir("")
    journal.rewind(random.Random(0))
    assert _tree(journal.root) == {"p-0": None, "p-0/00.log": b"records"}


def test_a_durable_directory_rename_carries_its_pending_children(journal: Journal) -> None:
    journal.mkdir("t-0", 0o755)
    journal.fsync_dir("")
    _create(journal, "t-0/x", b"x", sync=True)  # its entry is pending in t-0
    journal.rename("t-0", "t-0.abc-delete")
    journal.fsync_dir("")  # the rename is durable, x's creation is not
    journal.rewind(random.Random(0))
    assert _tree(journal.root) == {"t-0.abc-delete": None}


def test_an_unsynced_rmdir_brings_back_the_directory(journal: Journal) -> None:
    journal.mkdir("gone", 0o755)
    journal.fsync_dir("")
    journal.rmdir("gone")
    journal.rewind(random.Random(0))
    assert _tree(journal.root) == {"gone": None}


def test_a_durable_entry_makes_earlier_changes_of_its_name_durable(journal: Journal) -> None:
    journal.mkdir("a", 0o755)
    journal.mkdir("b", 0o755)
    journal.fsync_dir("")
    _create(journal, "a/x", b"first", sync=True)
    journal.fsync_dir("a")
    journal.rename("a/x", "b/x")  # pending in a and b
    _create(journal, "a/x", b"second", sync=True)  # pending in a
    journal.fsync_dir("a")  # a/x's new creation is durable, so the rename that freed it is too
    journal.fsync_dir("b")
    journal.rewind(random.Random(0))
    assert _tree(journal.root) == {
        "a": None,
        "a/x": b"second",
        "b": None,
        "b/x": b"first",
    }


def test_the_journal_survives_pickling_as_the_fuse_process_hands_it_over(journal: Journal) -> None:
    _create(journal, "a", b"x")
    copy = pickle.loads(pickle.dumps(journal))
    assert copy.pending_entries() == 1 and copy.pending_writes() == 1
    copy.rewind(random.Random(0))
    assert _tree(journal.root) == {}


def test_written_back_keeps_exactly_the_bytes_named(journal: Journal) -> None:
    _create(journal, "a", b"base", sync=True)
    _create(journal, "b", b"", sync=True)
    journal.fsync_dir("")
    for chunk in (b"1111", b"2222"):
        _append(journal, "a", chunk)
        _append(journal, "b", chunk)
    report = journal.rewind(random.Random(0), written_back={"a": 6, "b": None})
    assert _tree(journal.root) == {"a": b"base111122", "b": b"11112222"}
    assert report.writes_torn == 1
