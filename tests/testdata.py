"""Where the shared test data lives: ``../shared/testdata`` beside the checkout.

The segments in ``kafka-written/`` were written by a real Apache Kafka broker. A missing
directory is a test failure, never a skip: CI must not pass by running nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]
_CANDIDATES = [
    _REPO.parent / "shared" / "testdata" / "kafka-written",
    Path("/work/shared/testdata/kafka-written"),
]


def kafka_written_dir() -> Path:
    """The directory of Kafka-written segments (fails the test if it cannot be found)."""
    for candidate in _CANDIDATES:
        if (candidate / "README.md").is_file():
            return candidate
    pytest.fail(f"Kafka-written fixtures not found in any of {[str(c) for c in _CANDIDATES]}")
