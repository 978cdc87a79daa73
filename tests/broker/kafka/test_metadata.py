"""Kafka's Metadata as a single node answers it: the advertised listener (not the bind
address), the ``cluster.id`` of ``meta.properties``, this node as controller, and every
partition led by this node with replicas and ISR ``[this node]``."""

from __future__ import annotations

from pathlib import Path

from odradek import Admin, NewTopic
from tests.broker.kafka.kwire import KafkaWire, metadata_body
from tests.broker_process import BrokerProcess

METADATA = 3


def _meta_properties(log_dir: Path) -> dict[str, str]:
    lines = (log_dir / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_metadata_advertises_the_configured_listener_and_the_stored_cluster_id(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    overrides = ["advertised.listeners=PLAINTEXT://broker.example:0", "node.id=7"]
    with BrokerProcess([logs], overrides=overrides) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topics([NewTopic("orders", 3)])
        for version in (1, 6, 8):  # the oldest with controller_id, the notes' floor, the max
            with KafkaWire(broker.port) as wire:  # type: ignore[arg-type]
                wire.send_body(metadata_body(["orders"], cid=9, version=version))
                cid, answer = wire.recv(METADATA, version)
            assert cid == 9
            (node,) = answer["brokers"]
            assert (node["node_id"], node["host"], node["port"]) == (
                7,
                "broker.example",
                broker.port,
            )
            assert answer["controller_id"] == 7
            if version >= 2:
                assert answer["cluster_id"] == _meta_properties(logs)["cluster.id"]
            (topic,) = answer["topics"]
            assert (topic["name"], topic["error_code"]) == ("orders", 0)
            partitions = sorted(topic["partitions"], key=lambda p: p["partition_index"])
            assert [p["partition_index"] for p in partitions] == [0, 1, 2]
            for p in partitions:
                assert (p["error_code"], p["leader_id"]) == (0, 7)
                assert p["replica_nodes"] == p["isr_nodes"] == [7]
    # the same cluster id after a restart: it is the stored one, not made up per start
    first = _meta_properties(logs)["cluster.id"]
    with (
        BrokerProcess([logs], overrides=overrides) as broker,
        KafkaWire(broker.port) as wire,  # type: ignore[arg-type]
    ):
        wire.send_body(metadata_body(None, version=8))
        _cid, answer = wire.recv(METADATA, 8)
    assert answer["cluster_id"] == first
