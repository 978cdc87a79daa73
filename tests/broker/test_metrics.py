"""The metrics endpoint (docs/operations.md, "Metrics") of a real broker, scraped over HTTP as
Prometheus does and parsed with prometheus_client's own parser: what was produced, fetched,
committed and fsynced through both protocols shows up, per topic, partition, group, protocol
and API; the broker's state (offsets, sizes, lag, connections, log dirs, process) is read
when scraped; the endpoint answers only ``GET /metrics``; ``metrics.listener=`` turns it off."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from odradek import Admin, Consumer, NewTopic, Producer, TopicPartition
from odradek.protocol.frames import NATIVE_PREFACE
from tests.broker.kafka.clients import make_client
from tests.broker.kafka.clients.base import Rec
from tests.broker.kafka.kwire import KafkaWire
from tests.broker_process import BrokerProcess

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess([tmp_path_factory.mktemp("metrics") / "logs"]) as process:
        yield process


def scrape(broker: BrokerProcess) -> Samples:
    status, content_type, body = http_get(broker, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def http_get(broker: BrokerProcess, path: str, method: str = "GET") -> tuple[int, str, bytes]:
    assert broker.metrics_port is not None
    conn = http.client.HTTPConnection("127.0.0.1", broker.metrics_port, timeout=10)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.getheader("content-type", ""), response.read()
    finally:
        conn.close()


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_traffic_through_both_protocols_is_counted(broker: BrokerProcess) -> None:
    topic, group = "metered", "metered-readers"
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with Producer(broker.bootstrap, acks="all") as producer:  # native, fsynced
        for i in range(100):
            producer.send(topic, b"native-%03d" % i, partition=0)
        producer.flush(10)
    kafka = make_client("confluent", broker.bootstrap)
    try:
        offsets = kafka.produce(
            topic, [Rec(None, b"kafka-%02d" % i) for i in range(50)], partition=1
        )
        assert offsets == list(range(50))
    finally:
        kafka.close()
    with Consumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=1000) as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        assert sum(1 for _ in consumer) == 150
    with Admin(broker.bootstrap) as admin:
        admin.alter_group_offsets(group, {TopicPartition(topic, 0): 60})

    with (
        socket.create_connection(("127.0.0.1", broker.port)) as native_idle,
        KafkaWire(broker.port),  # type: ignore[arg-type]
    ):
        native_idle.sendall(NATIVE_PREFACE)
        samples = scrape(broker)

    # per topic: what was appended, and what fetches sent
    assert value(samples, "odradek_topic_records_in_total", topic=topic) == 150
    sizes = [value(samples, "odradek_partition_size_bytes", topic=topic, partition=p) for p in "01"]
    assert value(samples, "odradek_topic_bytes_in_total", topic=topic) == sum(sizes) > 0
    assert value(samples, "odradek_topic_bytes_out_total", topic=topic) >= sum(sizes)
    # per partition, read when scraped
    assert value(samples, "odradek_partition_log_end_offset", topic=topic, partition="0") == 100
    assert value(samples, "odradek_partition_log_end_offset", topic=topic, partition="1") == 50
    assert value(samples, "odradek_partition_log_start_offset", topic=topic, partition="0") == 0
    assert value(samples, "odradek_partition_segments", topic=topic, partition="0") == 1
    # the group's commit and its lag
    key = {"group": group, "topic": topic, "partition": "0"}
    assert value(samples, "odradek_group_committed_offset", **key) == 60
    assert value(samples, "odradek_group_lag", **key) == 40
    # requests per protocol and API, with latencies
    produce = {"api": "Produce"}
    assert value(samples, "odradek_request_duration_seconds_count", protocol="native", **produce)
    assert value(samples, "odradek_request_duration_seconds_count", protocol="kafka", **produce)
    assert value(samples, "odradek_request_duration_seconds_count", protocol="native", api="Fetch")
    kafka_versions = value(
        samples, "odradek_request_duration_seconds_count", protocol="kafka", api="ApiVersions"
    )
    assert kafka_versions >= 1
    count = value(samples, "odradek_request_duration_seconds_count", protocol="native", **produce)
    inf = value(
        samples, "odradek_request_duration_seconds_bucket", protocol="native", le="+Inf", **produce
    )
    assert inf == count
    # acks=all went through the group commit
    assert value(samples, "odradek_fsync_round_duration_seconds_count") >= 1
    assert value(samples, "odradek_fsync_round_duration_seconds_sum") > 0
    # the state of the broker
    assert value(samples, "odradek_connections", protocol="native") >= 1
    assert value(samples, "odradek_connections", protocol="kafka") >= 1
    assert value(samples, "odradek_log_dir_offline", dir=str(broker.log_dirs[0])) == 0
    assert value(samples, "odradek_fetch_waiting") == 0
    assert value(samples, "odradek_produce_waiting_fsync") == 0
    assert value(samples, "process_resident_memory_bytes") > 10 * 2**20
    assert value(samples, "process_open_fds") > 0


def test_a_deleted_topic_leaves_the_metrics(broker: BrokerProcess) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("short-lived", 1)])
        with Producer(broker.bootstrap) as producer:
            producer.send("short-lived", b"x").result(10)
        assert value(scrape(broker), "odradek_topic_records_in_total", topic="short-lived") == 1
        admin.delete_topics(["short-lived"])
    names = {(name, dict(labels).get("topic")) for name, labels in scrape(broker)}
    assert ("odradek_topic_records_in_total", "short-lived") not in names
    assert ("odradek_partition_log_end_offset", "short-lived") not in names


def test_only_get_metrics_is_served(broker: BrokerProcess) -> None:
    assert http_get(broker, "/")[0] == 404
    assert http_get(broker, "/metrics", method="POST")[0] == 405
    status, _type, body = http_get(broker, "/metrics", method="HEAD")
    assert (status, body) == (200, b"")
    with socket.create_connection(("127.0.0.1", broker.metrics_port)) as raw:  # type: ignore[arg-type]
        raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 400")
    assert scrape(broker)  # the endpoint and the broker carry on


def test_an_empty_metrics_listener_turns_the_endpoint_off(tmp_path: Path) -> None:
    with BrokerProcess([tmp_path / "logs"], overrides=["metrics.listener="]) as broker:
        (started,) = [e for e in broker.lines if e.get("event") == "broker started"]
        assert started["metrics_port"] is None
        with Admin(broker.bootstrap) as admin:  # the broker itself serves as ever
            admin.create_topics([NewTopic("t", 1)])
