"""Issue 14, findings 1, 3, 5 and 10, as a hostile client plays them against a real broker.

Produced batches are validated record by record (protocol/validate.py); compressed bodies are
decompressed within a bound; a damaged batch stored before this validation existed answers a
clear error to ListOffsets and makes its partition uncleanable, not every partition; a request
full of rejected partitions writes one log line.

Batches are forged here byte by byte: a real client could not send them.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cramjam
import pytest

from odradek.protocol import messages as m
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import parse_batch_header, recompute_crc
from odradek.protocol.varint import encode_varint
from tests.broker.forge import INT32_MAX, forge, lying_count, record, records, zstd_bomb
from tests.broker.wire import Wire, bad_events, batch, fetch_all, split_batches
from tests.broker_process import BrokerProcess


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def segment_files(broker: BrokerProcess, topic: str, partition: int = 0) -> list[str]:
    found = []
    for root in broker.log_dirs:
        directory = root / f"{topic}-{partition}"
        if directory.is_dir():
            found += sorted(p.name for p in directory.iterdir() if p.suffix == ".log")
    return found


def produce_all(wire: Wire, sections: list[tuple[str, int, bytes]], acks: int = 1) -> Any:
    request, raw = wire.produce_request(sections, acks=acks)
    return wire.call(request, raw)


def log_end(wire: Wire, topic: str) -> int:
    return wire.list_offset(topic, 0, m.LATEST_TIMESTAMP).offset


# -- finding 1: a batch's count is checked against its records --------------------------------


def test_batches_claiming_2_31_records_destroy_nothing(tmp_path: Path) -> None:
    """The issue's reproduction: two one-record batches each claiming 2^31-1 records, then
    another client's acks=all record, then kill -9. The lies are refused; the offsets do not
    jump; no segment is rolled; the honest record survives the crash at offset 0."""
    with BrokerProcess([tmp_path / "logs"]) as broker, Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("t")
        for _ in range(2):
            lie = wire.produce("t", 0, lying_count(INT32_MAX), acks=m.ACKS_ALL)
            assert lie.error_code == ErrorCode.INVALID_RECORD, lie
            assert "holds 1" in lie.error_message
        for _ in range(20):  # one lie per request used to roll a segment each
            assert wire.produce("t", 0, lying_count(INT32_MAX)).error_code != 0
        honest = wire.produce("t", 0, batch(1, tag="acked"), acks=m.ACKS_ALL)
        assert honest.error_code == 0 and honest.base_offset == 0, honest
        assert segment_files(broker, "t") == ["00000000000000000000.log"]
        broker.kill()
        broker.start()
        with Wire(broker.port) as after:  # type: ignore[arg-type]
            survivors = fetch_all(after, "t")
            assert [(r.offset, r.value) for r in survivors] == [(0, b"acked0")]
            assert log_end(after, "t") == 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess([tmp_path_factory.mktemp("validation") / "logs"]) as process:
        with Wire(process.port) as wire:  # type: ignore[arg-type]
            wire.create_topic("victim")
            wire.create_topic("table", configs={"cleanup.policy": "compact"})
            wire.create_topic("gzipped", configs={"compression.type": "gzip"})
            assert wire.produce("victim", 0, batch(3), acks=m.ACKS_ALL).error_code == 0
        yield process
        assert bad_events(process.lines) == []


def _zstd(body: bytes) -> bytes:
    return bytes(cramjam.zstd.compress(body))


def _overlong_key_length() -> bytes:
    """A record whose key length (1) takes a non-minimal 6-byte varint: Kafka's readVarint,
    the consumers and the broker's own reads refuse it, so produce must too."""
    inner = b"\x00\x00\x00" + b"\x82\x80\x80\x80\x80\x00" + b"k" + encode_varint(1) + b"v\x00"
    return encode_varint(len(inner)) + inner


UNPARSEABLE: dict[str, Callable[[], bytes]] = {
    "fewer-records-than-count": lambda: forge(records(1), 3),
    "more-records-than-count": lambda: forge(records(3), 2),
    "offset-deltas-skip": lambda: forge(record(0) + record(2) + record(4), 3),
    "offset-deltas-repeat": lambda: forge(record(0) + record(0), 2),
    "record-length-too-long": lambda: forge(record(0, extra_length=5), 1),
    "record-length-too-short": lambda: forge(record(0, extra_length=-2), 1),
    "zeros": lambda: forge(b"\0" * 40, 1),
    "bad-varint": lambda: forge(b"\xff" * 40, 1),
    "varint-longer-than-5-bytes": lambda: forge(_overlong_key_length(), 1),
    "key-overruns-record": lambda: forge(record(0, key=b"k", value=b"") + b"\x02", 1),
    "negative-header-count": lambda: forge(record(0, headers=encode_varint(-3)), 1),
    "header-key-null": lambda: forge(
        record(0, headers=encode_varint(1) + encode_varint(-1) + encode_varint(-1)), 1
    ),
    "compressed-garbage-records": lambda: forge(_zstd(b"\x07" * 64), 1, codec=4),
    "compressed-count-lie": lambda: forge(_zstd(records(1)), INT32_MAX, codec=4),
}


@pytest.mark.parametrize("make", UNPARSEABLE.values(), ids=UNPARSEABLE.keys())
def test_records_that_do_not_parse_are_refused(
    broker: BrokerProcess, make: Callable[[], bytes]
) -> None:
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        before = fetch_all(wire, "victim")
        response = produce_all(wire, [("victim", 0, batch(1) + make())], acks=m.ACKS_ALL)
        (result,) = response.topics[0].partitions
        assert result.error_code == ErrorCode.INVALID_RECORD, result
        assert fetch_all(wire, "victim") == before  # the good batch before it is not appended


def test_a_lying_max_timestamp_is_set_from_the_records(broker: BrokerProcess) -> None:
    """Kafka sets a batch's maxTimestamp from its records; a lie would mislead the time index
    (ListOffsets by timestamp) after every restart."""
    forged = bytearray(batch(2, timestamp_ms=5_000))
    struct.pack_into(">q", forged, 35, 2**62)  # maxTimestamp far beyond every record
    recompute_crc(forged)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        result = wire.produce("victim", 0, bytes(forged), acks=m.ACKS_ALL)
        assert result.error_code == 0, result
        _, tail = wire.fetch("victim", 0, result.base_offset)
        stored = parse_batch_header(split_batches(tail)[0])
    assert stored.max_timestamp == 5_001


def test_keyless_record_on_a_compacted_topic_is_invalid_record(broker: BrokerProcess) -> None:
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        result = wire.produce("table", 0, forge(record(0, key=None), 1))
        assert result.error_code == ErrorCode.INVALID_RECORD, result
        assert "without key" in result.error_message


# -- finding 5: decompression bombs ----------------------------------------------------------


@pytest.mark.parametrize("topic", ["gzipped", "table", "victim"])
def test_a_decompression_bomb_is_refused_without_being_expanded(
    broker: BrokerProcess, topic: str
) -> None:
    """512 MiB of zeros in a ~17 KB zstd batch, to a topic that re-encodes (compression.type),
    one that checks keys (compacted) and a plain one: MESSAGE_TOO_LARGE, and the broker's peak
    RSS grows by far less than the bomb (it used to take the whole expansion)."""
    bomb = zstd_bomb(8)
    assert len(bomb) < 32 * 1024
    pid = broker.process.pid  # type: ignore[union-attr]
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        baseline = peak_rss_bytes(pid)
        started = time.monotonic()
        result = wire.produce(topic, 0, bomb)
        elapsed_s = time.monotonic() - started
        assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE, result
        assert "more than 33554432 bytes (message.max.decompressed.bytes)" in result.error_message
        assert peak_rss_bytes(pid) - baseline < 128 << 20
        assert elapsed_s < 5.0
        honest = encode_batch([(b"k", b"v" * 1000)] * 10, compression=4)
        assert wire.produce(topic, 0, honest, acks=m.ACKS_ALL).error_code == 0


def test_the_decompression_budget_is_per_request(broker: BrokerProcess) -> None:
    """Five batches of 30 MiB each (under the per-batch bound) in one request exceed the
    128 MiB per request: the last partitions are refused, the first ones appended."""
    fat = forge(_zstd(records_of_bytes(30 << 20)), 1, codec=4)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("fat", partitions=5)
        response = produce_all(wire, [("fat", p, fat) for p in range(5)])
    codes = [p.error_code for p in response.topics[0].partitions]
    assert codes == [0, 0, 0, 0, ErrorCode.MESSAGE_TOO_LARGE], codes
    refused = response.topics[0].partitions[4].error_message
    assert "what is left of produce.request.max.decompressed.bytes" in refused


def records_of_bytes(n_bytes: int) -> bytes:
    """One record whose value is ``n_bytes`` of zeros."""
    return record(0, value=b"\0" * n_bytes)


# -- finding 10: rejections are summarised --------------------------------------------------


def test_a_produce_naming_many_unknown_partitions_logs_one_line(broker: BrokerProcess) -> None:
    """20,000 partitions of an unknown topic in one ~0.4 MB request: one summary line (it used
    to be one line per partition). A second request, rejected as a whole, marks the end."""
    first_line = len(broker.lines)
    one = batch(1)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        response = produce_all(wire, [("no-such-topic", p, one) for p in range(20_000)])
        assert {p.error_code for p in response.topics[0].partitions} == {
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        }
        marker = produce_all(wire, [("victim", 0, one)], acks=5)
        assert marker.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    # the module's broker: a line the previous test's request logged may be parsed after
    # first_line was read, so keep the lines about this test's two requests
    ours = broker.wait_for_events(
        "produce rejected",
        count=2,
        since_line=first_line,
        where=lambda e: e.get("acks") == 5 or _names(e, "no-such-topic"),
    )
    summary, end = ours  # one line for the 20,000 partitions, then the marker
    assert end.get("acks") == 5, ours
    assert summary["partitions"] == 20_000
    assert summary["errors"] == {"UNKNOWN_TOPIC_OR_PARTITION": 20_000}
    assert [e["partition"] for e in summary["examples"]] == [0, 1, 2]


def _names(event: dict[str, Any], topic: str) -> bool:
    """Whether a "produce rejected" line's examples name ``topic``."""
    return any(example.get("topic") == topic for example in event.get("examples", []))


# -- finding 3: batches stored damaged before validation existed --------------------------------


def _plant(broker: BrokerProcess, topic: str, segments: list[list[bytes]]) -> None:
    """Stop the broker and replace ``topic``-0's segments with ``segments`` (offsets assigned
    in order): a log written before produce validated records. Start it again as after a
    crash (indexes are rebuilt, the segments are recovered)."""
    broker.stop()
    (directory,) = [d for root in broker.log_dirs if (d := root / f"{topic}-0").is_dir()]
    for path in directory.iterdir():
        if path.suffix in (".log", ".index", ".timeindex"):
            path.unlink()
    offset = 0
    for entries in segments:
        data = bytearray()
        base_offset = offset
        for entry in entries:
            forged = bytearray(entry)
            struct.pack_into(">q", forged, 0, offset)
            offset += struct.unpack_from(">i", forged, 23)[0] + 1
            data += forged
        (directory / f"{base_offset:020d}.log").write_bytes(bytes(data))
    for root in broker.log_dirs:
        (root / ".kafka_cleanshutdown").unlink(missing_ok=True)
    broker.start()


def test_list_offsets_over_a_damaged_stored_batch_answers_corrupt_message(tmp_path: Path) -> None:
    """A batch whose records do not parse, and a zstd bomb, stored before produce validated
    records: ListOffsets by timestamp answers CORRUPT_MESSAGE for their partitions (it used to
    fail the whole request with UNKNOWN_SERVER_ERROR and a traceback, and to expand the bomb),
    logs the file and position, and leaves every file in place."""
    broker = BrokerProcess([tmp_path / "logs"]).start()
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic("old")
            wire.create_topic("bombed")
        old = [batch(1, timestamp_ms=100), forge(b"\x07" * 64, 1, timestamp_ms=1_000), batch(1)]
        _plant(broker, "old", [old])
        first_line = len(broker.lines)
        _plant(broker, "bombed", [[zstd_bomb(8)]])
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            result = wire.list_offset("old", 0, 500)
            assert result.error_code == ErrorCode.CORRUPT_MESSAGE, result
            pid = broker.process.pid  # type: ignore[union-attr]
            baseline = peak_rss_bytes(pid)
            bombed = wire.list_offset("bombed", 0, 500)
            assert bombed.error_code == ErrorCode.CORRUPT_MESSAGE, bombed  # unreadable, kept
            assert peak_rss_bytes(pid) - baseline < 128 << 20
            assert wire.list_offset("old", 0, m.LATEST_TIMESTAMP).offset == 3
        warnings = broker.wait_for_events("unreadable batch", count=2, since_line=first_line)
        assert "00000000000000000000.log position " in warnings[0]["reason"]
        assert "decompresses to more than" in warnings[1]["reason"]
        assert not [e for e in broker.lines if e.get("event") == "request failed"]
    finally:
        broker.stop()


def test_a_poisoned_compacted_partition_does_not_stop_the_cleaner(tmp_path: Path) -> None:
    """One compacted partition holds a batch whose records do not parse; another holds
    duplicates. The first is marked uncleanable (once), the second is cleaned, and cleaned
    again later (the cleaner goes on)."""
    fast = ["log.cleaner.backoff.ms=50", "log.retention.check.interval.ms=100"]
    broker = BrokerProcess([tmp_path / "logs"], overrides=fast).start()
    compact = {
        "cleanup.policy": "compact",
        "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01",
    }
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic("poisoned", configs=compact)
            wire.create_topic("healthy", configs=compact)
        old = [encode_batch([(b"a", b"x" * 100)]), forge(b"\x07" * 100, 1)]
        _plant(broker, "poisoned", [old, old, [encode_batch([(b"a", b"last")])]])
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            fsynced = wire.produce("poisoned", 0, encode_batch([(b"a", b"new")]), acks=m.ACKS_ALL)
            assert fsynced.error_code == 0  # its segments are below the recovery point now
        for round_ in (1, 2):
            with Wire(broker.port) as wire:  # type: ignore[arg-type]
                for i in range(30):  # the same key over and over: cleaning keeps the last
                    value = f"{round_}-{i}".encode().ljust(200, b".")
                    assert wire.produce("healthy", 0, encode_batch([(b"k", value)])).error_code == 0
            cleaned = broker.wait_for_events("log cleaned", count=round_, timeout_s=30)
            assert [e["topic"] for e in cleaned] == ["healthy"] * len(cleaned), cleaned
        marked = broker.events("partition marked uncleanable")
        assert [e["topic"] for e in marked] == ["poisoned"], marked  # once, not every pass
        assert "does not fit the batch" in marked[0]["reason"], marked
        assert not broker.events("log cleaning failed")
    finally:
        broker.stop()


# -- validation in a worker thread keeps a connection's order ---------------------------------


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("acks", [m.ACKS_ALL, m.ACKS_LEADER])
def test_pipelined_compressed_and_plain_produces_keep_their_order(
    backend: str, acks: int, tmp_path: Path
) -> None:
    """Compressed requests are validated in a worker thread, small plain ones on the loop:
    pipelined on one connection, alternating, they are still appended in sending order."""
    broker = BrokerProcess([tmp_path / "logs"], backend=backend)
    with broker, Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("ordered")
        sent = []
        for round_number in range(10):
            ids = []
            for i in range(8):
                tag = f"r{round_number}-{i}-"
                data = batch(1, tag=tag, compression=4 if i % 2 else 0)
                request, raw = wire.produce_request([("ordered", 0, data)], acks)
                ids.append(wire.send(request, raw))
                sent.append(f"{tag}0".encode())
            for _ in ids:
                response, _ = wire.recv()
                assert response.topics[0].partitions[0].error_code == 0
        assert [r.value for r in fetch_all(wire, "ordered")] == sent


def test_a_raised_decompression_bound_is_honoured_when_reading_back(tmp_path: Path) -> None:
    """An operator raises message.max.decompressed.bytes to 48 MiB: a batch of 40 MiB
    decompressed is accepted, and ListOffsets by timestamp reads it back (the readers' bound
    follows the key, or an honest batch would be refused as damaged)."""
    big = forge(_zstd(records_of_bytes(40 << 20)), 1, codec=4)
    broker = BrokerProcess(
        [tmp_path / "logs"], overrides=[f"message.max.decompressed.bytes={48 << 20}"]
    )
    with broker, Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("big")
        assert wire.produce("big", 0, big, acks=m.ACKS_ALL).error_code == 0
        found = wire.list_offset("big", 0, 500)
        assert (found.error_code, found.offset) == (0, 0), found
