"""Start-up time and idle memory: a broker with many partitions after a clean shutdown.

1. ``empty``: a broker on an empty log dir: wall time from ``exec`` to the ``broker started``
   event (interpreter start and imports included) and the broker's own ``startup_ms`` (log
   loading only); then its RSS after ``idle_s`` of idleness.
2. ``N partitions``: ``topics`` x ``partitions_per_topic`` partitions, one small batch each,
   a clean shutdown (SIGTERM: checkpoints and ``.kafka_cleanshutdown``), then the same
   measurements on restart — nothing is rescanned, so the load should grow with the number of
   partitions (open files, map indexes), not with their bytes.

Repeats of 1 and 2 are interleaved; medians; the ``N partitions`` figures name the ``empty``
ones as baselines. Issue #8's goals: start-up under 1 s with 1,000 partitions, idle RSS
under 60 MB.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures, interleaved, median, rss_bytes
from tests.broker.wire import Wire, batch
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "start-up time and idle RSS, empty vs many partitions (clean shutdown)"

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    topics: int = 10
    partitions_per_topic: int = 100
    repeats: int = 5
    idle_s: float = 2.0

    @classmethod
    def quick(cls) -> Params:
        return cls(repeats=2, idle_s=1.0)


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    total = params.topics * params.partitions_per_topic
    many = BrokerProcess([scratch / "many"])
    many.start()
    say(f"creating {total} partitions")
    with Wire(many.port) as wire:  # type: ignore[arg-type]
        for t in range(params.topics):
            wire.create_topic(f"t{t}", partitions=params.partitions_per_topic)
            for p in range(params.partitions_per_topic):
                wire.produce(f"t{t}", p, batch(1, value_bytes=100))
    if many.stop() != 0:
        raise RuntimeError("the broker did not stop cleanly")
    empty = BrokerProcess([scratch / "empty"])
    samples: dict[str, list[tuple[float, float, int]]] = {"empty": [], "many": []}

    def measure(broker: BrokerProcess, key: str) -> float:
        samples[key].append(_start_and_idle(broker, params.idle_s))
        return samples[key][-1][0]

    interleaved(
        {"empty": lambda: measure(empty, "empty"), "many": lambda: measure(many, "many")},
        params.repeats,
    )
    figures = Figures()
    names = {"empty": "empty log dir", "many": f"{total} partitions"}
    metrics = (  # (figure prefix, unit, sample -> value)
        ("start-up, exec to listening", "ms", lambda s: s[0]),
        ("start-up, log loading (startup_ms)", "ms", lambda s: s[1]),
        ("idle RSS", "MiB", lambda s: s[2] / (1 << 20)),
    )
    for prefix, unit, value in metrics:
        base = f"{prefix}, {names['empty']}"
        for key in ("empty", "many"):
            values = [value(sample) for sample in samples[key]]
            figures.add(
                f"{prefix}, {names[key]}",
                median(values),
                unit,
                samples=values,
                is_baseline=key == "empty",
                baseline=base if key == "many" else None,
            )
    return figures.items


def _start_and_idle(broker: BrokerProcess, idle_s: float) -> tuple[float, float, int]:
    """(ms from exec to listening, the broker's startup_ms, RSS bytes after idle_s)."""
    broker.lines.clear()
    started = time.perf_counter()
    broker.start()
    wall_ms = (time.perf_counter() - started) * 1000
    event = broker.events("broker started")[-1]
    if not str(event.get("event", "")).startswith("broker started"):
        raise RuntimeError(f"unexpected start event {event}")
    time.sleep(idle_s)
    rss = rss_bytes(broker.process.pid)  # type: ignore[union-attr]
    if broker.stop() != 0:
        raise RuntimeError("the broker did not stop cleanly")
    return wall_ms, float(event["startup_ms"]), rss
