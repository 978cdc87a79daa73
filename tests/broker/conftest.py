"""Fixtures for the broker tests: a broker shared by a module, fresh connections, topic names."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for every test of a module that only needs *a* broker (topics per test)."""
    process = BrokerProcess([tmp_path_factory.mktemp("shared") / "logs"])
    process.start()
    yield process
    if process.process is not None and process.process.poll() is None:
        assert process.stop() == 0


@pytest.fixture
def wire(shared_broker: BrokerProcess) -> Iterator[Wire]:
    with Wire(shared_broker.port) as connection:  # type: ignore[arg-type]
        yield connection


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (its node id, made legal)."""
    return re.sub(r"[^a-zA-Z0-9._-]", "_", request.node.name)[:200]
