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


def test_segments_through_the_blocking_and_async_admin(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """``include_segments``: every segment of each partition, oldest first, as on disk; what
    ``Admin.describe_segments`` and ``AsyncAdmin.describe_segments`` return."""
    import anyio

    from odradek import Admin, AsyncAdmin, NewTopic

    broker = broker_factory(log_dirs=[tmp_path / "logs"])
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("rolled", 2, 1, {"segment.bytes": "2048"})])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        for _ in range(5):  # ~1.1 KiB each: a roll before every other batch
            wire.produce("rolled", 0, batch(10, value_bytes=100))
        plain = wire.call(m.DescribeLogDirsRequest(correlation_id=0, topics=["rolled"]))
    assert all(p.segments == [] for r in plain.results for t in r.topics for p in t.partitions)

    with Admin(broker.bootstrap) as admin:
        blocking = admin.describe_segments("rolled")

    async def via_async() -> dict:
        async with AsyncAdmin(broker.bootstrap) as admin:
            return await admin.describe_segments("rolled")

    assert anyio.run(via_async) == blocking
    on_disk = sorted((tmp_path / "logs" / "rolled-0").glob("*.log"))
    assert [s.file_name for s in blocking[0]] == [p.name for p in on_disk]
    assert len(on_disk) >= 3
    assert [s.size_bytes for s in blocking[0]] == [p.stat().st_size for p in on_disk]
    assert blocking[0][0].base_offset == 0 and blocking[0][-1].base_offset > 0
    assert all(s.largest_timestamp_ms > 0 for s in blocking[0] if s.size_bytes)
    assert [(s.base_offset, s.size_bytes) for s in blocking[1]] == [(0, 0)]  # empty partition
    assert {s.log_dir for s in blocking[0]} == {str(tmp_path / "logs")}
