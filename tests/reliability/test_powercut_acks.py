"""What each ``acks`` and ``log.flush.*`` setting keeps through a power cut (docs/durability.md).

Each test: a broker on the power-cut file system (:mod:`tests.powercut`), records produced, a
power cut with no torn writes (every byte not fsynced is gone: the worst case, and the same
every run), a restart, and a count of what is left. ``acks=all`` under load, torn writes and
every targeted moment is :mod:`tests.reliability.test_powercut_chaos`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.protocol import messages as m
from odradek.storage.checkpoints import read_offset_checkpoint
from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess, wait_until
from tests.powercut.mount import PowerCutMount

pytestmark = pytest.mark.slow

BATCHES = 50
PER_BATCH = 10


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[PowerCutMount]:
    mount = PowerCutMount(tmp_path / "powercut").mount()
    yield mount
    mount.close()


def _produce_then_cut(
    fs: PowerCutMount, acks: int, overrides: list[str], *, wait_for_flush: bool = False
) -> tuple[int, int]:
    """Produce ``BATCHES`` batches with ``acks``, cut the power; returns (acknowledged records,
    records found after the restart)."""
    broker = BrokerProcess([fs.mountpoint / "logs"], overrides=overrides).start()
    acknowledged = 0
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        for i in range(BATCHES):
            result = wire.produce("t", 0, batch(PER_BATCH, tag=f"b{i}-"), acks=acks)
            assert result.error_code == 0
            acknowledged += PER_BATCH
    if wait_for_flush:  # the recovery point checkpoint lags the flush: once it shows, it ran
        checkpoint = fs.mountpoint / "logs" / "recovery-point-offset-checkpoint"

        def flushed() -> bool:
            return read_offset_checkpoint(checkpoint).get(("t", 0), 0) >= acknowledged

        assert wait_until(flushed, timeout_s=20), "log.flush.interval.ms never flushed"
    assert broker.kill() == -9
    fs.cut(random.Random(0), tear=False)
    broker.lines.clear()
    broker.start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        found = len(fetch_all(wire, "t"))
    assert broker.stop() == 0
    return acknowledged, found


def test_acks_all_keeps_every_acknowledged_record(fs: PowerCutMount) -> None:
    acknowledged, found = _produce_then_cut(fs, m.ACKS_ALL, [])
    assert found == acknowledged == BATCHES * PER_BATCH


def test_acks_1_with_the_default_flush_settings_loses_unflushed_records(fs: PowerCutMount) -> None:
    """The acks=1 window: nothing fsynced these records (no roll, no flush setting)."""
    acknowledged, found = _produce_then_cut(fs, m.ACKS_LEADER, [])
    assert acknowledged == BATCHES * PER_BATCH
    assert found < acknowledged


def test_acks_1_with_flush_interval_messages_1_keeps_every_record(fs: PowerCutMount) -> None:
    """``log.flush.interval.messages=1``: every append is fsynced before its acks=1 answer."""
    overrides = ["log.flush.interval.messages=1"]
    acknowledged, found = _produce_then_cut(fs, m.ACKS_LEADER, overrides)
    assert found == acknowledged


def test_acks_1_keeps_what_log_flush_interval_ms_flushed(fs: PowerCutMount) -> None:
    """``log.flush.interval.ms``: records older than one interval (plus the scheduler's tick)
    are fsynced; once a flush covered them they survive the cut."""
    overrides = [
        "log.flush.interval.ms=100",
        "log.flush.scheduler.interval.ms=50",
        "log.flush.offset.checkpoint.interval.ms=50",
    ]
    acknowledged, found = _produce_then_cut(fs, m.ACKS_LEADER, overrides, wait_for_flush=True)
    assert found == acknowledged
