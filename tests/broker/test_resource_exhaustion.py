"""Issue 14, finding 7: running out of file descriptors fails the one request and rolls back
what it half-created; it never takes a log dir offline. ``max.broker.partitions`` refuses a
request for more partitions than the broker should open before any I/O."""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess

LOW_FD_LIMIT = {resource.RLIMIT_NOFILE: (160, 160)}  # room for a few dozen partitions


def create_partitions(wire: Wire, topic: str, count: int) -> m.CreatePartitionsTopicResult:
    response = wire.call(
        m.CreatePartitionsRequest(
            correlation_id=0, topics=[m.CreatePartitionsTopic(name=topic, count=count)]
        )
    )
    (result,) = response.results
    return result


def partition_dirs(broker: BrokerProcess) -> list[str]:
    return sorted(p.name for root in broker.log_dirs for p in Path(root).iterdir() if p.is_dir())


def assert_dir_online(broker: BrokerProcess, wire: Wire) -> None:
    """The log dir still serves: no offline line, DescribeLogDirs clean, a produce lands."""
    assert not [e for e in broker.lines if "offline" in e.get("event", "")]
    response = wire.call(m.DescribeLogDirsRequest(correlation_id=0, topics=None))
    assert [r.error_code for r in response.results] == [0]
    assert wire.produce("existing", 0, batch(1), m.ACKS_ALL).error_code == 0


def test_create_partitions_to_int32_max_is_refused_before_any_io(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("existing")
        before = partition_dirs(broker)
        result = create_partitions(wire, "existing", 2**31 - 1)
        assert result.error_code == ErrorCode.INVALID_PARTITIONS
        assert "max.broker.partitions=10000" in result.error_message
        assert partition_dirs(broker) == before
        (topic,) = wire.metadata(["existing"]).topics
        assert len(topic.partitions) == 1
        for validate_only in (True, False):
            response = wire.call(
                m.CreateTopicsRequest(
                    correlation_id=0,
                    topics=[m.CreatableTopic(name="huge", num_partitions=2**31 - 1)],
                    validate_only=validate_only,
                )
            )
            assert response.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
        assert partition_dirs(broker) == before
        assert_dir_online(broker, wire)


def test_out_of_descriptors_in_create_partitions_rolls_back(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(rlimits=LOW_FD_LIMIT)
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("existing")
        before = partition_dirs(broker)
        result = create_partitions(wire, "existing", 500)  # under the limit, over the fds
        assert result.error_code != 0
        assert "Too many open files" in result.error_message, result
        assert partition_dirs(broker) == before  # every half-made partition removed
        (topic,) = wire.metadata(["existing"]).topics
        assert len(topic.partitions) == 1
        assert_dir_online(broker, wire)
        assert create_partitions(wire, "existing", 3).error_code == 0  # descriptors are back
        assert len(fetch_all(wire, "existing")) == 1


def test_metadata_auto_creating_500_topics_out_of_descriptors(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(rlimits=LOW_FD_LIMIT, overrides=["num.partitions=2"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("existing")
        names = [f"auto-{i}" for i in range(500)]
        response = wire.metadata(names)
        created = [t.name for t in response.topics if t.error_code == 0]
        assert 0 < len(created) < 500
        assert all(len(t.partitions) == 2 for t in response.topics if t.error_code == 0)
        failures = broker.wait_for_events("topic auto-creation failed")
        assert len(failures) == 1 and failures[0]["skipped_topics"] > 0, failures
        on_disk = {d.rsplit("-", 1)[0] for d in partition_dirs(broker)}
        assert on_disk == {"existing", *created}  # no half-created topic left behind
        assert_dir_online(broker, wire)
    assert broker.stop() == 0
    broker.start()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        listed = wire.metadata(None).topics
        assert sorted(t.name for t in listed) == sorted(["existing", *created])
        assert wire.produce(created[0], 1, batch(1), m.ACKS_ALL).error_code == 0


def open_descriptors(broker: BrokerProcess) -> list[str]:
    assert broker.process is not None
    fd_dir = Path(f"/proc/{broker.process.pid}/fd")
    targets = []
    for fd in fd_dir.iterdir():
        try:
            targets.append(str(fd.readlink()))
        except FileNotFoundError:  # closed while listing
            continue
    return targets


def test_each_partition_holds_one_descriptor(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """Indexes are mapped without keeping a descriptor: a partition costs its ``.log`` only."""
    broker = broker_factory()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        before = len(open_descriptors(broker))
        wire.create_topic("many", partitions=100)
        for partition in range(100):
            wire.produce("many", partition, batch(3))
        targets = open_descriptors(broker)
        assert not [t for t in targets if t.endswith((".index", ".timeindex"))]
        assert len(targets) - before <= 100 + 2, targets
        assert [r.offset for r in fetch_all(wire, "many", 99)] == [0, 1, 2]  # indexes work


def test_too_few_descriptors_at_start_up_is_one_clear_error(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """Out of descriptors while loading is the process's limit, not a failed disk: the start
    fails naming the log dir and the cause; the dir is not marked offline or changed."""
    broker = broker_factory()
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("wide", partitions=300)
    assert broker.stop() == 0
    cramped = BrokerProcess(broker.log_dirs, rlimits=LOW_FD_LIMIT)
    with pytest.raises(RuntimeError):
        cramped.start(timeout_s=20)
    assert cramped.process is not None and cramped.process.wait(10) == 1
    (failed,) = cramped.events("broker failed to start")
    assert (
        "out of file descriptors" in failed["error"] and str(broker.log_dirs[0]) in failed["error"]
    )
    assert not [e for e in cramped.lines if "offline" in e.get("event", "")]
    assert not any("Traceback" in line for line in cramped.raw_lines)
    broker.start()  # with enough descriptors, everything is there
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        (topic,) = wire.metadata(["wide"]).topics
        assert len(topic.partitions) == 300
