"""The repository's own test data, in this folder.

``kafka-written/``: segment files written by a real Apache Kafka broker (its README says where
they come from and what each holds). A missing file is a test failure, never a skip: CI must
not pass by running nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def kafka_written_dir() -> Path:
    """The directory of Kafka-written segments (fails the test if it is incomplete)."""
    directory = HERE / "kafka-written"
    if not (directory / "README.md").is_file():
        pytest.fail(f"Kafka-written fixtures missing from {directory}")
    return directory
