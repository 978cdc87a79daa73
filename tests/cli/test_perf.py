"""``odradek perf produce`` and ``odradek perf consume`` (kafka-*-perf-test style) against a
real broker: the counts, the byte totals and the summary line are the records' own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]


def _perf(broker: BrokerProcess, *args: str) -> tuple[str, dict[str, float]]:
    command = [sys.executable, "-m", "odradek.cli.main", "perf", *args, "--json"]
    done = subprocess.run(
        [*command, "--bootstrap-server", broker.bootstrap],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    *lines, last = done.stdout.splitlines()
    return "\n".join(lines), json.loads(last)


@pytest.mark.parametrize("throughput", ["-1", "20000"])
def test_perf_produce_then_consume_counts_every_record(
    broker: BrokerProcess, throughput: str
) -> None:
    topic = f"perf{throughput.strip('-')}"
    line, produced = _perf(
        broker, "produce", "--topic", topic, "--num-records", "30000", "--record-size", "100",
        "--throughput", throughput, "--acks", "1",
    )  # fmt: skip
    assert line.startswith("30000 records sent, ")
    assert " ms avg latency, " in line and ", p50 " in line and ", p99.9 " in line
    assert produced["records"] == 30000
    assert produced["latency_p50_ms"] <= produced["latency_p99_ms"]
    if throughput != "-1":  # the throttle holds the rate (it may only undershoot)
        assert produced["records_per_s"] <= 20000 * 1.05
    line, consumed = _perf(broker, "consume", "--topic", topic, "--num-records", "30000")
    assert line.startswith("30000 records received, ")
    assert consumed["records"] == 30000
    # MB/s counts keys and values: 100-byte values, null keys
    payload_mb = consumed["mb_per_s"] * consumed["seconds"]
    assert payload_mb == pytest.approx(30000 * 100 / 1e6, rel=1e-6)
