"""What only Kafka's protocol has, answered as a single-node Kafka leader would: leader epochs
(the one epoch is 0), fetch sessions (declined with session id 0), transactions (refused),
Produce v0-2 (advertised, refused per partition) and the leader epoch stamped on appends."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import parse_batch_header
from tests.broker.kafka.kwire import KafkaWire, fetch_fields
from tests.broker_process import BrokerProcess

FETCH, LIST_OFFSETS, PRODUCE, INIT_PRODUCER_ID, FIND_COORDINATOR = 1, 2, 0, 22, 10


def _produce(topic: str, version: int, transactional_id: str | None = None) -> dict[str, Any]:
    return {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [{"index": 0, "records": encode_batch([(b"k", b"v", 1000)])}],
            }
        ],
    }


@pytest.fixture
def wire(shared_broker: BrokerProcess, new_topic: str) -> Any:
    with KafkaWire(shared_broker.port) as connection:  # type: ignore[arg-type]
        yield connection


def _partition(fields: dict[str, Any]) -> dict[str, Any]:
    (topic,) = fields["responses"]
    (partition,) = topic["partitions"]
    return partition


@pytest.mark.parametrize(
    ("epoch", "code"),
    [
        (-1, ErrorCode.NONE),
        (0, ErrorCode.NONE),
        (1, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (-2, ErrorCode.FENCED_LEADER_EPOCH),
    ],
)
def test_fetch_checks_the_current_leader_epoch(
    wire: KafkaWire, new_topic: str, epoch: int, code: ErrorCode
) -> None:
    assert (
        _partition(wire.call(FETCH, 11, fetch_fields(new_topic, leader_epoch=epoch)))["error_code"]
        == code
    )


def test_list_offsets_checks_the_epoch_and_answers_epoch_0(wire: KafkaWire, new_topic: str) -> None:
    def ask(epoch: int) -> dict[str, Any]:
        request = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": new_topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}
                    ],
                }
            ],
        }
        (topic,) = wire.call(LIST_OFFSETS, 5, request)["topics"]
        (partition,) = topic["partitions"]
        return partition

    assert ask(0) | {"timestamp": None} == {
        "partition_index": 0,
        "error_code": 0,
        "timestamp": None,
        "offset": 0,
        "leader_epoch": 0,
    }
    assert ask(3)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_fetch_sessions_are_declined_with_session_id_0(wire: KafkaWire, new_topic: str) -> None:
    new_session = wire.call(FETCH, 11, fetch_fields(new_topic, session_id=0, session_epoch=0))
    assert (new_session["error_code"], new_session["session_id"]) == (0, 0)
    unknown = wire.call(FETCH, 11, fetch_fields(new_topic, session_id=77, session_epoch=1))
    assert unknown["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert unknown["responses"] == []
    bad_epoch = wire.call(FETCH, 11, fetch_fields(new_topic, session_id=0, session_epoch=5))
    assert bad_epoch["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_appends_are_stamped_with_leader_epoch_0(wire: KafkaWire, new_topic: str) -> None:
    batch = encode_batch([(b"k", b"v", 1000)])
    assert parse_batch_header(batch, 0).partition_leader_epoch == -1  # as clients send it
    (topic,) = wire.call(PRODUCE, 7, _produce(new_topic, 7))["responses"]
    assert topic["partition_responses"][0]["error_code"] == 0
    records = _partition(wire.call(FETCH, 11, fetch_fields(new_topic, leader_epoch=0)))["records"]
    assert parse_batch_header(records, 0).partition_leader_epoch == 0


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_refused_per_partition(
    wire: KafkaWire, new_topic: str, version: int
) -> None:
    (topic,) = wire.call(PRODUCE, version, _produce(new_topic, version))["responses"]
    assert topic["partition_responses"][0]["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert _partition(wire.call(FETCH, 11, fetch_fields(new_topic)))["high_watermark"] == 0


def test_transactions_are_refused(wire: KafkaWire, new_topic: str) -> None:
    init = wire.call(
        INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000}
    )
    assert (init["error_code"], init["producer_id"]) == (ErrorCode.INVALID_REQUEST, -1)
    coordinator = wire.call(FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
    assert coordinator["error_code"] == ErrorCode.INVALID_REQUEST
    assert "transactions" in coordinator["error_message"]
    (topic,) = wire.call(PRODUCE, 7, _produce(new_topic, 7, transactional_id="tx"))["responses"]
    assert topic["partition_responses"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert _partition(wire.call(FETCH, 11, fetch_fields(new_topic)))["high_watermark"] == 0


def test_idempotent_producer_ids_are_fresh_each_time(wire: KafkaWire) -> None:
    request = {"transactional_id": None, "transaction_timeout_ms": 60000}
    first = wire.call(INIT_PRODUCER_ID, 4, request)
    second = wire.call(INIT_PRODUCER_ID, 4, request)
    assert first["error_code"] == second["error_code"] == 0
    assert (first["producer_epoch"], second["producer_epoch"]) == (0, 0)
    assert second["producer_id"] != first["producer_id"] >= 0
