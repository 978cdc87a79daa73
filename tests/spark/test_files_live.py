"""The file-backed reader against a running broker's directories while a producer writes:
every batch is read wholly or not at all, offsets are exact, and the broker never notices."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import Compression
from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess, wait_until
from tests.spark.files_support import load_files

pytestmark = pytest.mark.slow

PER_BATCH = 50  # ~5.5 KiB batches
PARTITIONS = 2


class Producer(threading.Thread):
    """Appends batches round-robin until stopped; records what each acknowledged batch is."""

    def __init__(self, port: int, topic: str) -> None:
        super().__init__(daemon=True)
        self.port, self.topic = port, topic
        self.acked: dict[int, list[tuple[int, int, int]]] = {p: [] for p in range(PARTITIONS)}
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.pause_s = 0.01

    def run(self) -> None:
        try:
            with Wire(self.port) as wire:
                i = 0
                while not self.stop_event.is_set():
                    partition = i % PARTITIONS
                    records = [
                        (b"k%d" % i, b"%d.%d." % (i, j) + b"x" * 90, 1_700_000_000_000 + i)
                        for j in range(PER_BATCH)
                    ]
                    codec = Compression.LZ4 if i % 5 == 0 else Compression.NONE
                    answer = wire.produce(
                        self.topic, partition, encode_batch(records, compression=codec)
                    )
                    assert answer.error_code == 0, answer
                    self.acked[partition].append((answer.base_offset, PER_BATCH, i))
                    i += 1
                    self.stop_event.wait(self.pause_s)  # a steady rate, not a flood
        except BaseException as exc:  # reported by the test
            self.error = exc

    def batches(self) -> int:
        return sum(len(v) for v in self.acked.values())


def _segments(base: Path) -> int:
    return len(list(base.rglob("live-*/*.log")))


def test_reads_a_running_broker_while_a_producer_appends(spark: Any) -> None:
    base = Path(tempfile.mkdtemp(prefix="odradek-files-live-"))
    roots = [base / "a", base / "b"]
    broker = BrokerProcess(roots).start()
    producer = Producer(broker.port, "live")  # type: ignore[arg-type]
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic("live", partitions=PARTITIONS, configs={"segment.bytes": "262144"})
        producer.start()
        # Read only once every partition has rolled, so each read spans closed segments
        # and an active one however fast or slow the producer runs on this machine.
        assert wait_until(lambda: _segments(base) >= 2 * PARTITIONS, timeout_s=120)
        reads = []
        for _ in range(2):  # two reads, each planned at a different moment of the writes
            acked_before = {p: len(v) for p, v in producer.acked.items()}
            df = load_files(spark, roots, subscribe="live")
            got = df.select("partition", "offset", "key", "value").collect()
            reads.append((acked_before, got))
        producer.stop_event.set()
        producer.join(30)
        assert producer.error is None, producer.error
        assert broker.process is not None and broker.process.poll() is None  # still serving
    finally:
        producer.stop_event.set()
        broker.stop()

    assert _segments(base) >= 2 * PARTITIONS  # the reads spanned rolled segments
    sizes = []
    for acked_before, got in reads:
        by_partition: dict[int, dict[int, tuple[bytes, bytes]]] = {p: {} for p in range(2)}
        for row in got:
            assert row.offset not in by_partition[row.partition]  # never twice
            by_partition[row.partition][row.offset] = (row.key, row.value)
        for partition, seen in by_partition.items():
            # Offsets are exact: 0 .. n-1, with n a batch boundary at or past what was
            # acknowledged before the read was planned.
            assert sorted(seen) == list(range(len(seen)))
            batches = producer.acked[partition]
            assert len(seen) >= sum(count for _, count, _ in batches[: acked_before[partition]])
            whole = 0
            for base_offset, count, i in batches:
                present = [base_offset + j in seen for j in range(count)]
                assert all(present) or not any(present), (partition, base_offset)
                if all(present):
                    whole += count
                    for j in range(count):
                        key, value = seen[base_offset + j]
                        assert key == b"k%d" % i
                        assert value == b"%d.%d." % (i, j) + b"x" * 90
            assert whole == len(seen)
        sizes.append(len(got))
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]  # the log grew during the reads
