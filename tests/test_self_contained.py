"""The repository stands alone: a clone with nothing beside it builds, runs and tests.

No tracked file may reach outside the checkout: not the folder of design notes that sits
beside it on the build machines, nor an absolute path of any machine it was built on
(including wherever this checkout is now).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.broker_process import REPO

# Spelled in pieces so that this file does not match itself.
OUTSIDE = [
    "../" + "shared",
    "/" + "work/",
    "/" + "home/",
    "/" + "Users/",
    "/" + "root/",
]


def _tracked_files() -> list[Path]:
    if (REPO / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout
        return [REPO / name for name in listed.decode().split("\0") if name]
    # an unpacked sdist: every file but build output
    skip = {".venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}
    return [p for p in REPO.rglob("*") if p.is_file() and not skip & set(p.parts)]


def test_no_tracked_file_names_a_path_outside_the_repository() -> None:
    needles = [*OUTSIDE, str(REPO), str(REPO.parent) + "/"]
    files = _tracked_files()
    assert len(files) > 200, f"only {len(files)} files found"
    offenders = []
    for path in files:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (segments written by Kafka, images)
        text = data.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), 1):
            found = [n for n in needles if n in line]
            if found:
                offenders.append(f"{path.relative_to(REPO)}:{number}: {found} in {line.strip()!r}")
    assert not offenders, "\n".join(offenders)


def test_the_kafka_written_fixtures_are_in_the_repository() -> None:
    from tests.testdata import kafka_written_dir

    directory = kafka_written_dir()
    assert directory.is_relative_to(REPO)
    assert sorted(p.name for p in directory.glob("*.log")) == [
        "cluster-metadata-a.log",
        "cluster-metadata-b.log",
    ]
