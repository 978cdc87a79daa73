"""Helpers every benchmark shares: timing, statistics, figures, JSON results and tables, and
the processes a benchmark watches or runs.

A benchmark module (listed in :data:`bench.__main__.BENCHMARKS`) provides:

* ``TITLE``: one line shown above its table;
* ``Params``: a dataclass of its sizes, whose defaults are the full run, with a classmethod
  ``quick()`` giving the ``--quick`` sizes (any field can be overridden with ``--set``);
* ``run(params, scratch, say) -> list[Figure]``: the measurements, in table order. ``scratch``
  is an empty temporary directory the runner deletes afterwards; ``say`` prints progress.

Rules (docs/architecture.md §10): the machine is shared and noisy, so every speed figure is reported
as a ratio to a baseline measured in the same run, repeats of a figure and of its baseline are
interleaved (:func:`interleaved`), and the median of the repeats is what is reported.
Units: MB = 10**6 bytes, MiB = 2**20 bytes; ``ratio`` is always ``value / baseline value``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tests.broker_process import REPO

__all__ = [
    "BenchResult",
    "Figure",
    "Figures",
    "Stopwatch",
    "apply_overrides",
    "format_size",
    "interleaved",
    "json_line",
    "machine_info",
    "markdown_table",
    "mb_per_s",
    "median",
    "parse_size",
    "percentile",
    "print_result",
    "write_results",
]

MB = 1_000_000
_CLIENT_TIMEOUT_S = 900.0
_SIZE_SUFFIXES = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


# -- timing -----------------------------------------------------------------------------------


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds`` (``time.perf_counter_ns``)."""

    __slots__ = ("_start_ns", "elapsed_ns")

    def __init__(self) -> None:
        self._start_ns = 0
        self.elapsed_ns = 0

    def __enter__(self) -> Stopwatch:
        self._start_ns = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed_ns = time.perf_counter_ns() - self._start_ns

    @property
    def seconds(self) -> float:
        return self.elapsed_ns / 1e9


def interleaved(
    runs: Mapping[str, Callable[[], float]], repeats: int, *, warmup: int = 0
) -> dict[str, list[float]]:
    """Call every run once per round, ``repeats`` rounds (after ``warmup`` untimed rounds).

    Each callable returns its own measurement (it times only what it means to time). Round
    robin spreads the machine's noise over a figure and its baseline alike.
    """
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(warmup + repeats):
        for name, run in runs.items():
            value = run()
            if round_ >= warmup:
                samples[name].append(value)
    return samples


# -- statistics -------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float, *, presorted: bool = False) -> float:
    """The ``p``-th percentile (0..100), linear interpolation between ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = values if presorted else sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def mb_per_s(size_bytes: int, seconds: float) -> float:
    return size_bytes / seconds / MB


# -- sizes and parameters ---------------------------------------------------------------------


def parse_size(text: str) -> int:
    """``"2G"`` / ``"256MiB"`` / ``"16k"`` / ``"1000"`` → bytes (suffixes are binary)."""
    raw = text.strip().lower().removesuffix("ib").removesuffix("b")
    factor = 1
    if raw and raw[-1] in _SIZE_SUFFIXES:
        factor = _SIZE_SUFFIXES[raw[-1]]
        raw = raw[:-1]
    return int(float(raw) * factor)


def format_size(size_bytes: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= factor:
            return f"{size_bytes / factor:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size_bytes} B"


def apply_overrides(params: Any, overrides: Mapping[str, str]) -> Any:
    """A copy of the ``params`` dataclass with ``name=value`` overrides parsed by field type.

    Integer fields whose name ends in ``_bytes`` accept size suffixes (``2G``, ``16k``).
    """
    fields = {f.name: f for f in dataclasses.fields(params)}
    changes: dict[str, object] = {}
    for name, raw in overrides.items():
        if name not in fields:
            raise ValueError(f"unknown parameter {name!r} (known: {', '.join(sorted(fields))})")
        current = getattr(params, name)
        if isinstance(current, bool):
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(f"{name}={raw!r}: expected a boolean")
            changes[name] = raw.lower() in ("1", "true", "yes", "on")
        elif isinstance(current, int):
            changes[name] = parse_size(raw) if name.endswith("_bytes") else int(raw)
        elif isinstance(current, float):
            changes[name] = float(raw)
        else:
            changes[name] = raw
    return dataclasses.replace(params, **changes)


# -- figures ----------------------------------------------------------------------------------


@dataclass
class Figure:
    """One reported number; ``ratio`` is ``value / value of baseline`` (same run)."""

    name: str
    value: float
    unit: str
    baseline: str | None = None
    ratio: float | None = None
    note: str = ""
    samples: list[float] = field(default_factory=list)  # the repeats behind ``value``
    is_baseline: bool = False


class Figures:
    """An ordered list of figures, where later figures name earlier ones as baselines."""

    def __init__(self) -> None:
        self.items: list[Figure] = []
        self._by_name: dict[str, Figure] = {}

    def add(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        baseline: str | None = None,
        note: str = "",
        samples: Iterable[float] = (),
        is_baseline: bool = False,
    ) -> Figure:
        if name in self._by_name:
            raise ValueError(f"figure {name!r} reported twice")
        ratio = None
        if baseline is not None:
            base = self._by_name[baseline].value
            ratio = value / base if base else math.nan
        figure = Figure(name, value, unit, baseline, ratio, note, list(samples), is_baseline)
        self.items.append(figure)
        self._by_name[name] = figure
        return figure

    def __getitem__(self, name: str) -> Figure:
        return self._by_name[name]


@dataclass
class BenchResult:
    name: str
    title: str
    started_at: str  # ISO 8601, local time with offset
    duration_s: float
    quick: bool
    params: dict[str, object]
    machine: dict[str, object]
    figures: list[Figure]
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def machine_info() -> dict[str, object]:
    """What a reader needs to compare two result files: CPUs, kernel, Python, load."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory_bytes = None
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        memory_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": model,
        "kernel": platform.release(),
        "system": platform.system(),
        "python": sys.version.split()[0],
        "memory_bytes": memory_bytes,
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


# -- output -----------------------------------------------------------------------------------


def write_results(results: Sequence[BenchResult], directory: Path, stamp: str) -> list[Path]:
    """``<name>-<stamp>.json`` per benchmark, and ``latest.json`` holding the whole run."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for result in results:
        path = directory / f"{result.name}-{stamp}.json"
        _write_json(path, result.to_json())
        written.append(path)
    latest = directory / "latest.json"
    _write_json(latest, {"stamp": stamp, "results": {r.name: r.to_json() for r in results}})
    written.append(latest)
    return written


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=True) + "\n")
    os.replace(tmp, path)


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def print_result(result: BenchResult, console: Console) -> None:
    """One table per benchmark: figure, value, unit, ratio to its baseline, note."""
    machine = result.machine
    caption = (
        f"{machine['nproc']} CPUs · {machine['cpu_model']} · kernel {machine['kernel']} · "
        f"Python {machine['python']} · {result.duration_s:.0f} s"
        + (" · --quick" if result.quick else "")
    )
    table = Table(title=f"{result.name}: {result.title}", caption=caption, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("unit")
    table.add_column("ratio", justify="right")
    table.add_column("baseline / note", overflow="fold")
    for figure in result.figures:
        ratio = "" if figure.ratio is None else f"{figure.ratio:.2f}"
        detail = ", ".join(x for x in (figure.baseline or "", figure.note) if x)
        style = "dim" if figure.is_baseline else None
        table.add_row(
            figure.name, _format_value(figure.value), figure.unit, ratio, detail, style=style
        )
    console.print(table)
    if result.error:
        console.print(f"[red]{result.name} failed:[/red] {result.error}")


def markdown_table(result: BenchResult) -> str:
    """The same table as :func:`print_result`, as GitHub markdown (for bench/README.md)."""
    lines = ["| figure | value | unit | ratio | baseline / note |", "|---|---:|---|---:|---|"]
    for figure in result.figures:
        ratio = "" if figure.ratio is None else f"{figure.ratio:.2f}"
        detail = ", ".join(x for x in (figure.baseline or "", figure.note) if x)
        value = _format_value(figure.value)
        lines.append(f"| {figure.name} | {value} | {figure.unit} | {ratio} | {detail} |")
    return "\n".join(lines)


# -- processes --------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` (Linux ``/proc/<pid>/status``, VmRSS)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def open_fds(pid: int) -> int:
    """Open file descriptors of process ``pid`` (Linux ``/proc/<pid>/fd``)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def json_line(command: list[str], what: str) -> dict[str, float]:
    """Run ``command``, a client workload that prints a JSON summary on its last line of
    output (``odradek perf --json``, ``bench.kafka_clients``, ``bench.peer_clients``), from the
    repository root; that summary. ``what`` names the workload if it fails."""
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO, timeout=_CLIENT_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])
