"""What the metrics cost on the data path: the same work against a broker with the metrics
endpoint on and one with it off (``metrics.listener=``: nothing is counted), same run.

1. **Produce and consume, records/s**: ``odradek perf produce`` (``num_records`` x 100 B, acks=1,
   6 partitions) then ``odradek perf consume`` of the same topic, against each broker in
   turn, rounds interleaved (one untimed warm-up), medians. The "on" broker is scraped once per
   round while it works, as a Prometheus server would be.
2. **Broker instructions per Produce request** (``instructions``; not in ``--quick``): 1,000
   native Produce requests of 16 KiB batches (``bench.storage.build_batches``) against each
   broker run under callgrind (:mod:`bench.callgrind`), twice: unlike the timed figures these
   repeat to within 0.2 % on a busy machine.

Goal (issue 19): "on" within 3 % of "off".
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import callgrind
from bench.common import Figure, Figures, interleaved, json_line, median
from bench.fetch import produce_batches
from bench.storage import Params as StorageParams
from bench.storage import build_batches
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "metrics on vs off: produce, consume and broker instructions per request (same run)"

Say = Callable[[str], None]
_OFF = ["metrics.listener="]


@dataclass(frozen=True)
class Params:
    num_records: int = 2_000_000
    record_bytes: int = 100
    partitions: int = 6
    repeats: int = 5
    instructions: bool = True
    instruction_requests: int = 1000

    @classmethod
    def quick(cls) -> Params:
        return cls(num_records=200_000, repeats=2, instructions=False)


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    figures = Figures()
    say(f"perf produce/consume: {params.num_records:,} x {params.record_bytes} B, "
        f"{params.repeats} rounds + 1 warm-up")  # fmt: skip
    with (
        BrokerProcess([scratch / "on"]) as on,
        BrokerProcess([scratch / "off"], overrides=_OFF) as off,
    ):
        assert on.metrics_port is not None and off.metrics_port is None
        topics: dict[str, str] = {}  # broker name -> the topic its last produce round wrote
        rounds = itertools.count()

        def perf(broker: BrokerProcess, action: str) -> float:
            name = "on" if broker is on else "off"
            if action == "produce":  # a fresh topic per round, read back by the consume round
                topics[name] = f"metrics-{name}-{next(rounds)}"
                with Wire(broker.port) as wire:  # type: ignore[arg-type]
                    wire.create_topic(topics[name], partitions=params.partitions)
            topic = topics[name]
            command = [sys.executable, "-m", "odradek.cli.main", "perf", action, "--json",
                       "--bootstrap-server", broker.bootstrap, "--topic", topic,
                       "--num-records", str(params.num_records)]  # fmt: skip
            if action == "produce":
                command += ["--record-size", str(params.record_bytes), "--acks", "1"]
            scraper = _Scraper(on) if broker is on else None
            try:
                return json_line(command, f"perf {action} ({name})")["records_per_s"]
            finally:
                if scraper is not None:
                    scraper.stop()

        samples = interleaved(
            {
                "produce off": functools.partial(perf, off, "produce"),
                "produce on": functools.partial(perf, on, "produce"),
                "consume off": functools.partial(perf, off, "consume"),
                "consume on": functools.partial(perf, on, "consume"),
            },
            params.repeats,
            warmup=1,
        )
    for action in ("produce", "consume"):
        off_values, on_values = samples[f"{action} off"], samples[f"{action} on"]
        base = figures.add(
            f"{action}, metrics off",
            median(off_values),
            "records/s",
            samples=off_values,
            is_baseline=True,
            note="odradek perf, metrics.listener= (nothing counted)",
        ).name
        figures.add(
            f"{action}, metrics on",
            median(on_values),
            "records/s",
            baseline=base,
            samples=on_values,
            note="scraped once per round meanwhile; goal >= 0.97",
        )
    if params.instructions:
        _instructions(params, scratch, figures, say)
    return figures.items


class _Scraper:
    """Scrapes ``broker``'s endpoint once, on a thread, while a workload runs."""

    def __init__(self, broker: BrokerProcess) -> None:
        url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
        self.error: BaseException | None = None

        def scrape() -> None:
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    if b"odradek_topic_records_in_total" not in response.read():
                        raise RuntimeError("the scrape lacks odradek_topic_records_in_total")
            except BaseException as exc:  # reported by stop()
                self.error = exc

        self.thread = threading.Thread(target=scrape, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.thread.join(30)
        if self.error is not None:
            raise RuntimeError(f"scrape failed: {self.error!r}")


def _instructions(params: Params, scratch: Path, figures: Figures, say: Say) -> None:
    if not callgrind.available():
        say("instructions: skipped, valgrind is not installed (apt-get install valgrind)")
        return
    batches, _per_batch = build_batches(StorageParams())
    count = params.instruction_requests
    say(f"instructions: {count:,} produce requests per round, brokers under callgrind")
    counts: dict[str, list[float]] = {}
    for name, overrides in (("off", _OFF), ("on", [])):
        with callgrind.CallgrindBroker(
            [scratch / f"cg-{name}"], scratch / f"cg-out-{name}", overrides
        ) as cg:
            values = counts[name] = []
            for round_ in range(2):
                topic = f"instructions-{round_}"
                with Wire(cg.port) as wire:
                    wire.create_topic(topic, partitions=1)
                    produce_batches(wire, topic, batches, 50, 32)  # warm-up

                    def work(wire: Wire = wire, topic: str = topic) -> None:
                        produce_batches(wire, topic, batches, count, 32)

                    values.append(cg.instructions(work) / count)
    base = figures.add(
        "broker instructions per Produce request, metrics off",
        median(counts["off"]),
        "instructions",
        samples=counts["off"],
        is_baseline=True,
        note=f"callgrind, {count:,} requests x 2",
    ).name
    figures.add(
        "broker instructions per Produce request, metrics on",
        median(counts["on"]),
        "instructions",
        baseline=base,
        samples=counts["on"],
        note="lower is better; goal <= 1.03",
    )
