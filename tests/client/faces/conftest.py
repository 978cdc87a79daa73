"""Fixtures of the shared behaviour suite: one broker per module, and ``face``, the test's
client face (blocking, asyncio, asyncio+uvloop, trio; see :mod:`tests.client.faces.driver`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker_process import BrokerProcess
from tests.client.faces.driver import BACKENDS, Face, open_face

#: a group forms at once, and short sessions are allowed
FAST_GROUPS = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=200"]


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        [tmp_path_factory.mktemp("faces") / "logs"], overrides=FAST_GROUPS
    ) as process:
        yield process


@pytest.fixture(params=list(BACKENDS))
def face(request: pytest.FixtureRequest, bootstrap: str) -> Iterator[Face]:
    with open_face(request.param, bootstrap) as opened:
        yield opened
