"""The plot of ``bench.peers``: the median throughputs per system and odradek's latency.

Drawn from the benchmark's figures after the run (matplotlib, Agg backend: no display), to
``bench/results/peers.png`` and, for bench/README.md, ``bench/peers-latest.png``. Left: bars of
the median records/s of each system's produce (no fsync per ack, then fsync before the ack)
and consume, on a log scale; a peer that was skipped is in the table but not in the plot.
Right: ``odradek perf produce``'s send-to-acknowledgement latency percentiles (p50, p95, p99,
p99.9) for acks=1 and acks=all, medians over the timed rounds.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import Figures, median

if TYPE_CHECKING:
    from bench.peers import Params

__all__ = ["PLOT_PATHS", "plot"]

BENCH_DIR = Path(__file__).resolve().parent
PLOT_PATHS = (BENCH_DIR / "results" / "peers.png", BENCH_DIR / "peers-latest.png")


def plot(
    figures: Figures, latency: dict[str, list[dict[str, float]]], params: Params
) -> list[Path]:
    """Bars of the median throughputs per system (log scale), and odradek's send-to-ack
    latency percentiles from ``perf produce``; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    groups = {
        "produce, no fsync per ack": [
            ("odradek acks=1", "odradek Producer, acks=1 ÷ Redis AOF off"),
            ("Redis AOF off", "Redis XADD, AOF off"),
            ("Redis AOF everysec", "Redis XADD, AOF everysec"),
            ("NATS JetStream", "NATS JetStream publish"),
        ],
        "produce, fsync before ack": [
            ("odradek acks=all", "odradek Producer, acks=all ÷ Redis always"),
            ("Redis appendfsync always", "Redis XADD, appendfsync always"),
            ("NATS sync always", "NATS JetStream publish, sync always"),
        ],
        "consume": [
            ("odradek Consumer", "odradek Consumer, iterating ÷ Redis XRANGE"),
            ("Redis XRANGE", "Redis XRANGE"),
            ("NATS pull fetch", "NATS JetStream pull fetch"),
        ],
    }
    known = {f.name: f.value for f in figures.items}
    colors = {"odradek": "#1f77b4", "Redis": "#d62728", "NATS": "#2ca02c"}
    fig, (bars, lat) = plt.subplots(1, 2, figsize=(13, 5.5), width_ratios=[2.2, 1])
    labels, values, tints = [], [], []
    for group, items in groups.items():
        for label, name in items:
            value = known.get(name, math.nan)
            if not math.isnan(value):  # skipped peers are in the table, not the plot
                labels.append(f"{group}\n{label}")
                values.append(value)
                tints.append(colors[label.split()[0]])
    positions = list(range(len(labels)))[::-1]
    bars.barh(positions, values, color=tints)
    bars.set_yticks(positions, labels, fontsize=7)
    bars.set_xscale("log")
    if values:
        bars.set_xlim(min(values) / 1.5, max(values) * 2.5)  # room for the value labels
    bars.xaxis.set_major_formatter(FuncFormatter(_thousands))
    bars.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: _thousands(x, 0, minor=True)))
    bars.set_xlabel("records/s (log scale; median)")
    bars.set_title(f"{params.num_records:,} records of {params.record_bytes} B, loopback")
    for y, value in zip(positions, values, strict=True):
        bars.text(value, y, f" {value:,.0f}", va="center", fontsize=7)
    percentiles = ("50", "95", "99", "99.9")
    for offset, (acks, every) in enumerate(latency.items()):
        summaries = every[-params.repeats :]  # not the warm-up rounds
        points = [
            median([s[f"latency_p{p}_ms"] for s in summaries if s.get(f"latency_p{p}_ms")])
            if any(s.get(f"latency_p{p}_ms") for s in summaries)
            else math.nan
            for p in percentiles
        ]
        xs = [i + offset * 0.4 for i in range(len(percentiles))]
        lat.bar(xs, points, width=0.4, label=f"odradek {acks}")
    lat.set_xticks([i + 0.2 for i in range(len(percentiles))], [f"p{p}" for p in percentiles])
    lat.set_ylabel("ms, send() to acknowledgement")
    lat.set_title("odradek perf produce latency at full speed")
    lat.legend(fontsize=8)
    fig.suptitle("odradek vs Redis Streams vs NATS JetStream (one run, shared 2-core machine)")
    fig.tight_layout()
    written = []
    for path in PLOT_PATHS:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        written.append(path)
    plt.close(fig)
    return written


def _thousands(x: float, _position: int, *, minor: bool = False) -> str:
    """Axis labels ``20k``, ``50k``, ``100k``; minor ticks only at 2 and 5 of a decade."""
    if minor and f"{x:.0e}"[0] not in "25":
        return ""
    return f"{x / 1000:,.0f}k" if x >= 1000 else f"{x:.0f}"
