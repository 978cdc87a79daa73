"""Connection loss is retried: a producer and a consumer survive a broker restart on the same
port; a producer whose broker never returns fails its records after delivery_timeout_ms;
silent bootstrap servers share a call's timeout."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest

from odradek.client import (
    Admin,
    AsyncClient,
    Client,
    Consumer,
    KafkaConnectionError,
    KafkaTimeoutError,
    NewTopic,
    Producer,
    TopicPartition,
    UnsupportedVersionError,
)
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import NATIVE_PREFACE
from odradek.protocol.messages import decode_request, encode_response
from tests.broker_process import BrokerProcess


@pytest.mark.slow
def test_producer_and_consumer_survive_a_broker_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    tp = TopicPartition("restart", 0)
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("restart", 1)])
    with (
        Producer(broker.bootstrap, acks="all", retry_backoff_ms=20) as producer,
        Consumer(
            bootstrap_servers=broker.bootstrap,
            auto_offset_reset="earliest",
            retry_backoff_ms=20,
            consumer_timeout_ms=20_000,
        ) as consumer,
    ):
        consumer.assign([tp])
        before = [producer.send("restart", b"%d" % i) for i in range(100)]
        producer.flush()
        assert [int(r.value) for r in _take(consumer, 100)] == list(range(100))  # type: ignore[arg-type]

        broker.stop()
        during = [producer.send("restart", b"%d" % i) for i in range(100, 200)]
        assert consumer.poll(timeout_ms=100) == {}  # fetches fail and back off
        broker.start()  # same port, same data dir

        producer.flush(timeout=30)
        offsets = [f.result().offset for f in before + during]
        assert offsets == list(range(200))
        assert [int(r.value) for r in _take(consumer, 100)] == list(range(100, 200))  # type: ignore[arg-type]


def _take(consumer: Consumer, count: int) -> list:
    out = []
    for record in consumer:
        out.append(record)
        if len(out) == count:
            break
    return out


def test_client_call_retries_until_its_timeout(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    client = Client(broker.bootstrap, request_timeout_ms=400, retry_backoff_ms=20)
    assert client.metadata().brokers[0].port == broker.port
    broker.stop()
    with pytest.raises(KafkaConnectionError):
        client.metadata()
    broker.start()
    assert client.metadata().brokers[0].port == broker.port  # reconnected
    client.close()


def test_undeliverable_records_fail_after_delivery_timeout(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    producer = Producer(
        broker.bootstrap,
        delivery_timeout_ms=600,
        request_timeout_ms=300,
        retry_backoff_ms=20,
        linger_ms=0,
    )
    assert producer.partitions_for("gone") == {0}
    broker.stop()
    future = producer.send("gone", b"x")
    with pytest.raises((KafkaConnectionError, KafkaTimeoutError)):
        future.result(10)
    producer.close(timeout=5)


@pytest.mark.slow
def test_a_stalled_broker_times_out_requests_which_are_retried(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    import os
    import signal

    broker = broker_factory()
    with Producer(broker.bootstrap, request_timeout_ms=500, retry_backoff_ms=20) as producer:
        assert producer.send("stall", b"before").result(30).offset == 0
        assert broker.process is not None
        os.kill(broker.process.pid, signal.SIGSTOP)  # the broker stops answering
        try:
            future = producer.send("stall", b"during")
            with pytest.raises(TimeoutError):
                future.result(1.0)  # the request times out; the producer keeps retrying
        finally:
            os.kill(broker.process.pid, signal.SIGCONT)
        assert future.result(30).offset >= 1


def test_silent_bootstrap_servers_share_the_calls_timeout(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """Four bootstrap addresses that accept connections and never answer (a listening socket
    nobody accepts from), then the broker: every address is tried, in order, within one
    request_timeout_ms, each given its share of the time left (before, each had a whole
    request_timeout_ms, so the call took four of them and never reached the broker)."""
    broker = broker_factory()
    silent = [socket.create_server(("127.0.0.1", 0)) for _ in range(4)]
    addresses = [f"127.0.0.1:{s.getsockname()[1]}" for s in silent]
    try:
        client = Client([*addresses, broker.bootstrap], request_timeout_ms=2000)
        started_s = time.monotonic()
        assert client.metadata().brokers[0].port == broker.port
        assert time.monotonic() - started_s < 4  # 4 silent addresses x 2 s before
        client.close()
        alone = Client(addresses, request_timeout_ms=1000, retry_backoff_ms=20)
        with pytest.raises(KafkaConnectionError) as caught:
            alone.metadata()
        assert all(address in str(caught.value) for address in addresses)
        alone.close()
    finally:
        for sock in silent:
            sock.close()


def _serve_one_bad_handshake(server: socket.socket) -> bytes:
    """Accept one connection, answer its ApiVersions with UNSUPPORTED_VERSION, then wait for
    the client to close it: what the connection gets after the answer (``b""``: closed)."""
    conn, _ = server.accept()
    with conn:
        conn.settimeout(10)
        stream = conn.makefile("rb")
        assert stream.read(len(NATIVE_PREFACE)) == NATIVE_PREFACE
        (size,) = struct.unpack(">I", stream.read(4))
        request, _ = decode_request(stream.read(size))
        answer = m.ApiVersionsResponse(
            correlation_id=request.correlation_id, error_code=ErrorCode.UNSUPPORTED_VERSION
        )
        conn.sendall(b"".join(encode_response(answer)))
        try:
            return conn.recv(1)
        except TimeoutError:
            return b"still open after 10 s"


@pytest.mark.parametrize("face", ["blocking", "asyncio"])
def test_a_refused_handshake_closes_its_connection(face: str) -> None:
    """A broker whose ApiVersions answer is an error (not a lost connection): the call raises
    that error and the client closes the new connection (before, the handshake's connection
    stayed open, with its reader thread on the blocking face)."""
    with socket.create_server(("127.0.0.1", 0)) as server, ThreadPoolExecutor(1) as pool:
        seen = pool.submit(_serve_one_bad_handshake, server)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(UnsupportedVersionError):
            if face == "blocking":
                with Client(address, request_timeout_ms=5000) as client:
                    client.metadata()
            else:

                async def call() -> None:
                    async with AsyncClient(address, request_timeout_ms=5000) as client:
                        await client.metadata()

                anyio.run(call)
        assert seen.result() == b""
