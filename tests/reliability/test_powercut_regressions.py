"""Each durability bug the power-cut chaos runs found, as the smallest run that shows it.

Every test: a broker on the power-cut file system (:mod:`tests.powercut`), one acknowledged
step, a power cut (SIGKILL, then every change not made durable is taken back, with no torn
writes so the run is the same every time), a restart, and the check that the acknowledged step
is still there.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
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


@pytest.fixture
def start(fs: PowerCutMount) -> Iterator[Callable[..., BrokerProcess]]:
    """``start(log_dirs, overrides=[...])``: a broker, killed at the end if still running
    (before the file system is unmounted)."""
    started: list[BrokerProcess] = []

    def run(log_dirs: list[Path], **kwargs: object) -> BrokerProcess:
        broker = BrokerProcess(log_dirs, **kwargs)  # type: ignore[arg-type]
        started.append(broker)
        return broker.start()

    yield run
    for broker in started:
        broker.kill()


def _power_cut(fs: PowerCutMount, broker: BrokerProcess) -> None:
    assert broker.kill() == -9
    fs.cut(random.Random(0), tear=False)
    broker.lines.clear()
    broker.start()


def test_records_acknowledged_in_a_fresh_log_dir_survive(
    fs: PowerCutMount, start: Callable[..., BrokerProcess]
) -> None:
    """Found by the first power-cut run (cycle 0, a random cut): everything was gone. The log
    dir did not exist, ``LogManager`` made it and never fsynced its parent, so its entry (and
    every partition in it) vanished. Fixed by ``storage.atomic.make_directories``."""
    broker = start([fs.mountpoint / "fresh" / "logs"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        result = wire.produce("t", 0, batch(10), acks=m.ACKS_ALL)
        assert result.error_code == 0
    _power_cut(fs, broker)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert [r.value for r in fetch_all(wire, "t")] == [b"v%d" % i for i in range(10)]
    assert broker.stop() == 0


def test_a_cut_between_a_roll_and_the_next_flush_keeps_the_partition_online(
    fs: PowerCutMount, start: Callable[..., BrokerProcess]
) -> None:
    """Found by the chaos run (seed 12, cycle 24; two producers on one partition): after the
    cut the partition stayed offline, "damaged log ... in a segment other than the last". A
    roll left the rolled segment's last append unsynced (its fsync was only queued), the new
    segment's first append reached the disk, and the loader, seeing valid data after a torn
    entry, took it for damage. Here: the rolled segment keeps 40 of its unsynced bytes, the new
    one all of its first append. Fixed by ``Log.roll`` fsyncing the rolled segment first."""
    broker = start([fs.mountpoint / "logs"], overrides=["log.segment.bytes=1500"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        acked = wire.produce("t", 0, batch(5, tag="a", value_bytes=100), acks=m.ACKS_ALL)
        assert acked.error_code == 0 and acked.base_offset == 0
        unsynced = wire.produce("t", 0, batch(5, tag="b", value_bytes=100), acks=m.ACKS_LEADER)
        assert unsynced.error_code == 0 and unsynced.base_offset == 5
        fs.arm_trip("create", "logs/t-0/*.log", then="write")  # the roll, then its first append
        with pytest.raises((OSError, EOFError)):
            wire.produce("t", 0, batch(5, tag="c", value_bytes=100), acks=m.ACKS_ALL)
    assert broker.process is not None and broker.process.wait(30) == -9
    broker.kill()
    fs.cut(
        random.Random(0),
        tear=False,
        written_back={
            "logs/t-0/00000000000000000000.log": 40,
            "logs/t-0/00000000000000000010.log": None,
        },
    )
    broker.lines.clear()
    broker.start()
    assert not [e for e in broker.lines if e.get("level") == "error"]
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        values = [r.value for r in fetch_all(wire, "t")]
    assert values[:5] == [b"a%d" % i + b"." * 98 for i in range(5)]
    assert broker.stop() == 0
