"""Hostile input on the Kafka port: each bad frame closes only its own connection with a
logged reason, the broker keeps serving the others (Kafka and native), and no log changes.
ApiVersions of a version not spoken gets the v0-layout UNSUPPORTED_VERSION reply instead."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import kafka
from tests.broker.kafka.kwire import KafkaWire, api_versions_body, metadata_body
from tests.broker.wire import Wire, bad_events, batch, dir_snapshot
from tests.broker_process import BrokerProcess, peer_of
from tests.protocol.kafka.strategies import fields_strategy

UNSUPPORTED_VERSION = 35
HOSTILE_TOPIC = "hostile"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that creates no topic by itself (a mutated request may ask it to), holding
    one topic with records, so that "no log changed" means something."""
    process = BrokerProcess(
        [tmp_path_factory.mktemp("hostile") / "logs"],
        overrides=["auto.create.topics.enable=false", "socket.request.max.bytes=1048576"],
    )
    process.start()
    with Wire(process.port) as wire:  # type: ignore[arg-type]
        wire.create_topic(HOSTILE_TOPIC, 1)
        wire.produce(HOSTILE_TOPIC, 0, batch(3))
    yield process
    assert process.stop() == 0
    assert not bad_events(process.lines), bad_events(process.lines)


def snapshot(broker: BrokerProcess) -> dict[str, tuple[int, int]]:
    return dir_snapshot(broker.log_dirs)


def serving(
    broker: BrokerProcess, kafka_wire: KafkaWire, native: Wire, peers: set[str] | None = None
) -> None:
    """Both connections opened before the hostile one still work, and so does a new one
    (whose peer is added to ``peers``, if given)."""
    fields = {"client_software_name": "t", "client_software_version": "1"}
    assert kafka_wire.call(18, 3, fields)["error_code"] == 0
    assert native.metadata([HOSTILE_TOPIC]).topics[0].error_code == 0
    with KafkaWire(broker.port) as fresh:  # type: ignore[arg-type]
        if peers is not None:
            peers.add(peer_of(fresh.sock))
        assert fresh.call(18, 3, fields)["error_code"] == 0


def closing_reasons(broker: BrokerProcess, since: int, peers: set[str]) -> list[str]:
    """The reasons logged since line ``since`` for closing the connections of ``peers``: the
    module's broker may log the previous test's closing after ``since`` was read, so only the
    lines about this test's own connections count."""
    closing = broker.wait_for_events(
        "closing connection", since_line=since, where=lambda e: e.get("peer") in peers
    )
    return [e["reason"] for e in closing]


HOSTILE_FRAMES = {
    # a Metadata v8 request cut short inside its topics array
    "truncated body": lambda: metadata_body(["some-topic"])[:-6],
    "trailing garbage": lambda: metadata_body(None) + b"\x00\x01\x02",
    "header only": lambda: struct.pack(">hhi", 3, 8, 7),
    "unknown api key": lambda: struct.pack(">hhih", 999, 0, 7, -1),
    "unsupported Metadata version": lambda: struct.pack(">hhih", 3, 13, 7, -1) + b"\x00" * 8,
    "unsupported Fetch version": lambda: struct.pack(">hhih", 1, 3, 7, -1) + b"\x00" * 8,
}
EXPECTED_REASON = {
    "truncated body": "malformed",
    "trailing garbage": "trailing bytes",
    "header only": "malformed",
    "unknown api key": "unknown api key 999",
    "unsupported Metadata version": "Metadata v13",
    "unsupported Fetch version": "Fetch v3",
}


@pytest.mark.parametrize("case", sorted(HOSTILE_FRAMES))
def test_bad_frame_closes_only_its_connection(broker: BrokerProcess, case: str) -> None:
    before = snapshot(broker)
    since = len(broker.lines)
    with (
        KafkaWire(broker.port) as bystander,  # type: ignore[arg-type]
        Wire(broker.port) as native,  # type: ignore[arg-type]
        KafkaWire(broker.port) as hostile,  # type: ignore[arg-type]
    ):
        peers = {peer_of(c.sock) for c in (bystander, native, hostile)}
        hostile.send_body(HOSTILE_FRAMES[case]())
        assert hostile.closed_by_peer()
        serving(broker, bystander, native, peers)
    reasons = closing_reasons(broker, since, peers)
    assert len(reasons) == 1 and EXPECTED_REASON[case] in reasons[0], reasons
    assert snapshot(broker) == before


def test_huge_size_prefix_refused_before_buffering(broker: BrokerProcess) -> None:
    since = len(broker.lines)
    with (
        KafkaWire(broker.port) as bystander,  # type: ignore[arg-type]
        Wire(broker.port) as native,  # type: ignore[arg-type]
        KafkaWire(broker.port) as hostile,  # type: ignore[arg-type]
    ):
        peers = {peer_of(c.sock) for c in (bystander, native, hostile)}
        # 2 GiB announced, 1 KiB sent: the broker must not wait for (or allocate) the rest
        hostile.sock.sendall(struct.pack(">i", 0x7FFF_FFF0) + b"\x00" * 1024)
        assert hostile.closed_by_peer(timeout_s=5)
        serving(broker, bystander, native, peers)
    (reason,) = closing_reasons(broker, since, peers)
    assert "2147483632" in reason or "too large" in reason or "exceeds" in reason, reason


def test_negative_size_prefix(broker: BrokerProcess) -> None:
    since = len(broker.lines)
    with KafkaWire(broker.port) as hostile:  # type: ignore[arg-type]
        peer = peer_of(hostile.sock)
        hostile.sock.sendall(b"\xff\xff\xff\xfe" + b"\x00" * 16)
        assert hostile.closed_by_peer(timeout_s=5)
    assert len(closing_reasons(broker, since, {peer})) == 1


@pytest.mark.parametrize("version", [4, 99, 32767])
def test_api_versions_unknown_version_gets_v0_reply(broker: BrokerProcess, version: int) -> None:
    with KafkaWire(broker.port) as wire:  # type: ignore[arg-type]
        wire.send_body(struct.pack(">hhih", 18, version, 4242, -1) + b"\x00" * 3)
        body = wire.recv_body()
        correlation_id, error_code, count = struct.unpack_from(">ihi", body)
        assert (correlation_id, error_code) == (4242, UNSUPPORTED_VERSION)
        ranges = [struct.unpack_from(">hhh", body, 10 + 6 * i) for i in range(count)]
        assert len(body) == 10 + 6 * count  # header v0 and the v0 body, nothing more
        assert (18, 0, 3) in ranges
        # the connection stays usable: the client retries with a version from the list
        assert (
            wire.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})[
                "error_code"
            ]
            == 0
        )


# ---- random and mutated requests --------------------------------------------------------------
# APIs that cannot change a log whatever their fields say (on this broker: auto-creation off,
# Produce only ever to topics that do not exist). Writes to topics or __consumer_offsets
# (CreateTopics, DeleteRecords, OffsetCommit, JoinGroup, ...) are left out: a mutation may turn
# them into a valid request that rightly changes a log.
READ_ONLY = [
    (18, 3),  # ApiVersions
    (3, 8),  # Metadata
    (1, 11),  # Fetch
    (2, 5),  # ListOffsets
    (32, 2),  # DescribeConfigs
    (10, 2),  # FindCoordinator
    (9, 5),  # OffsetFetch
    (15, 3),  # DescribeGroups
    (16, 2),  # ListGroups
    (0, 7),  # Produce (to a topic that does not exist: see _valid_request)
]


@st.composite
def _valid_request(draw: st.DrawFn) -> bytes:
    key, version = draw(st.sampled_from(READ_ONLY))
    api = kafka.APIS[key]
    fields = draw(fields_strategy(api.request, version, api.is_flexible(version)))
    if key == 1:
        fields["max_wait_ms"] = 0  # a random long poll would only slow the test
    if key == 0:
        for topic in fields["topic_data"]:
            topic["name"] = "missing-" + topic["name"]
    return kafka.encode_request(key, version, draw(st.integers(0, 2**31 - 1)), "fuzz", fields)


@st.composite
def hostile_bodies(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(_valid_request()))
    how = draw(st.sampled_from(["flip", "truncate", "extend", "splice", "random"]))
    if how == "flip":
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(body) - 1))
            body[at] = draw(st.integers(0, 255))
    elif how == "truncate":
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif how == "extend":
        body += draw(st.binary(min_size=1, max_size=16))
    elif how == "splice":
        at = draw(st.integers(0, len(body)))
        body[at:at] = draw(st.binary(min_size=1, max_size=8))
    else:
        body = bytearray(draw(st.binary(max_size=64)))
    return bytes(body)


def _exchange(port: int, body: bytes) -> None:
    """Send ``body`` as one frame, then a valid ApiVersions; read until that answer comes,
    the broker closes, or 3 s pass (an answered request is fine, a closed connection too)."""
    probe_cid = 0x7EADBEEF
    with KafkaWire(port, timeout_s=3) as wire:
        wire.send_body(body)
        wire.send_body(api_versions_body(cid=probe_cid))
        try:
            while struct.unpack_from(">i", wire.recv_body())[0] != probe_cid:
                pass
        except (TimeoutError, EOFError, ConnectionResetError):
            pass


@pytest.mark.slow
def test_random_and_mutated_requests_change_nothing(broker: BrokerProcess) -> None:
    before = snapshot(broker)

    @settings(
        max_examples=100,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(body=hostile_bodies())
    def check(body: bytes) -> None:
        _exchange(broker.port, body)
        assert broker.process is not None and broker.process.poll() is None

    check()
    with Wire(broker.port) as native, KafkaWire(broker.port) as kafka_wire:  # type: ignore[arg-type]
        serving(broker, kafka_wire, native)
    assert snapshot(broker) == before
    assert not bad_events(broker.lines), bad_events(broker.lines)[:3]
