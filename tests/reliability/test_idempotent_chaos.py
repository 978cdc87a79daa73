"""Chaos with an unmodified idempotent Kafka producer: SIGKILL the broker while confluent-kafka
(librdkafka, ``enable.idempotence=true``, ``acks=all``, five requests in flight) writes, restart
it on the same port, and let the client retry.

After the last delivery report, per partition: offsets are dense; every record whose delivery
succeeded is there once, at the offset its report gave; and no value appears twice at all —
batches the broker had appended but not acknowledged when it died, retried by the client after
the restart, were recognised by their producer id and sequence (rebuilt from the log and the
``.snapshot`` files) and acknowledged with their first offsets instead of appended again.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

TOPIC = "idempotent-chaos"
PARTITIONS = 2
RECORDS = int(os.environ.get("IDEMPOTENT_CHAOS_RECORDS", "40000"))
KILLS = int(os.environ.get("IDEMPOTENT_CHAOS_KILLS", "4"))
OVERRIDES = [
    "log.segment.bytes=65536",  # rolls (and producer-state snapshots) during the run
    "log.flush.offset.checkpoint.interval.ms=50",
    "num.partitions=2",
]


def _killer(
    broker: BrokerProcess, done: threading.Event, rng: random.Random, kills: list[float]
) -> None:
    """Kill and restart the broker ``KILLS`` times, at random moments; then set ``done``."""
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.2, 0.8))
            broker.kill()
            kills.append(time.monotonic())
            time.sleep(rng.uniform(0.05, 0.4))  # the client's requests fail and queue meanwhile
            broker.start()
    finally:
        done.set()


def test_kill_9_during_idempotent_produce_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("CHAOS_SEED", str(time.time_ns()))))
    broker = BrokerProcess([tmp_path / "logs"], overrides=OVERRIDES).start()
    broker.requested_port = broker.port or 0  # restarts keep the address the client knows
    acked: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    failed: list[str] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked[msg.partition()][msg.offset()] = msg.value()  # type: ignore[attr-defined]

    done = threading.Event()  # the killer is through: produce the rest and stop
    kills: list[float] = []
    try:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "batch.num.messages": 500,
                "message.timeout.ms": 120_000,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        producer.produce(TOPIC, b"warm-up", partition=0, on_delivery=report)
        assert producer.flush(30) == 0
        killer = threading.Thread(target=_killer, args=(broker, done, rng, kills), daemon=True)
        killer.start()
        sent = 0
        while not done.is_set() or sent < RECORDS:  # writing through every kill
            i, sent = sent, sent + 1
            while True:
                try:
                    producer.produce(
                        TOPIC, str(i).encode(), partition=i % PARTITIONS, on_delivery=report
                    )
                    break
                except BufferError:  # the local queue is full while the broker is down
                    producer.poll(0.05)
            producer.poll(0)
            if i % 1000 == 999:
                time.sleep(0.01)  # a steady stream, not one burst that ends before a kill
        assert producer.flush(180) == 0, "deliveries still pending"
        killer.join(60)
        assert broker.process is not None and broker.process.poll() is None

        assert failed == [], failed[:5]
        stored = _read_all(broker.bootstrap)
    finally:
        broker.stop()
    assert len(kills) == KILLS

    for partition in range(PARTITIONS):
        offsets = sorted(stored[partition])
        assert offsets == list(range(len(offsets))), f"offsets of {partition} are not dense"
        for offset, value in acked[partition].items():
            assert stored[partition].get(offset) == value, (partition, offset)
        values = list(stored[partition].values())
        assert len(values) == len(set(values)), f"a value of partition {partition} is duplicated"
    assert sum(len(a) for a in acked.values()) == sent + 1


def _read_all(bootstrap: str) -> dict[int, dict[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "idempotent-chaos-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    stored: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    while len(at_end) < PARTITIONS and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            raise AssertionError(msg.error())
        at_end.discard(msg.partition())
        stored[msg.partition()][msg.offset()] = msg.value()
    consumer.close()
    assert len(at_end) == PARTITIONS, "could not read the partitions to their end"
    return stored
