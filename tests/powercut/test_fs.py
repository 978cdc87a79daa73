"""The power-cut file system mounted for real: what the broker needs works through it, and a cut
takes back exactly what was not made durable."""

from __future__ import annotations

import mmap
import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.powercut.mount import PowerCutMount


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[PowerCutMount]:
    mount = PowerCutMount(tmp_path).mount()
    yield mount
    mount.close()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_mmap_writes_and_sendfile_reads_work_through_the_mount(fs: PowerCutMount) -> None:
    path = fs.mountpoint / "00.index"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.ftruncate(fd, 8192)  # preallocated, as an index is
        with mmap.mmap(fd, 8192) as mapped:
            mapped[4096:4100] = b"MMAP"
        os.pwrite(fd, b"segment bytes", 0)
        a, b = socket.socketpair()
        with a, b:
            assert os.sendfile(a.fileno(), fd, 0, 13) == 13
            assert b.recv(64) == b"segment bytes"
    finally:
        os.close(fd)
    assert (fs.backing / "00.index").read_bytes()[4096:4100] == b"MMAP"


def test_a_cut_keeps_what_was_fsynced_and_drops_the_rest(fs: PowerCutMount) -> None:
    part = fs.mountpoint / "t-0"
    part.mkdir()
    _fsync_dir(fs.mountpoint)
    fd = os.open(part / "00.log", os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"acknowledged")
    os.fsync(fd)
    _fsync_dir(part)
    os.write(fd, b"-in-flight")
    os.close(fd)
    (part / "checkpoint").write_bytes(b"never synced")
    (fs.mountpoint / "new-dir").mkdir()
    report = fs.cut(random.Random(1), tear=False)
    assert sorted(p.name for p in fs.mountpoint.iterdir()) == ["t-0"]
    assert sorted(p.name for p in part.iterdir()) == ["00.log"]
    assert (part / "00.log").read_bytes() == b"acknowledged"
    assert report.entries_undone == {"create": 1, "mkdir": 1}


def test_the_trip_wire_kills_the_writer_right_after_the_matching_step(
    fs: PowerCutMount, tmp_path: Path
) -> None:
    report = fs.arm_trip("rename", "*.ready", skip=1)
    script = (
        "import os, sys\n"
        "root = sys.argv[1]\n"
        "for i in range(5):\n"
        "    open(f'{root}/{i}.tmp', 'wb').close()\n"
        "    os.rename(f'{root}/{i}.tmp', f'{root}/{i}.ready')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(fs.mountpoint)], check=False)
    assert done.returncode == -9
    assert sorted(p.name for p in fs.mountpoint.iterdir()) == ["0.ready", "1.ready"]
    assert "1.ready" in report.read_text()
