"""odradek against Redis Streams and NATS JetStream: the same workload, one run, one machine.

Servers (each on 127.0.0.1, an ephemeral port and a temporary data dir, stopped afterwards;
see :mod:`bench.peer_servers`, which installs the Debian packages when they are missing):

* odradek: ``odradek serve`` with the shipped config (acks=all fsyncs before acknowledging,
  group commit; acks=1 leaves flushing to the OS);
* Redis 7: three servers, ``--appendonly no`` (memory only: RDB snapshots are off too),
  ``--appendonly yes --appendfsync everysec`` and ``--appendfsync always``;
* NATS 2.9 with JetStream, file storage. 2.9 has no per-write fsync setting (``sync_interval``
  arrived in 2.10 and 2.9 refuses it): a publish is acknowledged once written to the page
  cache, and the file store fsyncs on a timer. With 2.10+ a second server runs with
  ``sync_interval: always`` for the matched-fsync figures.

Workloads (``num_records`` values of ``record_bytes``; every client its own process, timing
only its workload; see :mod:`bench.peer_clients`): odradek ``perf produce --acks 1|all`` and
``perf consume`` (public Producer / Consumer); Redis pipelined ``XADD`` and paged ``XRANGE``
(redis-py with hiredis); NATS JetStream ``publish_async`` with a window of acks and a pull
consumer fetching batches (nats-py).

Every workload is one entry of one round; rounds repeat ``repeats`` times after ``warmup``
untimed rounds (interleaved, so the machine's noise falls on all systems alike); medians are
reported. Peer figures are the baselines; each odradek figure appears once per peer with that
peer as baseline, so ``ratio = odradek / peer`` (above 1: odradek is faster). A peer that
cannot be installed or started is reported as ``n/a`` with the reason, and the run goes on.
A PNG of the medians goes to ``bench/results/peers.png`` and ``bench/peers-latest.png``
(:mod:`bench.peers_plot`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures, interleaved, json_line, median
from bench.peer_servers import NatsServer, RedisServer, ServerError, ensure_binary
from bench.peers_plot import plot
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "odradek against Redis Streams and NATS JetStream (same workload, same run)"

Say = Callable[[str], None]


@dataclass(frozen=True)
class Params:
    num_records: int = 300_000
    record_bytes: int = 100
    repeats: int = 3
    warmup: int = 1
    redis_pipeline: int = 1000  # XADDs per pipeline execute
    redis_page: int = 10_000  # XRANGE COUNT
    nats_window: int = 1000  # unacknowledged async publishes
    nats_batch: int = 1000  # messages per pull fetch
    install: bool = True  # apt-get install missing peer servers
    plot: bool = True

    @classmethod
    def quick(cls) -> Params:
        return cls(num_records=100_000, repeats=1, warmup=0)


@dataclass
class _Peer:
    """One peer server variant: its figure label and, if it could not run, why."""

    label: str
    port: int = 0
    skipped: str = ""


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(BrokerProcess([scratch / "odradek"]))
        peers, versions = _start_peers(params, scratch, stack, say)
        runs, samples_ms = _workloads(params, broker.bootstrap, peers)
        say(
            f"{len(runs)} workloads x {params.repeats} round(s) (+{params.warmup} warm-up), "
            f"{params.num_records:,} records of {params.record_bytes} B"
        )
        samples = interleaved(runs, params.repeats, warmup=params.warmup)
    figures = _figures(params, peers, versions, samples)
    if params.plot:
        for path in plot(figures, samples_ms, params):
            say(f"wrote {path}")
    return figures.items


# -- servers -----------------------------------------------------------------------------------


def _start_peers(
    params: Params, scratch: Path, stack: contextlib.ExitStack, say: Say
) -> tuple[dict[str, _Peer], dict[str, str]]:
    peers = {
        "redis-off": _Peer("Redis, AOF off"),
        "redis-everysec": _Peer("Redis, AOF everysec"),
        "redis-always": _Peer("Redis, AOF appendfsync always"),
        "nats": _Peer("NATS JetStream, file store"),
        "nats-always": _Peer("NATS JetStream, sync_interval always"),
    }
    versions: dict[str, str] = {}
    redis_bin, redis_why = _binary("redis-server", "redis-server", params, say)
    if redis_bin and importlib.util.find_spec("redis") is None:
        redis_bin, redis_why = None, "redis-py not installed (pip install 'redis[hiredis]')"
    nats_bin, nats_why = _binary("nats-server", "nats-server", params, say)
    if nats_bin and importlib.util.find_spec("nats") is None:
        nats_bin, nats_why = None, "nats-py not installed (pip install nats-py)"
    if redis_bin:
        versions["redis"] = _version([redis_bin, "--version"], r"v=(\S+)")
    if nats_bin:
        versions["nats"] = _version([nats_bin, "--version"], r"v(\d+\.\d+\.\d+)")
    nats_always = nats_bin and _at_least(versions.get("nats", ""), (2, 10))
    for key, peer in peers.items():
        if key.startswith("redis"):
            if redis_bin is None:
                peer.skipped = redis_why
                continue
            fsync = {"redis-off": None, "redis-everysec": "everysec"}.get(key, "always")
            server = RedisServer(redis_bin, scratch / key, appendfsync=fsync)
        else:
            if nats_bin is None:
                peer.skipped = nats_why
                continue
            if key == "nats-always" and not nats_always:
                peer.skipped = f"nats-server {versions['nats']} has no sync_interval (2.10+)"
                continue
            sync = "always" if key == "nats-always" else None
            server = NatsServer(nats_bin, scratch / key, sync_interval=sync)
        try:
            stack.enter_context(server)
        except (ServerError, OSError) as exc:
            peer.skipped = str(exc)[:200]
            say(f"{peer.label}: skipped ({peer.skipped})")
            continue
        peer.port = server.port
        say(f"{peer.label} on 127.0.0.1:{server.port}")
    return peers, versions


def _binary(binary: str, package: str, params: Params, say: Say) -> tuple[str | None, str]:
    if params.install:
        return ensure_binary(binary, package, say)
    found = shutil.which(binary)
    return found, "" if found else f"{binary} not installed (install=false)"


def _version(command: list[str], pattern: str) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    match = re.search(pattern, out)
    return match.group(1) if match else "?"


def _at_least(version: str, wanted: tuple[int, int]) -> bool:
    parts = version.split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= wanted
    except (IndexError, ValueError):
        return False


# -- workloads ---------------------------------------------------------------------------------


def _workloads(
    params: Params, bootstrap: str, peers: dict[str, _Peer]
) -> tuple[dict[str, Callable[[], float]], dict[str, list[dict[str, float]]]]:
    """The callables of one round, in round order (each consume follows its produce), and
    where odradek's produce latency summaries are collected."""
    n = str(params.num_records)
    size = str(params.record_bytes)
    state = {"round": 0}
    latency: dict[str, list[dict[str, float]]] = {"acks=1": [], "acks=all": []}

    def odradek_produce(acks: str, prefix: str) -> Callable[[], float]:
        def go() -> float:
            if acks == "1":
                state["round"] += 1
            summary = _odradek(
                "perf", "produce", "--bootstrap-server", bootstrap,
                "--topic", f"{prefix}-{state['round']}", "--num-records", n,
                "--record-size", size, "--acks", acks,
            )  # fmt: skip
            latency[f"acks={acks}"].append(summary)
            return summary["records_per_s"]

        return go

    def odradek_consume() -> float:
        return _odradek(
            "perf", "consume", "--bootstrap-server", bootstrap,
            "--topic", f"p1-{state['round']}", "--num-records", n,
        )["records_per_s"]  # fmt: skip

    def redis(action: str, key: str, *extra: str, cleanup: bool) -> Callable[[], float]:
        port = str(peers[key].port)

        def go() -> float:
            stream = f"{key}-{state['round']}"
            args = [action, "--port", port, "--num-records", n, "--key", stream, *extra]
            return _client(*args, *(["--cleanup"] if cleanup else []))

        return go

    def nats(action: str, key: str, *extra: str, cleanup: bool) -> Callable[[], float]:
        port = str(peers[key].port)

        def go() -> float:
            name = f"{key.replace('-', '_')}_{state['round']}"
            args = [action, "--port", port, "--num-records", n, "--stream", name.upper(),
                    "--subject", f"bench.{name}", *extra]  # fmt: skip
            return _client(*args, *(["--cleanup"] if cleanup else []))

        return go

    produce = ["--record-size", size]
    xadd = [*produce, "--pipeline", str(params.redis_pipeline)]
    publish = [*produce, "--window", str(params.nats_window)]
    candidates: list[tuple[str, str | None, Callable[[], float] | None]] = [
        ("odradek acks=1", None, odradek_produce("1", "p1")),
        ("redis-off produce", "redis-off", None),
        ("nats produce", "nats", None),
        ("odradek acks=all", None, odradek_produce("all", "pa")),
        ("redis-everysec produce", "redis-everysec", None),
        ("redis-always produce", "redis-always", None),
        ("nats-always produce", "nats-always", None),
        ("odradek consume", None, odradek_consume),
        ("redis-off consume", "redis-off", None),
        ("nats consume", "nats", None),
    ]
    runs: dict[str, Callable[[], float]] = {}
    for name, key, func in candidates:
        if key is not None:
            if peers[key].skipped:
                continue
            consume = name.endswith("consume")
            kept = key in ("redis-off", "nats") and not consume  # read in the same round
            if key.startswith("redis"):
                func = (
                    redis("redis-consume", key, "--page", str(params.redis_page), cleanup=True)
                    if consume
                    else redis("redis-produce", key, *xadd, cleanup=not kept)
                )
            else:
                func = (
                    nats("nats-consume", key, "--batch", str(params.nats_batch), cleanup=True)
                    if consume
                    else nats("nats-produce", key, *publish, cleanup=not kept)
                )
        assert func is not None
        runs[name] = func
    return runs, latency


def _odradek(*args: str) -> dict[str, float]:
    return json_line(
        [sys.executable, "-m", "odradek.cli.main", *args, "--json"], f"odradek {args[1]}"
    )


def _client(*args: str) -> float:
    command = [sys.executable, "-m", "bench.peer_clients", *args]
    return json_line(command, args[0])["records_per_s"]


# -- figures -----------------------------------------------------------------------------------


def _figures(
    params: Params,
    peers: dict[str, _Peer],
    versions: dict[str, str],
    samples: dict[str, list[float]],
) -> Figures:
    figures = Figures()
    unit = "records/s"
    redis_v = f"Redis {versions.get('redis', '?')}, redis-py"
    redis_v += " + hiredis" if importlib.util.find_spec("hiredis") else " (no hiredis)"
    nats_v = f"nats-server {versions.get('nats', '?')}, nats-py"

    def peer(name: str, key: str, run: str, note: str) -> str:
        values = samples.get(run, [])
        skipped = peers[key].skipped
        value = median(values) if values else math.nan
        figures.add(name, value, unit, note=f"skipped: {skipped}" if skipped else note,
                    samples=values, is_baseline=True)  # fmt: skip
        return name

    def odradek(name: str, run: str, baselines: list[tuple[str, str]], note: str) -> None:
        values = samples[run]
        for i, (label, baseline) in enumerate(baselines):
            figures.add(f"{name} ÷ {label}", median(values), unit, baseline=baseline,
                        note=note if i == 0 else "", samples=values)  # fmt: skip

    records = f"{params.num_records:,} x {params.record_bytes} B"
    off = peer("Redis XADD, AOF off", "redis-off", "redis-off produce",
               f"{redis_v}; pipeline {params.redis_pipeline}; memory only")  # fmt: skip
    everysec = peer("Redis XADD, AOF everysec", "redis-everysec", "redis-everysec produce",
                    "fsync once a second")  # fmt: skip
    jet = peer("NATS JetStream publish", "nats", "nats produce",
               f"{nats_v}; {params.nats_window} acks in flight; acked before fsync")  # fmt: skip
    odradek("odradek Producer, acks=1", "odradek acks=1",
            [("Redis AOF off", off), ("Redis everysec", everysec), ("NATS", jet)],
            f"ratio = odradek / peer; {records}; no fsync (OS flushes)")  # fmt: skip
    always = peer("Redis XADD, appendfsync always", "redis-always", "redis-always produce",
                  "fsync before replying (per event loop pass)")  # fmt: skip
    matched = [("Redis always", always)]
    if not peers["nats-always"].skipped:
        jet_always = peer("NATS JetStream publish, sync always", "nats-always",
                          "nats-always produce", "fsync per write")  # fmt: skip
        matched.append(("NATS sync always", jet_always))
    else:
        matched.append(("NATS (no fsync)", jet))
    odradek("odradek Producer, acks=all", "odradek acks=all", matched,
            "fsync group commit before the ack")  # fmt: skip
    xrange_ = peer("Redis XRANGE", "redis-off", "redis-off consume",
                   f"pages of {params.redis_page:,}, decoded to (id, fields)")  # fmt: skip
    fetch = peer("NATS JetStream pull fetch", "nats", "nats consume",
                 f"batches of {params.nats_batch:,}, AckPolicy none")  # fmt: skip
    odradek("odradek Consumer, iterating", "odradek consume",
            [("Redis XRANGE", xrange_), ("NATS fetch", fetch)], records)  # fmt: skip
    return figures
