"""A write error (here: the file size limit, ``RLIMIT_FSIZE``) takes one log dir offline.

Kafka's behaviour on one node: the produce that hit the error gets KAFKA_STORAGE_ERROR, the
log dir goes offline (logged at error level), every partition in it answers
KAFKA_STORAGE_ERROR from then on — it is not forgotten, and auto-creation must not make a new
empty topic of the same name elsewhere — while partitions in the other dirs keep taking
writes and serving reads. After a restart without the limit, everything acknowledged before
the error is still there.

CPython ignores SIGXFSZ, so a write past the limit fails with EFBIG instead of killing the
process: exactly the "disk full" path (ENOSPC) of the broker.
"""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess

LIMIT_BYTES = 2 << 20  # no file of the broker may grow past 2 MiB
OVERRIDES = [
    "log.index.size.max.bytes=65536",  # preallocated indexes must fit under the limit
    "log.segment.bytes=8388608",  # one segment grows until it hits the limit
    "auto.create.topics.enable=true",
]


@pytest.mark.slow
def test_a_full_disk_takes_one_log_dir_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    broker = BrokerProcess(
        dirs,
        overrides=OVERRIDES,
        rlimits={resource.RLIMIT_FSIZE: (LIMIT_BYTES, LIMIT_BYTES)},
    ).start()
    try:
        with Wire(broker.port) as wire:  # type: ignore[arg-type]
            wire.create_topic("big")  # the least-loaded dir: a
            wire.create_topic("small")  # then b
            assert (dirs[0] / "big-0").is_dir() and (dirs[1] / "small-0").is_dir()
            acked: list[int] = []
            result = None
            for i in range(200):  # 200 x ~20 KiB: well past the limit
                result = wire.produce("big", 0, batch(20, tag=f"b{i}-", value_bytes=1000))
                if result.error_code:
                    break
                acked.append(result.base_offset)
            assert result is not None
            assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert len(acked) > 10

            # The offline partition is still known and says why.
            again = wire.produce("big", 0, batch(1))
            assert again.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            fetched, _ = wire.fetch("big", 0, 0)
            assert fetched.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            metadata = wire.metadata(["big"])
            assert [t.name for t in metadata.topics] == ["big"]
            assert not list(dirs[1].glob("big-*")), "auto-create made a second 'big'"

            # The other dir keeps working.
            assert wire.produce("small", 0, batch(3), acks=m.ACKS_ALL).error_code == 0
            assert [r.value for r in fetch_all(wire, "small", 0)] == [b"v0", b"v1", b"v2"]
        offline = [e for e in broker.lines if "offline" in e.get("event", "")]
        assert offline and offline[0]["level"] == "error"
    finally:
        broker.stop()

    restarted = BrokerProcess(dirs, overrides=OVERRIDES).start()
    try:
        with Wire(restarted.port) as wire:  # type: ignore[arg-type]
            records = fetch_all(wire, "big", 0)
            assert len(records) >= len(acked) * 20
            assert [r.offset for r in records] == list(range(len(records)))
            assert records[acked[-1]].value == f"b{len(acked) - 1}-0".encode().ljust(1000, b".")
            assert wire.produce("big", 0, batch(1)).error_code == 0
    finally:
        restarted.stop()
