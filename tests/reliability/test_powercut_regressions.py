"""Each durability bug the power-cut chaos runs found, as the smallest run that shows it.

Every test: a broker on the power-cut file system (:mod:`tests.powercut`), one acknowledged
step, a power cut (SIGKILL, then every change not made durable is taken back, with no torn
writes so the run is the same every time), a restart, and the check that the acknowledged step
is still there.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.protocol import messages as m
from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess
from tests.powercut.mount import PowerCutMount

pytestmark = pytest.mark.slow


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[PowerCutMount]:
    mount = PowerCutMount(tmp_path / "powercut").mount()
    yield mount
    mount.close()


def _power_cut(fs: PowerCutMount, broker: BrokerProcess) -> None:
    assert broker.kill() == -9
    fs.cut(random.Random(0), tear=False)
    broker.lines.clear()
    broker.start()


def test_records_acknowledged_in_a_fresh_log_dir_survive(fs: PowerCutMount) -> None:
    """Found by the first power-cut run (cycle 0, a random cut): everything was gone. The log
    dir did not exist, ``LogManager`` made it and never fsynced its parent, so its entry (and
    every partition in it) vanished. Fixed by ``storage.atomic.make_directories``."""
    broker = BrokerProcess([fs.mountpoint / "fresh" / "logs"]).start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        result = wire.produce("t", 0, batch(10), acks=m.ACKS_ALL)
        assert result.error_code == 0
    _power_cut(fs, broker)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert [r.value for r in fetch_all(wire, "t")] == [b"v%d" % i for i in range(10)]
    assert broker.stop() == 0
