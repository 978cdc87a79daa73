"""DescribeLogDirs: where each partition lives and how big it is (kafka-log-dirs.sh)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from tests.broker.wire import Wire, batch
from tests.broker_process import BrokerProcess


def test_sizes_and_placement_across_two_log_dirs(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    broker = broker_factory(log_dirs=dirs)
    with Wire(broker.port) as wire:
        wire.create_topic("sized", partitions=3)
        data = batch(10, value_bytes=100)
        wire.produce("sized", 1, data)
        response = wire.call(m.DescribeLogDirsRequest(correlation_id=0, topics=["sized"]))
    assert response.error_code == ErrorCode.NONE
    assert [r.log_dir for r in response.results] == [str(d) for d in dirs]
    placed = {
        p.partition_index: (result.log_dir, p.size_bytes)
        for result in response.results
        for topic in result.topics
        for p in topic.partitions
    }
    assert sorted(placed) == [0, 1, 2]
    # least-loaded placement: 3 partitions over 2 empty dirs → 2 and 1
    counts = sorted(sum(1 for d, _ in placed.values() if d == str(root)) for root in dirs)
    assert counts == [1, 2]
    assert placed[1][1] == len(data)
    assert placed[0][1] == placed[2][1] == 0
    on_disk = Path(placed[1][0]) / "sized-1" / "00000000000000000000.log"
    assert on_disk.stat().st_size == len(data)
