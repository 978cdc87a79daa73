"""Fixtures for the client tests: one broker per module (topics per test), topic names, and
the anyio backends (asyncio, asyncio+uvloop, trio)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess([tmp_path_factory.mktemp("client") / "logs"]) as process:
        yield process


@pytest.fixture
def bootstrap(shared_broker: BrokerProcess) -> str:
    return shared_broker.bootstrap


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (its node id, made legal)."""
    return re.sub(r"[^a-zA-Z0-9._-]", "_", request.node.name)[:200]


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        pytest.param(("trio", {}), id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return request.param
