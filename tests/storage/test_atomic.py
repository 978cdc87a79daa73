"""storage.atomic: the old or the new file, whole, whatever step fails or crashes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from odradek.storage.atomic import fsync_directory, write_atomically

ROOT = Path(__file__).resolve().parents[2]


def _run_child(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_creates_a_new_file(tmp_path: Path) -> None:
    target = tmp_path / "state"
    write_atomically(target, b"hello\n")
    assert target.read_bytes() == b"hello\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_replaces_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"old contents that are longer")
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert not (tmp_path / "state.tmp").exists()


def test_empty_and_large_payloads(tmp_path: Path) -> None:
    target = tmp_path / "state"
    write_atomically(target, b"")
    assert target.read_bytes() == b""
    big = os.urandom(3 * 1024 * 1024 + 7)
    write_atomically(target, big)
    assert target.read_bytes() == big


def test_steps_happen_in_the_crash_safe_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"old")
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        events.append(f"fsync-{kind}")
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        # The data is complete in the .tmp before the rename, and the old file still intact.
        assert Path(src).read_bytes() == b"new contents"
        assert Path(dst).read_bytes() == b"old"
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomically(target, b"new contents")
    assert events == ["fsync-file", "replace", "fsync-dir"]


@pytest.mark.parametrize("failing", ["write", "fsync", "replace"])
def test_a_failed_step_keeps_the_old_file_and_removes_the_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"old")

    def boom(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, boom)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_a_crash_before_the_rename_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"old")
    child = _run_child(
        f"""
        import os
        from pathlib import Path
        from odradek.storage.atomic import write_atomically
        os.replace = lambda src, dst: os._exit(17)   # the process dies right before the rename
        write_atomically(Path({str(target)!r}), b"new")
        """
    )
    assert child.returncode == 17, child.stderr
    assert target.read_bytes() == b"old"
    assert (tmp_path / "state.tmp").read_bytes() == b"new"  # garbage nobody reads
    write_atomically(target, b"newer")  # the next write reuses the stale .tmp
    assert target.read_bytes() == b"newer"
    assert not (tmp_path / "state.tmp").exists()


def test_a_crash_in_the_middle_of_the_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"old")
    child = _run_child(
        f"""
        import os
        from pathlib import Path
        from odradek.storage.atomic import write_atomically
        real_write = os.write
        def write(fd, data):
            real_write(fd, bytes(data[: len(data) // 2]))
            os._exit(17)
        os.write = write
        write_atomically(Path({str(target)!r}), b"0123456789")
        """
    )
    assert child.returncode == 17, child.stderr
    assert target.read_bytes() == b"old"
    assert (tmp_path / "state.tmp").read_bytes() == b"01234"


def test_fsync_directory(tmp_path: Path) -> None:
    fsync_directory(tmp_path)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADirectoryError):
        fsync_directory(tmp_path / "file")
    with pytest.raises(FileNotFoundError):
        fsync_directory(tmp_path / "missing")
