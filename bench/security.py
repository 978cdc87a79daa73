"""What TLS and SASL cost: one broker with three listeners (``PLAINTEXT``, ``SSL``,
``SASL_SSL`` with SCRAM-SHA-512), the same workloads against each, same run, through two
clients: confluent-kafka (Kafka's protocol) and odradek's own (the native protocol).

Per client, listener and round: a produce of ``num_records`` x ``record_bytes`` to a fresh
one-partition topic (acks=1), then a consume of that topic from the beginning, one process
each: ``confluent-produce`` / ``confluent-consume`` (:mod:`bench.kafka_clients`), and
``odradek perf produce`` / ``perf consume`` with the same Kafka client properties in
``--command-config``; rounds interleaved, one untimed warm-up, medians. Figures are
records/s and value MB/s; TLS and SASL_SSL are ratios against plaintext.
SASL authenticates once per connection, so SASL_SSL against SSL shows that its cost is the
handshake, not the data; the fetch figure is where TLS loses ``sendfile`` (record bytes are
read and encrypted instead, broker/security/tls.py).

Certificates come from trustme, the user's credential is written before the broker starts
(as ``odradek users create --config`` does).
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trustme

from bench.common import Figure, Figures, interleaved, json_line, median
from odradek.protocol.sasl import derive_credential
from odradek.storage.atomic import make_directories
from odradek.storage.credentials import CredentialStore
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess

__all__ = ["TITLE", "Params", "run"]

TITLE = "TLS and SASL vs plaintext: produce and consume, confluent-kafka and odradek (same run)"

Say = Callable[[str], None]
_PASSWORD = "bench-password"
_CLIENTS = {"confluent": "confluent-kafka", "odradek": "odradek"}


@dataclass(frozen=True)
class Params:
    num_records: int = 300_000
    record_bytes: int = 1000
    repeats: int = 3

    @classmethod
    def quick(cls) -> Params:
        return cls(num_records=50_000, repeats=1)


def _certificates(directory: Path) -> dict[str, Path]:
    ca = trustme.CA()
    paths = {"server": directory / "server.pem", "ca": directory / "ca.pem"}
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(paths["server"]))
    ca.cert_pem.write_to_path(str(paths["ca"]))
    return paths


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    certs = _certificates(scratch)
    logs = scratch / "logs"
    make_directories(logs)
    credential = derive_credential("SCRAM-SHA-512", _PASSWORD, os.urandom(16))
    CredentialStore([logs]).apply([logs], upserts=[("bench", credential)])
    say(
        f"confluent-kafka and odradek: {params.num_records:,} x {params.record_bytes} B a "
        f"round, {params.repeats} rounds + 1 warm-up, listeners PLAINTEXT / SSL / SASL_SSL"
    )
    broker = BrokerProcess(
        [logs],
        listeners=("PLAINTEXT", "SSL", "SASL_SSL"),
        overrides=[
            f"ssl.keystore.location={certs['server']}",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
        ],
    )
    tls = [f"ssl.ca.location={certs['ca']}"]
    settings = {
        "PLAINTEXT": [],
        "SSL": ["security.protocol=SSL", *tls],
        "SASL_SSL": [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-512",
            "sasl.username=bench",
            f"sasl.password={_PASSWORD}",
            *tls,
        ],
    }
    for listener, items in settings.items():  # odradek perf's --command-config
        (scratch / f"{listener}.properties").write_text("".join(f"{i}\n" for i in items))
    rounds = itertools.count()
    topics: dict[tuple[str, str], str] = {}
    with broker:

        def client(name: str, listener: str, action: str) -> float:
            if action == "produce":
                topics[name, listener] = f"security-{name}-{listener.lower()}-{next(rounds)}"
                with Wire(broker.port) as wire:  # type: ignore[arg-type]
                    wire.create_topic(topics[name, listener], partitions=1)
            common = ["--bootstrap-server", f"127.0.0.1:{broker.ports[listener]}",
                      "--topic", topics[name, listener],
                      "--num-records", str(params.num_records)]  # fmt: skip
            if name == "confluent":
                command = [sys.executable, "-m", "bench.kafka_clients", f"confluent-{action}",
                           *common, "--record-size", str(params.record_bytes)]  # fmt: skip
                for item in settings[listener]:
                    command += ["--config", item]
            else:
                command = [sys.executable, "-m", "odradek", "perf", action, *common, "--json",
                           "--command-config", str(scratch / f"{listener}.properties")]  # fmt: skip
                if action == "produce":
                    command += ["--record-size", str(params.record_bytes)]
            return json_line(command, f"{name} {action} over {listener}")["records_per_s"]

        jobs = {
            f"{name} {action} {listener}": functools.partial(client, name, listener, action)
            for name in _CLIENTS
            for action in ("produce", "consume")
            for listener in settings
        }
        # produce before consume within a round: each consume reads what its produce wrote
        samples = interleaved(jobs, params.repeats, warmup=1)
    figures = Figures()
    mb_per_record = params.record_bytes / 1e6
    for name, label in _CLIENTS.items():
        for action in ("produce", "consume"):
            base = ""
            for listener in settings:
                values = samples[f"{name} {action} {listener}"]
                figure = figures.add(
                    f"{label} {action} over {listener}",
                    median(values),
                    "records/s",
                    samples=values,
                    is_baseline=listener == "PLAINTEXT",
                    baseline=base or None,
                    note=f"{median(values) * mb_per_record:,.0f} MB/s of values",
                )
                base = base or figure.name
    return figures.items
