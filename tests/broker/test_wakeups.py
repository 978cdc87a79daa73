"""An append wakes only the fetches waiting on its partition (issue 14, finding 6).

2,000 long polls parked on an idle topic must cost a producer to another topic nothing: before
the fix every append woke every parked poll (one global event), and each re-read its
partitions and parked again. The broker's CPU time is the measure (``/proc/<pid>/stat``: it
counts the work done, not the wall-clock time the machine's other load adds): the same produce
round trips are timed without and then with the parked polls, in one broker, and may not cost
more than a few times the baseline (before the fix: ~100x). An in-process test of the
wake-up registry checks the targeting itself, deterministically.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import anyio

from odradek.broker.config import load_config
from odradek.broker.context import BrokerContext
from odradek.protocol import messages as m
from tests.broker.wire import Wire, bad_events, batch
from tests.broker_process import BrokerProcess

PARKED_POLLS = 2_000
POLLS_PER_CONNECTION = 250  # under the 256 waiting requests a connection may have
ROUND_TRIPS = 300


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _produce_cpu_s(broker: BrokerProcess, wire: Wire, topic: str) -> float:
    assert broker.process is not None
    one = batch(1)
    before = _cpu_s(broker.process.pid)
    for _ in range(ROUND_TRIPS):
        assert wire.produce(topic, 0, one).error_code == 0
    return _cpu_s(broker.process.pid) - before


def _park(broker: BrokerProcess, topic: str) -> list[Wire]:
    """PARKED_POLLS fetches waiting at the end of ``topic`` (empty), on a few connections."""
    request = m.FetchRequest(
        correlation_id=0,
        max_wait_ms=2**31 - 1,  # capped by fetch.wait.max.ms (30 s): longer than this test
        min_bytes=1,
        topics=[
            m.FetchTopic(
                name=topic, partitions=[m.FetchPartition(partition_index=0, fetch_offset=0)]
            )
        ],
    )
    wires = []
    for _ in range(PARKED_POLLS // POLLS_PER_CONNECTION):
        wire = Wire(broker.port)  # type: ignore[arg-type]
        wires.append(wire)
        for _ in range(POLLS_PER_CONNECTION):
            wire.send(request)
        # answered only once every fetch before it was dispatched (requests start in order)
        assert wire.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0
    return wires


def test_parked_polls_on_an_idle_topic_do_not_slow_another_topics_producer(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    with Wire(broker.port) as producer:  # type: ignore[arg-type]
        producer.create_topic("idle")
        producer.create_topic("busy")
        _produce_cpu_s(broker, producer, "busy")  # warm up
        baseline_s = _produce_cpu_s(broker, producer, "busy")
        parked = _park(broker, "idle")
        try:
            with_polls_s = _produce_cpu_s(broker, producer, "busy")
        finally:
            for wire in parked:
                wire.close()
    print(f"broker CPU for {ROUND_TRIPS} produces: {baseline_s:.3f} s alone, {with_polls_s:.3f} s")
    assert with_polls_s <= 4 * baseline_s + 0.3, (baseline_s, with_polls_s)
    assert bad_events(broker.lines) == []


def test_notify_data_wakes_the_waiters_of_its_partition_only() -> None:
    anyio.run(_wake_ups)


async def _wake_ups() -> None:
    ctx = BrokerContext(load_config(environ={}), manager=None, log=None)  # type: ignore[arg-type]
    idle = [ctx.wait_for_data([("idle", 0)]) for _ in range(PARKED_POLLS)]
    both = ctx.wait_for_data([("idle", 0), ("busy", 3)])
    for _ in range(100):
        ctx.notify_data("busy", 0)
    assert not any(w.event.is_set() for w in [*idle, both])
    ctx.notify_data("busy", 3)
    assert both.event.is_set() and not any(w.event.is_set() for w in idle)
    ctx.forget(both)
    ctx.notify_data("idle", 0)
    assert all(w.event.is_set() for w in idle)
    for waiter in idle:
        ctx.forget(waiter)
    assert ctx._waiters == {}  # nothing left registered
    late = ctx.wait_for_data([("idle", 0)])
    shutdown = ctx.data_event()
    ctx.notify_all()  # deletion, retention: every waiter re-reads
    assert late.event.is_set() and shutdown.is_set()
    with anyio.fail_after(1):
        await late.wait()
