"""Mount the power-cut file system for a test, and cut the power under it.

Layout under the test's ``base`` directory::

    backing/     the real files (what a disk would hold)
    graveyard/   unlinked files whose unlink is not durable yet (the journal's)
    mnt/         the FUSE mount: give this to the broker as ``log.dirs`` (or a folder in it)
    journal.pickle   the journal, written by the FUSE process when it is unmounted

A power cut (:meth:`PowerCutMount.cut`), once whoever wrote through the mount is dead:

1. unmount (the kernel writes back dirty ``mmap`` pages first, as further pending writes);
2. wait for the FUSE process to exit, and load the journal it wrote;
3. rewind the backing directory to what was durable (:meth:`Journal.rewind`);
4. mount again, with a fresh journal: everything on the backing directory now is durable.

FUSE must work here: without ``/dev/fuse`` or ``fusermount3`` :func:`require_fuse` raises, so a
power-cut test fails loudly instead of skipping (``make install`` installs Debian's ``fuse3``).
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from tests.powercut.journal import Journal, RewindReport

__all__ = ["PowerCutMount", "require_fuse"]

REPO = Path(__file__).resolve().parents[2]


def require_fuse() -> None:
    """Raise unless this machine can mount a FUSE file system."""
    if not Path("/dev/fuse").exists():
        raise RuntimeError("power-cut tests need FUSE: /dev/fuse is missing")
    if shutil.which("fusermount3") is None:
        raise RuntimeError("power-cut tests need fuse3 (fusermount3): `make install` adds it")


class PowerCutMount:
    def __init__(self, base: Path) -> None:
        require_fuse()
        self.base = Path(base)
        self.backing = self.base / "backing"
        self.graveyard = self.base / "graveyard"
        self.mountpoint = self.base / "mnt"
        self.journal_path = self.base / "journal.pickle"
        for path in (self.backing, self.graveyard, self.mountpoint):
            path.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None
        self.cuts = 0

    def mount(self, timeout_s: float = 20.0) -> PowerCutMount:
        self.journal_path.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.powercut.fs",
                str(self.backing),
                str(self.graveyard),
                str(self.mountpoint),
                str(self.journal_path),
            ],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stderr=open(self.base / "fs.log", "ab"),  # noqa: SIM115 - the child owns it
        )
        deadline = time.monotonic() + timeout_s
        while not os.path.ismount(self.mountpoint):  # no event to wait on: poll the kernel
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the power-cut file system did not mount on {self.mountpoint}: "
                    + (self.base / "fs.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.01)
        return self

    def arm_trip(self, kind: str, glob: str, skip: int = 0, then: str | None = None) -> Path:
        """Cut the power right after the ``skip+1``-th matching change (or, with ``then``, the
        next change of that kind to the same file: :mod:`tests.powercut.fs`); returns the file
        that gets a line when it trips."""
        if self.process is None:
            raise RuntimeError("not mounted")
        report = self.base / "tripped.jsonl"
        report.unlink(missing_ok=True)
        spec = {"kind": kind, "glob": glob, "skip": skip, "then": then, "report": str(report)}
        trip = self.journal_path.with_name(self.journal_path.name + ".trip")
        trip.write_text(json.dumps(spec))
        self.process.send_signal(signal.SIGUSR1)
        return report

    def unmount(self, timeout_s: float = 60.0) -> Journal:
        """Unmount and return the journal of everything written since the mount."""
        process = self.process
        if process is None:
            raise RuntimeError("not mounted")
        subprocess.run(["fusermount3", "-u", str(self.mountpoint)], check=True)
        process.wait(timeout_s)
        self.process = None
        with open(self.journal_path, "rb") as f:
            journal: Journal = pickle.load(f)
        return journal

    def cut(
        self,
        rng: random.Random,
        *,
        tear: bool = True,
        written_back: Mapping[str, int | None] | None = None,
    ) -> RewindReport:
        """A power cut: unmount, rewind the backing directory, mount again (module docstring).
        Whatever wrote through the mount must be dead already. ``written_back``: see
        :meth:`Journal.rewind`."""
        report = self.unmount().rewind(rng, tear=tear, written_back=written_back)
        self.cuts += 1
        self.mount()
        return report

    def close(self) -> None:
        """Unmount if mounted (a clean stop: nothing is rewound)."""
        if self.process is not None:
            try:
                self.unmount()
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                subprocess.run(["fusermount3", "-uz", str(self.mountpoint)], check=False)
                self.process.kill()
                self.process = None

    def __enter__(self) -> PowerCutMount:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.close()
