"""The pieces the faces share without I/O: the frozen configs and their validation, the
drivers of sans-I/O operations and the faces they generate, the request copy that carries the
correlation id, and the fetcher's one Fetch in flight per partition."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from odradek.client import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    ConsumerConfig,
    Producer,
    ProducerConfig,
    TopicPartition,
)
from odradek.client.drivers import Call, Sleep, drive, drive_async
from odradek.client.fetcher import Fetcher
from odradek.client.protocol_core import ProtocolCore
from odradek.protocol import messages as m
from odradek.protocol.record_batch import Compression


def test_the_producer_config_normalizes_and_rejects_bad_options() -> None:
    config = ProducerConfig(bootstrap_servers="h:1,h2", acks="all", compression_type="zstd")
    assert config.bootstrap_servers == (("h", 1), ("h2", 9092))
    assert config.acks == -1 and config.compression_type is Compression.ZSTD
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.linger_ms = 1  # type: ignore[misc]
    for bad in ({"acks": 2}, {"acks": True}, {"compression_type": "brotli"}, {"linger_ms": -1},
                {"batch_size": 0}, {"max_in_flight": 0}):  # fmt: skip
        with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
            ProducerConfig(bootstrap_servers="h", **bad)
    with pytest.raises(TypeError):
        ProducerConfig(bootstrap_servers="h", lingerms=5)  # type: ignore[call-arg]


def test_the_delivery_timeout_covers_linger_and_the_request_timeout() -> None:
    """Kafka's rule: delivery.timeout.ms >= linger.ms + request.timeout.ms; a value given
    below it is refused, one not given is raised to it."""
    with pytest.raises(ValueError, match=r"delivery_timeout_ms .* \(30005\), not 10000"):
        ProducerConfig(bootstrap_servers="h", delivery_timeout_ms=10_000)
    raised = ProducerConfig(bootstrap_servers="h", linger_ms=100, request_timeout_ms=200_000)
    assert raised.delivery_timeout_ms == 200_100
    assert ProducerConfig(bootstrap_servers="h").delivery_timeout_ms == 120_000
    kept = ProducerConfig(bootstrap_servers="h", request_timeout_ms=300, delivery_timeout_ms=600)
    assert kept.delivery_timeout_ms == 600
    with pytest.raises(ValueError, match="200100"):  # the default's value, but given
        ProducerConfig(bootstrap_servers="h", linger_ms=100, request_timeout_ms=200_000,
                       delivery_timeout_ms=120_000)  # fmt: skip


def test_the_consumer_config_rejects_bad_options() -> None:
    config = ConsumerConfig(bootstrap_servers="h", partition_assignment_strategy="roundrobin")
    assert config.partition_assignment_strategy == ("roundrobin",)
    for bad in ({"auto_offset_reset": "newest"}, {"group_id": ""}, {"max_poll_records": 0},
                {"partition_assignment_strategy": ["range", "fair"]}):  # fmt: skip
        with pytest.raises(ValueError):
            ConsumerConfig(bootstrap_servers="h", **bad)


def test_the_faces_show_the_config_options_as_their_signature() -> None:
    producer = inspect.signature(Producer)
    assert list(producer.parameters)[:2] == ["bootstrap_servers", "client_id"]
    fields = {f.name for f in dataclasses.fields(ProducerConfig)}
    assert set(producer.parameters) == fields == set(inspect.signature(AsyncProducer).parameters)
    consumer = inspect.signature(Consumer)
    assert next(iter(consumer.parameters.values())).kind is inspect.Parameter.VAR_POSITIONAL
    assert "group_id" in consumer.parameters and "session_timeout_ms" in consumer.parameters


def test_an_operation_is_one_method_of_each_face_with_its_signature_and_doc() -> None:
    for name in ("create_topics", "list_group_offsets", "describe_segments"):
        blocking, asynchronous = getattr(Admin, name), getattr(AsyncAdmin, name)
        assert blocking.__doc__ and blocking.__doc__ == asynchronous.__doc__
        assert inspect.iscoroutinefunction(asynchronous)
        assert not inspect.iscoroutinefunction(blocking)
        assert inspect.signature(blocking) == inspect.signature(asynchronous)
        assert "Op[" not in str(inspect.signature(blocking))
    assert inspect.signature(Consumer.position).return_annotation == "int"
    assert inspect.iscoroutinefunction(AsyncConsumer.end_offsets)
    assert inspect.iscoroutinefunction(AsyncProducer.send)
    assert AsyncProducer.send.__doc__ == Producer.send.__doc__
    assert inspect.signature(AsyncProducer.send) == inspect.signature(Producer.send)


def _op() -> Any:
    """Two calls, a retry after a failure thrown in, a sleep; returns what it saw."""
    seen = [(yield Call(m.MetadataRequest(correlation_id=0)))]
    try:
        yield Call(m.ListOffsetsRequest(correlation_id=0))
    except KeyError as exc:
        seen.append(f"caught {exc}")
    seen.append((yield Sleep(0.5)))
    return seen


class _IO:
    def __init__(self) -> None:
        self.calls = 0

    def call(self, request: m.Request, raw: Any) -> Any:
        self.calls += 1
        if isinstance(request, m.ListOffsetsRequest):
            raise KeyError("lost")
        return ("answer", raw)

    def sleep(self, seconds: float) -> str:
        return f"slept {seconds}"


class _AsyncIO(_IO):
    async def call(self, request: m.Request, raw: Any) -> Any:  # type: ignore[override]
        return super().call(request, raw)

    async def sleep(self, seconds: float) -> str:  # type: ignore[override]
        return super().sleep(seconds)


def test_both_drivers_carry_out_effects_and_throw_failures_in() -> None:
    import anyio

    expected = [("answer", b""), "caught 'lost'", "slept 0.5"]
    io = _IO()
    assert drive(_op(), io) == expected and io.calls == 2
    assert anyio.run(drive_async, _op(), _AsyncIO()) == expected


def test_a_request_is_sent_as_a_copy_with_its_correlation_id() -> None:
    core = ProtocolCore()
    request = m.MetadataRequest(correlation_id=0)
    first, _ = core.send(request, token=1)
    second, _ = core.send(request, token=2)  # the same object, sent again
    assert request.correlation_id == 0 and first != second


def positioned_fetcher() -> tuple[Fetcher, TopicPartition, TopicPartition]:
    """A fetcher with partitions ``a`` at offset 5 and ``b`` at 7."""
    fetcher = Fetcher(ConsumerConfig(bootstrap_servers="h"))
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    fetcher.assign([a, b])
    fetcher.seek(a, 5)
    fetcher.seek(b, 7)
    return fetcher, a, b


def test_a_paused_partition_is_not_fetched() -> None:
    fetcher, a, b = positioned_fetcher()
    fetcher.pause([a])
    assert fetcher.fetchable() == {b: 7}
    with pytest.raises(ValueError):
        fetcher.pause([TopicPartition("t", 2)])  # not assigned: nothing changes
    fetcher.assign([a, b])  # kept partitions stay paused
    assert fetcher.paused == {a}
    fetcher.resume([a])
    assert fetcher.fetchable() == {a: 5, b: 7}
    fetcher.pause([a, b])
    fetcher.assign([b])  # a reassignment keeps only the pauses of what it keeps
    assert fetcher.paused == {b} and fetcher.fetchable() == {}


def test_a_partition_is_in_one_fetch_at_a_time() -> None:
    fetcher, a, b = positioned_fetcher()
    first = fetcher.fetchable()
    assert first == {a: 5, b: 7}
    fetcher.fetch_started(first)
    assert fetcher.fetchable() == {}
    fetcher.seek(a, 9)  # the answer for a will be stale: a may be fetched again at once
    second = fetcher.fetchable()
    assert second == {a: 9}
    fetcher.fetch_started(second)
    fetcher.fetch_ended(first)  # the first answer arrives: b is free, a stays with the second
    assert fetcher.fetchable() == {b: 7}
