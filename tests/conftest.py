"""Shared fixtures: a real broker process on loopback with temp log dirs.

Hypothesis runs without its per-example deadline: the machines are shared and a loaded
2-core box makes a 200 ms deadline a coin toss, not a finding. Slowness is measured in
``bench/``, never asserted by tests (docs/architecture.md §10).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.broker.security.certs import make_certs
from tests.broker_process import BrokerProcess

settings.register_profile("odradek", deadline=None)
settings.load_profile("odradek")


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a broker certificate for 127.0.0.1/localhost and client certificates
    (``tests.broker.security.certs``), made once per run for every security test."""
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """``broker_factory(overrides=[...], backend="trio", log_dirs=[...])`` starts a broker;
    every broker started is stopped at the end of the test."""
    started: list[BrokerProcess] = []

    def start(**kwargs: object) -> BrokerProcess:
        log_dirs = kwargs.pop("log_dirs", None) or [tmp_path / f"logs-{len(started)}"]
        process = BrokerProcess(log_dirs, **kwargs)  # type: ignore[arg-type]
        started.append(process)
        return process.start()

    yield start
    for process in started:
        if process.process is not None and process.process.poll() is None:
            process.stop()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()
