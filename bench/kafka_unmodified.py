"""Part 3 of ``bench.kafka`` (its docstring says what is measured): unmodified Kafka clients
against ``odradek perf`` and Redis Streams on the benchmark's broker.

Every workload is a process of its own that times only its work and prints a JSON summary
(:func:`bench.common.json_line`): ``odradek perf``, :mod:`bench.kafka_clients` (the three
client libraries) and :mod:`bench.peer_clients` (Redis). A round runs each produce into a
fresh one-partition topic (a fresh stream for Redis), then each consume of what it wrote;
Redis runs with AOF off (:mod:`bench.peer_servers`). The figures: the odradek and Redis rows
are baselines, and every client's row appears against each.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import Figures, interleaved, json_line, median
from bench.peer_servers import RedisServer, ServerError, ensure_binary
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

if TYPE_CHECKING:
    from bench.kafka import Params

__all__ = ["CLIENTS", "CONFLUENT_CONSUME", "clients_part"]

CLIENTS = ("confluent", "kafka-python", "aiokafka")
_LIBRARY = {"confluent": "confluent_kafka", "kafka-python": "kafka", "aiokafka": "aiokafka"}
# librdkafka pauses a partition's fetching for fetch.queue.backoff.ms (default 1000) once its
# local queue holds queued.min.messages (100,000): a timer that would stall a fast reader the
# same way against Apache Kafka. The consume figure uses 1 ms; the defaults get a row too.
CONFLUENT_CONSUME = ["--config", "fetch.queue.backoff.ms=1"]

Say = Callable[[str], None]


def clients_part(
    params: Params,
    broker: BrokerProcess,
    scratch: Path,
    stack: contextlib.ExitStack,
    figures: Figures,
    say: Say,
) -> None:
    n, size = str(params.num_records), str(params.record_bytes)
    state = {"round": 0}
    skipped: dict[str, str] = {}

    def topic(name: str) -> str:
        return f"clients-{name}-{state['round']}"

    def created(name: str) -> str:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic(topic(name), partitions=1)
        return topic(name)

    def odradek(action: str) -> float:
        if action == "produce":
            state["round"] += 1
            args = ["--topic", created("odradek"), "--record-size", size, "--acks", "1"]
        else:
            args = ["--topic", topic("odradek")]
        command = [sys.executable, "-m", "odradek.cli.main", "perf", action, "--json",
                   "--bootstrap-server", broker.bootstrap, "--num-records", n, *args]  # fmt: skip
        return json_line(command, f"odradek perf {action}")["records_per_s"]

    def client(name: str, action: str, *extra: str) -> Callable[[], float]:
        def go() -> float:
            name_ = created(name) if action == "produce" else topic(name)
            command = [sys.executable, "-m", "bench.kafka_clients", f"{name}-{action}",
                       "--bootstrap-server", broker.bootstrap, "--topic", name_,
                       "--num-records", n, "--record-size", size, *extra]  # fmt: skip
            return json_line(command, f"{name} {action}")["records_per_s"]

        return go

    runs: dict[str, Callable[[], float]] = {
        "odradek produce": lambda: odradek("produce"),
        "odradek consume": lambda: odradek("consume"),
    }
    for name in CLIENTS:
        if importlib.util.find_spec(_LIBRARY[name]) is None:
            skipped[name] = f"{_LIBRARY[name]} is not installed (pip install {name})"
            continue
        runs[f"{name} produce"] = client(name, "produce")
        if name == "confluent":
            runs["confluent consume"] = client(name, "consume", *CONFLUENT_CONSUME)
            runs["confluent-defaults consume"] = client(name, "consume")
        else:
            runs[f"{name} consume"] = client(name, "consume")
    redis_port = _start_redis(params, scratch, stack, skipped, say)
    if redis_port:
        port = str(redis_port)

        def redis(action: str) -> float:
            key = f"redis-{state['round']}"
            extra = ["--record-size", size, "--pipeline", str(params.redis_pipeline)]
            if action == "consume":
                extra = ["--page", str(params.redis_page), "--cleanup"]
            command = [sys.executable, "-m", "bench.peer_clients", f"redis-{action}",
                       "--port", port, "--num-records", n, "--key", key, *extra]  # fmt: skip
            return json_line(command, f"redis-{action}")["records_per_s"]

        runs["redis produce"] = lambda: redis("produce")
        runs["redis consume"] = lambda: redis("consume")
    say(
        f"clients: {len(runs)} workloads x {params.client_repeats} round(s) "
        f"(+{params.client_warmup} warm-up), {params.num_records:,} records of {size} B"
    )
    samples = interleaved(runs, params.client_repeats, warmup=params.client_warmup)
    _client_figures(params, samples, skipped, figures)


def _start_redis(
    params: Params, scratch: Path, stack: contextlib.ExitStack, skipped: dict[str, str], say: Say
) -> int | None:
    if importlib.util.find_spec("redis") is None:
        skipped["redis"] = "redis-py not installed (pip install 'redis[hiredis]')"
        return None
    binary, why = ensure_binary("redis-server", "redis-server", say) if params.install else (
        None, "install=false")  # fmt: skip
    if binary is None:
        skipped["redis"] = why
        return None
    try:
        server = stack.enter_context(RedisServer(binary, scratch / "redis", appendfsync=None))
    except (ServerError, OSError) as exc:
        skipped["redis"] = str(exc)[:200]
        return None
    return server.port


def _client_figures(
    params: Params, samples: dict[str, list[float]], skipped: dict[str, str], figures: Figures
) -> None:
    records = f"{params.num_records:,} x {params.record_bytes} B, one partition"
    labels = {
        "confluent": "confluent-kafka",
        "confluent-defaults": "confluent-kafka (librdkafka defaults)",
        "kafka-python": "kafka-python",
        "aiokafka": "aiokafka",
        "confluent consume": "fetch.queue.backoff.ms=1",
        "confluent-defaults consume": "fetch.queue.backoff.ms=1000 (default)",
    }
    for action, verb in (("produce", "produce"), ("consume", "consume")):
        values = samples[f"odradek {action}"]
        odradek = figures.add(f"odradek perf {verb}", median(values), "records/s",
                              samples=values, is_baseline=True,
                              note=records if action == "produce" else "")  # fmt: skip
        redis_values = samples.get(f"redis {action}", [])
        what = "XADD, pipeline" if action == "produce" else "XRANGE, pages of"
        count = params.redis_pipeline if action == "produce" else params.redis_page
        redis = figures.add(
            f"Redis Streams {verb}",
            median(redis_values) if redis_values else math.nan,
            "records/s",
            samples=redis_values,
            is_baseline=True,
            note=f"skipped: {skipped['redis']}" if "redis" in skipped else f"{what} {count:,}",
        ).name
        figures.add(f"odradek perf {verb} ÷ Redis", median(values), "records/s",
                    baseline=redis, samples=values)  # fmt: skip
        names = [*CLIENTS, "confluent-defaults"] if action == "consume" else CLIENTS
        for name in names:
            label = labels[name]
            values = samples.get(f"{name} {action}", [])
            value = median(values) if values else math.nan
            note = labels.get(f"{name} {action}", "")
            if name.removesuffix("-defaults") in skipped:
                note = f"skipped: {skipped[name.removesuffix('-defaults')]}"
            figures.add(f"{label} {verb} ÷ odradek", value, "records/s",
                        baseline=odradek.name, samples=values, note=note)  # fmt: skip
            figures.add(f"{label} {verb} ÷ Redis", value, "records/s",
                        baseline=redis, samples=values)  # fmt: skip
