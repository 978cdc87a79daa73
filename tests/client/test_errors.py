"""Error codes map to the right exception classes, locally and from a real broker."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

from odradek.client import (
    Admin,
    Client,
    InvalidTopicError,
    KafkaConnectionError,
    KafkaError,
    MessageSizeTooLargeError,
    NewTopic,
    OffsetOutOfRangeError,
    Producer,
    TopicAlreadyExistsError,
    TopicPartition,
    UnknownTopicOrPartitionError,
    errors,
    for_code,
)
from odradek.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (1, "OffsetOutOfRangeError"),
        (2, "CorruptRecordError"),
        (3, "UnknownTopicOrPartitionError"),
        (10, "MessageSizeTooLargeError"),
        (16, "NotCoordinatorError"),
        (17, "InvalidTopicError"),
        (22, "IllegalGenerationError"),
        (25, "UnknownMemberIdError"),
        (27, "RebalanceInProgressError"),
        (36, "TopicAlreadyExistsError"),
        (56, "KafkaStorageError"),
        (-1, "UnknownServerError"),
    ],
)
def test_codes_map_to_named_classes(code: int, name: str) -> None:
    error = for_code(code, "detail")
    assert type(error).__name__ == name
    assert type(error) is getattr(errors, name)
    assert isinstance(error, KafkaError)
    assert error.code == code and error.retriable == ErrorCode(code).retriable
    assert error.message == "detail" and "detail" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and copy.message == "detail"


def test_every_code_has_a_class_and_unknown_codes_fall_back() -> None:
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        assert errors.error_class(code).code == code
    assert type(for_code(9999)).__name__ == "UnknownServerError"
    with pytest.raises(ValueError):
        for_code(0)
    assert KafkaConnectionError().retriable


def test_unknown_topic_with_auto_create_off(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=["auto.create.topics.enable=false"])
    with Producer(broker.bootstrap, max_block_ms=300) as producer:
        future = producer.send("missing", b"x")
        with pytest.raises(UnknownTopicOrPartitionError, match="300 ms"):
            future.result(10)
    with Client(broker.bootstrap) as client:
        meta = client.metadata(["missing"], allow_auto_create=True)
        assert meta.topics["missing"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        fetched = client.fetch_raw({TopicPartition("missing", 0): 0})
        assert isinstance(fetched[TopicPartition("missing", 0)].error, UnknownTopicOrPartitionError)
        with pytest.raises(UnknownTopicOrPartitionError):
            client.list_offsets({TopicPartition("missing", 0): -1})


def test_invalid_topic_and_message_too_large(bootstrap: str, topic: str) -> None:
    with Producer(bootstrap) as producer:
        with pytest.raises(InvalidTopicError):
            producer.send("bad/topic", b"x").result(10)
        # bigger than the producer's max_request_size: refused before sending
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic + "-auto", b"x" * 2_000_000).result(10)
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, {"max.message.bytes": "1000"})])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 1)])
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic("..", 1)])
    # accepted by the producer, refused by the broker (the topic's max.message.bytes)
    with Producer(bootstrap) as producer:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, b"x" * 5000).result(30)
        assert producer.send(topic, b"small").result(30).offset == 0


def test_non_retriable_fetch_error_is_raised(bootstrap: str, topic: str) -> None:
    with Producer(bootstrap) as producer:
        producer.send(topic, b"x").result(30)
    with Client(bootstrap) as client:
        part = client.fetch_raw({TopicPartition(topic, 0): 5})[TopicPartition(topic, 0)]
        assert isinstance(part.error, OffsetOutOfRangeError) and not part.error.retriable


def test_no_broker_is_a_connection_error() -> None:
    client = Client("127.0.0.1:1", request_timeout_ms=300, retry_backoff_ms=50)
    with pytest.raises(KafkaConnectionError, match="no bootstrap server answered"):
        client.metadata()
    client.close()
