"""Hostile and broken input: each case closes its connection or gets a clean error, the broker
logs a reason, keeps serving every other connection, and touches no log file.

Every test runs under ``isolated``: a bystander connection opened before the bad input must
still work after it, a fresh connection must read the victim topic unchanged, the partition
directories must be byte-for-byte as before (sizes and mtimes), and nothing is logged at
error level (a handler crash would be).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import FrameDecoder
from odradek.protocol.record_batch import recompute_crc
from tests.broker.wire import Wire, bad_events, batch, dir_snapshot, fetch_all
from tests.broker_process import BrokerProcess, peer_of

MAX_REQUEST_BYTES = 4 * 1024 * 1024  # socket.request.max.bytes of this module's broker
VICTIM = "victim"
VICTIM_RECORDS = 12


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        [tmp_path_factory.mktemp("bad-input") / "logs"],
        overrides=[f"socket.request.max.bytes={MAX_REQUEST_BYTES}"],
    ).start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic(VICTIM, partitions=2)
        for i in range(3):
            wire.produce(VICTIM, 0, batch(4, tag=f"v{i}-"), acks=m.ACKS_ALL)
    yield broker
    assert broker.stop() == 0


class Isolation:
    """The test's view of the module's broker. The broker is shared: a line the previous
    test's connection caused may be parsed after ``first_line`` was read, so the checks keep
    the lines about this test's own connections (``peers``) or requests."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.first_line = len(broker.lines)
        self.peers: set[str] = set()  # every connection this test opened, as the broker logs it
        self.reasons_read = 0  # closing connection events already returned

    def ours(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` is about one of this test's connections."""
        return event.get("peer") in self.peers

    def wait_for(
        self,
        name: str,
        where: Callable[[dict[str, Any]], bool],
        timeout_s: float = 5.0,
    ) -> list[dict[str, Any]]:
        """The broker's log lines named ``name`` since the test began for which ``where``
        holds (waits for one)."""
        found = self.broker.wait_for_events(
            name, since_line=self.first_line, timeout_s=timeout_s, where=where
        )
        assert found, f"no {name!r} event; got {self.broker.lines[self.first_line :]}"
        return found

    def closed_reason(self) -> str:
        """The reason of the next of this test's connections closed since the last call
        (waits for it)."""
        self.reasons_read += 1
        found = self.broker.wait_for_events(
            "closing connection",
            count=self.reasons_read,
            since_line=self.first_line,
            where=self.ours,
        )
        assert len(found) >= self.reasons_read, f"no new 'closing connection' in {found}"
        return found[self.reasons_read - 1]["reason"]

    def connect(self) -> Wire:
        wire = Wire(self.broker.port)  # type: ignore[arg-type]
        self.peers.add(peer_of(wire.sock))
        return wire


@pytest.fixture
def isolated(target: BrokerProcess) -> Iterator[Isolation]:
    roots = target.log_dirs
    before = dir_snapshot(roots)
    isolation = Isolation(target)
    with isolation.connect() as bystander:
        bystander.call(m.ApiVersionsRequest(correlation_id=0))
        yield isolation
        assert target.process is not None and target.process.poll() is None, "broker died"
        records = fetch_all(bystander, VICTIM)  # the connection opened before still works
    with isolation.connect() as fresh:
        assert fetch_all(fresh, VICTIM) == records
        assert fresh.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0
    assert len(records) == VICTIM_RECORDS
    assert dir_snapshot(roots) == before, "a log file was touched"
    assert bad_events(target.lines[isolation.first_line :]) == []


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def body_of(header: object, tail: bytes = b"") -> bytes:
    """A message body: header length, msgpack header (any value), raw tail."""
    encoded = msgspec.msgpack.encode(header)
    return struct.pack(">I", len(encoded)) + encoded + tail


def raw_produce(wire: Wire, header: list[object], tail: bytes) -> None:
    wire.send_bytes(frame(body_of(header, tail)))


# -- frames that close the connection --------------------------------------------------------


def test_garbage_frame(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        wire.send_bytes(frame(b"\xc1" * 40))
        assert wire.closed_by_peer()
    assert "malformed request" in isolated.closed_reason()


def test_frame_that_promises_more_than_it_sends(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        wire.send_bytes(struct.pack(">I", 1000) + b"x" * 10)
        wire.sock.shutdown(socket.SHUT_WR)
        assert wire.closed_by_peer()
    assert "stream ended 10 bytes into a 1000-byte frame" in isolated.closed_reason()


def test_frame_above_socket_request_max_bytes_is_refused_before_buffering(
    isolated: Isolation,
) -> None:
    with isolated.connect() as wire:
        wire.send_bytes(struct.pack(">I", MAX_REQUEST_BYTES + 1))  # the prefix alone
        assert wire.closed_by_peer(timeout_s=5.0)  # without waiting for a single body byte
    reason = isolated.closed_reason()
    assert f"frame of {MAX_REQUEST_BYTES + 1} bytes exceeds the limit" in reason


def test_zero_length_frame(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        wire.send_bytes(b"\x00\x00\x00\x00")
        assert wire.closed_by_peer()
    assert "zero-length frame" in isolated.closed_reason()


def test_header_length_lies(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        wire.send_bytes(frame(struct.pack(">I", 500) + msgspec.msgpack.encode([18, 0, 1])))
        assert wire.closed_by_peer()
    assert "header length 500" in isolated.closed_reason()


def test_unknown_api_key(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        wire.send_bytes(frame(body_of([99, 0, 7])))
        assert wire.closed_by_peer()
    assert "unknown api key 99" in isolated.closed_reason()


def test_schema_violation(isolated: Isolation) -> None:
    with isolated.connect() as wire:  # a Metadata request whose topics are not strings
        wire.send_bytes(frame(body_of([3, 0, 7, [1, 2, 3], True])))
        assert wire.closed_by_peer()
    assert "invalid MetadataRequest" in isolated.closed_reason()


def test_raw_tail_shorter_or_longer_than_declared(isolated: Isolation) -> None:
    data = batch(3)
    for tail in (data[:-10], data + b"extra"):
        with isolated.connect() as wire:
            header = [0, 0, 7, m.ACKS_LEADER, 1000, [[VICTIM, [[0, len(data)]]]]]
            raw_produce(wire, header, tail)
            assert wire.closed_by_peer()
        reason = isolated.closed_reason()
        assert f"declares {len(data)} raw bytes but the body carries {len(tail)}" in reason


def test_a_raw_tail_on_a_request_that_has_none(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        wire.send_bytes(frame(body_of([18, 0, 7], b"junk")))
        assert wire.closed_by_peer()
    assert "declares 0 raw bytes but the body carries 4" in isolated.closed_reason()


# -- answered: unsupported versions ----------------------------------------------------------


def test_unsupported_version_is_answered_and_the_connection_stays(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        response = wire.call(m.ApiVersionsRequest(correlation_id=0, version=3))
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert {k.api_key for k in response.api_keys} >= {0, 1, 3, 18}  # so it can downgrade
        metadata = wire.call(m.MetadataRequest(correlation_id=0, version=9, topics=[VICTIM]))
        assert isinstance(metadata, m.MetadataResponse)
        assert metadata.error_code == ErrorCode.UNSUPPORTED_VERSION
        # An unsupported Produce is refused whole: nothing appended (checked by `isolated`).
        request, raw = wire.produce_request([(VICTIM, 0, batch(2))])
        request.version = 1
        produce = wire.call(request, raw)
        assert produce.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert wire.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0
    assert isolated.wait_for("unsupported request version", where=isolated.ours)


def test_every_known_api_is_answered(isolated: Isolation) -> None:
    """A request of any api the broker advertises gets a response of its type, never a
    dropped connection (an api without a handler answers with an error code)."""
    with isolated.connect() as wire:
        response = wire.call(m.ListGroupsRequest(correlation_id=0))
        assert isinstance(response, m.ListGroupsResponse)
        assert wire.call(m.ApiVersionsRequest(correlation_id=0)).error_code == 0


# -- answered: bad produce requests ----------------------------------------------------------


def produce_error(wire: Wire, sections: list[tuple[str, int, bytes]], acks: int = 1) -> Any:
    request, raw = wire.produce_request(sections, acks=acks)
    return wire.call(request, raw)


def partition_codes(response: Any) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partitions]


def test_invalid_topic_names_in_produce(isolated: Isolation, target: BrokerProcess) -> None:
    names = ["../escape", "a/b", "", ".", "..", "x" * 250, "nul\x00byte"]
    with isolated.connect() as wire:
        response = produce_error(wire, [(name, 0, batch(1)) for name in names])
    assert partition_codes(response) == [ErrorCode.INVALID_TOPIC_EXCEPTION] * len(names)
    assert not (target.log_dirs[0].parent / "escape-0").exists()
    # "produce rejected" names no connection: its examples name the topics
    assert isolated.wait_for(
        "produce rejected",
        where=lambda e: any(x.get("topic") in names for x in e.get("examples", [])),
    )


def test_unknown_topic_and_partition_in_produce(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        response = produce_error(wire, [("no-such-topic", 0, batch(1)), (VICTIM, 9, batch(1))])
    assert partition_codes(response) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2


def test_batch_above_message_max_bytes(isolated: Isolation) -> None:
    big = batch(1, value_bytes=1_100_000)  # message.max.bytes is 1048588
    with isolated.connect() as wire:
        response = produce_error(wire, [(VICTIM, 0, big), (VICTIM, 1, batch(1) + big)])
    assert partition_codes(response) == [ErrorCode.MESSAGE_TOO_LARGE] * 2
    assert "max.message.bytes" in response.topics[0].partitions[0].error_message


def test_batch_with_a_bad_crc(isolated: Isolation) -> None:
    damaged = bytearray(batch(3))
    damaged[-2] ^= 0xFF  # a byte of the last record's value
    with isolated.connect() as wire:
        # A good batch before the bad one is not appended either: validation comes first.
        response = produce_error(wire, [(VICTIM, 0, batch(2) + bytes(damaged))])
    (result,) = response.topics[0].partitions
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE and "CRC" in result.error_message


def _with(data: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = False) -> bytes:
    changed = bytearray(data)
    struct.pack_into(fmt, changed, offset, value)
    if fix_crc:
        recompute_crc(changed)
    return bytes(changed)


# Kafka's choice: a bad envelope (size, magic, CRC, codec) is CORRUPT_MESSAGE; a sound one whose
# offset range, count or kind breaks LogValidator's rules is INVALID_RECORD.
CORRUPT, INVALID = ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD


@pytest.mark.parametrize(
    ("code", "make"),
    [
        pytest.param(CORRUPT, lambda b: _with(b, 8, ">i", len(b) + 100), id="batch-length-too-big"),
        pytest.param(
            CORRUPT, lambda b: _with(b, 8, ">i", len(b) - 30), id="batch-length-too-small"
        ),
        pytest.param(CORRUPT, lambda b: _with(b, 8, ">i", 10), id="batch-length-below-header"),
        pytest.param(
            INVALID, lambda b: _with(b, 57, ">i", 7, fix_crc=True), id="count-vs-last-delta"
        ),
        pytest.param(INVALID, lambda b: _with(b, 57, ">i", 0, fix_crc=True), id="zero-records"),
        pytest.param(CORRUPT, lambda b: _with(b, 57, ">i", -1, fix_crc=True), id="negative-count"),
        pytest.param(CORRUPT, lambda b: _with(b, 16, ">b", 1), id="magic-1"),
        pytest.param(CORRUPT, lambda b: _with(b, 21, ">h", 7, fix_crc=True), id="codec-7"),
        pytest.param(INVALID, lambda b: _with(b, 21, ">h", 0x20, fix_crc=True), id="control-batch"),
        pytest.param(CORRUPT, lambda b: b + b[:30], id="trailing-partial-batch"),
        pytest.param(CORRUPT, lambda b: b[:40], id="truncated-header"),
        pytest.param(
            CORRUPT,
            lambda b: encode_batch([(b"k", b"v" * 100)], compression=1)[:-8] + b"\0" * 8,
            id="gzip-garbage-under-valid-length",
        ),
    ],
)
def test_batches_that_lie(
    isolated: Isolation, code: ErrorCode, make: Callable[[bytes], bytes]
) -> None:
    data = make(batch(3, value_bytes=20))
    with isolated.connect() as wire:
        response = produce_error(wire, [(VICTIM, 0, data)], acks=m.ACKS_ALL)
    (result,) = response.topics[0].partitions
    assert result.error_code == code, result


def test_partition_lengths_that_split_batches_wrongly(isolated: Isolation) -> None:
    first, second = batch(2), batch(3)
    with isolated.connect() as wire:
        header = [
            0,
            0,
            7,
            m.ACKS_LEADER,
            1000,
            [[VICTIM, [[0, len(first) - 5], [1, len(second) + 5]]]],
        ]
        raw_produce(wire, header, first + second)  # the sum is right, the split is not
        response, _ = wire.recv()
    assert partition_codes(response) == [ErrorCode.CORRUPT_MESSAGE] * 2


def test_empty_partition_section(isolated: Isolation) -> None:
    with isolated.connect() as wire:
        response = produce_error(wire, [(VICTIM, 0, b"")])
    assert partition_codes(response) == [ErrorCode.CORRUPT_MESSAGE]


@pytest.mark.parametrize("acks", [5, -2, 2])
def test_invalid_acks(isolated: Isolation, acks: int) -> None:
    with isolated.connect() as wire:
        response = produce_error(wire, [(VICTIM, 0, batch(2)), (VICTIM, 1, batch(1))], acks=acks)
    assert response.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert partition_codes(response) == [ErrorCode.INVALID_REQUIRED_ACKS] * 2


# -- random bytes ----------------------------------------------------------------------------

API_KEYS = sorted(m.REQUEST_TYPES)

frames_of_noise = st.binary(max_size=300)
framed_noise = st.binary(max_size=300).map(lambda b: frame(b) if b else b"")
framed_headers = st.tuples(
    st.sampled_from(API_KEYS),
    st.integers(0, 2),
    st.integers(-(2**31), 2**31 - 1),
    st.lists(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(2**40), 2**40),
            st.text(max_size=20),
            st.lists(st.integers(-5, 5), max_size=3),
        ),
        max_size=6,
    ),
    st.binary(max_size=100),
).map(lambda t: frame(body_of([t[0], t[1], t[2], *t[3]], t[4])))


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.one_of(frames_of_noise, framed_noise, framed_headers))
def test_random_bytes(isolated: Isolation, data: bytes) -> None:
    """Whatever arrives, the broker answers with well-formed responses or closes; after the
    client's EOF it always closes."""
    with isolated.connect() as wire:
        wire.send_bytes(data)
        wire.sock.shutdown(socket.SHUT_WR)
        wire.sock.settimeout(10)
        received = bytearray()
        while chunk := _recv_or_reset(wire.sock):
            received += chunk
    decoder = FrameDecoder(2**31 - 1)
    decoder.feed(received)
    for body in decoder:
        m.decode_response(body)  # every byte the broker sent is a valid response
    decoder.end_of_stream()


def _recv_or_reset(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


def test_nothing_leaked_on_disk(target: BrokerProcess) -> None:
    """After all of the above: only the victim's partitions exist (no path escaped)."""
    root = target.log_dirs[0]
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [f"{VICTIM}-0", f"{VICTIM}-1"]
    assert sorted(p.name for p in Path(root).parent.iterdir()) == ["logs"]
