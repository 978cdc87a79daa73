"""End to end through the public client: both faces' throughput and produce-to-consume
latency, against issue 18's targets and, in the same run, against the client of another
commit (``baseline_rev``: the commit before the work being measured).

One broker process (this checkout's, ``num.partitions`` = ``partitions``); every client runs
in its own process, as an application would. Per round, for this commit's client and then the
baseline's (rounds interleave them, so the machine's noise falls on both alike):

1. ``Producer`` / ``Consumer`` (blocking): ``odradek perf produce`` (one ``send()`` per
   record, acks=1, ``num_records`` records of ``record_bytes``) then ``odradek perf consume``
   (iterating every record) of that topic, each commit's own command.
2. ``AsyncProducer`` / ``AsyncConsumer``: the same through the async faces
   (``bench/e2e_clients.py``: ``await send()`` per record; ``getmany`` until all are read).
3. This commit only: ``Producer, acks=all`` (against acks=1), ``raw produce`` (pre-built
   16 KiB batches over the native protocol, 64 requests in flight: what the broker ingests
   when the client costs nothing) and ``raw fetch reader`` (back-to-back 8 MiB Fetches:
   ``bench.fetch``), the broker's ceilings.

Then latency, once per client: a producer process paced at ``latency_rate`` records/s
(``linger_ms`` 0, acks=1) stamps each value with ``time.time_ns()``; a consumer process of the
same commit takes ``now - stamp`` for each record (p50/p99/p99.9; the floor: an ApiVersions
round trip), after ``latency_warmup_s`` of records it does not count.
Each figure of this commit is listed against the baseline commit's and against
the target (ratio = value / target; for latency, below 1 meets it).

The baseline client is built from ``baseline_rev`` in a temporary git worktree with its own
virtual environment (its C extensions compiled by ``pip install -e``; the dependencies are
this environment's), or taken from ``baseline_python`` (an interpreter with that commit
installed). Without either, the baseline rows are left out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures, Stopwatch, median
from bench.fetch import Params as FetchParams
from bench.fetch import fill_partition, read_partition
from odradek.protocol import messages as m
from tests.broker.wire import Wire
from tests.broker_process import REPO, BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = (
    "both client faces' throughput and produce-to-consume latency, against targets and a baseline"
)
TARGET_PRODUCE = 2_000_000  # records/s (issue 18)
TARGET_CONSUME = 3_000_000  # records/s
TARGET_P99_MS = 3.0

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    num_records: int = 2_000_000
    record_bytes: int = 100
    partitions: int = 6
    raw_bytes: int = 256 << 20
    repeats: int = 3
    latency_rate: int = 50_000  # records/s
    latency_seconds: float = 10.0
    latency_warmup_s: float = 2.0  # sent first and not counted (bench/e2e_clients.py)
    pings: int = 2_000
    baseline_rev: str = ""  # e.g. the merge-base of the work being measured
    baseline_python: str = ""  # or an interpreter that has the baseline installed

    @classmethod
    def quick(cls) -> Params:
        return cls(
            num_records=300_000, raw_bytes=64 << 20, repeats=1, latency_seconds=3.0, pings=500
        )


class _Client:
    """One commit's client, run as processes: ``odradek perf`` and ``e2e_clients.py``."""

    def __init__(self, label: str, python: str, cwd: Path, script: Path) -> None:
        self.label = label
        self.python = python
        self.cwd = cwd  # this checkout for this commit; elsewhere for a baseline
        self.script = script

    def _run(self, *args: str) -> dict[str, float]:
        """Run the client; its JSON summary, plus ``cpu_s``: the process's CPU time (user +
        system, its own threads and children included)."""
        before = os.times()
        done = subprocess.run(
            [self.python, *args], capture_output=True, text=True, cwd=self.cwd, check=False
        )
        after = os.times()
        if done.returncode != 0:
            raise RuntimeError(f"{self.label}: {' '.join(args)} failed: {done.stderr[-2000:]}")
        summary: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
        summary["cpu_s"] = (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
        return summary

    def start_cpu_s(self) -> float:
        """The CPU time of starting a client process that imports the client and does
        nothing (subtracted from each run's)."""
        code = "import json, anyio, odradek.client; print(json.dumps({}))"
        return min(self._run("-c", code)["cpu_s"] for _ in range(3))

    def perf(
        self, action: str, bootstrap: str, topic: str, params: Params, *extra: str
    ) -> dict[str, float]:
        return self._run(
            "-m", "odradek.cli.main", "perf", action, "--bootstrap-server", bootstrap,
            "--topic", topic, "--num-records", str(params.num_records), "--json", *extra,
        )  # fmt: skip

    def faces(self, command: str, bootstrap: str, topic: str, *args: object) -> dict[str, float]:
        return self._run(str(self.script), command, bootstrap, topic, *map(str, args))


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    script = scratch / "e2e_clients.py"  # outside any checkout: each interpreter imports its own
    shutil.copy(Path(__file__).with_name("e2e_clients.py"), script)
    clients = [_Client("this commit", sys.executable, REPO, script)]
    worktree = None
    if params.baseline_python or params.baseline_rev:
        label = params.baseline_rev or "baseline"
        python = params.baseline_python
        if not python:
            worktree = scratch / "baseline"
            python = _build(params.baseline_rev, worktree, say)
        clients.append(_Client(label, python, scratch, script))
    broker = BrokerProcess(
        [scratch / "logs"], overrides=[f"num.partitions={params.partitions}"]
    ).start()
    bootstrap = broker.bootstrap
    samples: dict[str, list[float]] = defaultdict(list)
    start_cpu_s = [client.start_cpu_s() for client in clients]
    try:
        for round_ in range(params.repeats):
            say(f"round {round_ + 1}/{params.repeats}")
            fill = FetchParams(data_bytes=params.raw_bytes)
            with Stopwatch() as watch:
                records = fill_partition(broker.port, f"raw-{round_}", fill)  # type: ignore[arg-type]
            samples["raw produce"].append(records / watch.seconds)
            for i, client in enumerate(clients):
                topic = f"c{i}-{round_}"
                n, size, faces = params.num_records, params.record_bytes, client.faces
                for face, summary in (
                    ("Producer", client.perf("produce", bootstrap, topic, params)),
                    ("Consumer", client.perf("consume", bootstrap, topic, params)),
                    ("AsyncProducer", faces("async-produce", bootstrap, f"{topic}-a", n, size)),
                    ("AsyncConsumer", faces("async-consume", bootstrap, f"{topic}-a", n)),
                ):  # fmt: skip
                    samples[f"{i} {face}"].append(summary["records_per_s"])
                    cpu_ns = (summary["cpu_s"] - start_cpu_s[i]) / n * 1e9
                    samples[f"{i} {face} cpu"].append(cpu_ns)
            all_topic = f"all-{round_}"
            acks_all = clients[0].perf("produce", bootstrap, all_topic, params, "--acks", "all")
            samples["acks=all"].append(acks_all["records_per_s"])
            with Stopwatch() as watch:
                read_partition(broker.port, f"raw-{round_}", records, 8 << 20)  # type: ignore[arg-type]
            samples["raw fetch"].append(records / watch.seconds)
        latencies = {}
        for i, client in enumerate(clients):
            say(f"latency ({client.label}) at {params.latency_rate} records/s")
            latencies[i] = client.faces(
                "latency", bootstrap, f"latency-{i}", params.latency_rate,
                params.latency_seconds, params.record_bytes, params.latency_warmup_s,
            )  # fmt: skip
        pings_ms = _pings(broker.port, params.pings)  # type: ignore[arg-type]
    finally:
        broker.stop()
        if worktree is not None:
            remove = ["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)]
            subprocess.run(remove, check=False)
    return _figures(params, clients, samples, latencies, pings_ms).items


def _figures(
    params: Params,
    clients: list[_Client],
    samples: dict[str, list[float]],
    latencies: dict[int, dict[str, float]],
    pings_ms: list[float],
) -> Figures:
    figures = Figures()
    add = figures.add
    base = clients[1].label if len(clients) > 1 else None
    note = f"{params.num_records:,} x {params.record_bytes} B, {params.partitions} partitions"
    add("raw produce, pre-built batches", median(samples["raw produce"]), "records/s",
        samples=samples["raw produce"], is_baseline=True)  # fmt: skip
    add("raw fetch reader", median(samples["raw fetch"]), "records/s",
        samples=samples["raw fetch"], is_baseline=True)  # fmt: skip
    add("target: produce", TARGET_PRODUCE, "records/s", is_baseline=True, note="issue 18")
    add("target: consume", TARGET_CONSUME, "records/s", is_baseline=True, note="issue 18")
    for face, target in (
        ("Producer", "target: produce"),
        ("AsyncProducer", "target: produce"),
        ("Consumer", "target: consume"),
        ("AsyncConsumer", "target: consume"),
    ):
        if base is not None:
            add(f"{face} ({base})", median(samples[f"1 {face}"]), "records/s",
                samples=samples[f"1 {face}"], is_baseline=True, note=note)  # fmt: skip
        ours = samples[f"0 {face}"]
        add(face, median(ours), "records/s", samples=ours, note=note,
            baseline=f"{face} ({base})" if base else None)  # fmt: skip
        add(f"{face} ÷ target", median(ours), "records/s", baseline=target)
    for face in ("Producer", "AsyncProducer", "Consumer", "AsyncConsumer"):
        name = f"{face}, CPU per record"
        if base is not None:
            add(f"{name} ({base})", median(samples[f"1 {face} cpu"]), "ns",
                samples=samples[f"1 {face} cpu"], is_baseline=True)  # fmt: skip
        add(name, median(samples[f"0 {face} cpu"]), "ns", samples=samples[f"0 {face} cpu"],
            baseline=f"{name} ({base})" if base else None,
            note="the client process's user + system time, its start-up taken off")  # fmt: skip
    add("Producer, acks=all", median(samples["acks=all"]), "records/s",
        baseline="Producer", samples=samples["acks=all"], note="fsync group commit")  # fmt: skip
    add("ApiVersions round trip, p50", median(pings_ms), "ms", is_baseline=True,
        note="loopback floor")  # fmt: skip
    add("target: latency p99", TARGET_P99_MS, "ms", is_baseline=True, note="issue 18")
    rate = (
        f"{params.latency_rate:,} records/s for {params.latency_seconds:g} s"
        f" after {params.latency_warmup_s:g} s not counted"
    )
    for p in ("p50", "p99", "p99.9"):
        name = f"produce-to-consume latency, {p}"
        if base is not None:
            add(f"{name} ({base})", latencies[1][p], "ms", is_baseline=True, note=rate)
        add(name, latencies[0][p], "ms", note=rate,
            baseline=f"{name} ({base})" if base else "ApiVersions round trip, p50")  # fmt: skip
    add("produce-to-consume latency, p99 ÷ target", latencies[0]["p99"], "ms",
        baseline="target: latency p99")  # fmt: skip
    return figures


def _build(rev: str, worktree: Path, say: Say) -> str:
    """A virtual environment with ``rev`` installed (editable, C extensions compiled) from a
    git worktree at ``worktree``; returns its interpreter. Dependencies are this one's."""
    say(f"building the baseline client ({rev}) in {worktree}")
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), rev],
                   check=True, capture_output=True)  # fmt: skip
    venv = worktree / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    (purelib,) = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    # this interpreter's dependencies, wherever they come from (a .pth names directories;
    # their own .pth files, this checkout's editable odradek among them, are not read)
    deps = [p for p in sys.path if Path(p).name == "site-packages"]
    Path(purelib, "zz_dependencies.pth").write_text("\n".join(deps) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "-e", str(worktree)],
        check=True, capture_output=True,
    )  # fmt: skip
    return str(python)


def _pings(port: int, count: int) -> list[float]:
    with Wire(port) as wire:
        samples = []
        for _ in range(count):
            t0 = time.perf_counter()
            wire.call(m.ApiVersionsRequest(correlation_id=0))
            samples.append((time.perf_counter() - t0) * 1000)
    return samples
