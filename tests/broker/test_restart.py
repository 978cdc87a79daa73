"""Restarts: a clean one (SIGTERM) keeps data and configs and rescans nothing; an unclean one
(SIGKILL while producing) keeps every record acknowledged with acks=all."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from odradek.protocol import messages as m
from tests.broker.wire import Wire, bad_events, batch, fetch_all
from tests.broker_process import BrokerProcess


def loaded_events(broker: BrokerProcess) -> list[str]:
    return [e["event"] for e in broker.lines if e["event"].startswith("loaded log dir")]


@pytest.mark.slow
def test_clean_restart_keeps_data_and_configs(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=["log.segment.bytes=4096"])
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("kept", partitions=2, configs={"retention.ms": "99999999"})
        for i in range(40):
            wire.produce("kept", i % 2, batch(5, tag=f"r{i}-", value_bytes=50))
        before = {p: fetch_all(wire, "kept", p) for p in (0, 1)}
    segments = sorted((broker.log_dirs[0] / "kept-0").glob("*.log"))
    assert len(segments) > 1  # several segments, so indexes and rolls are exercised
    assert broker.stop() == 0
    assert (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()

    broker.lines.clear()
    broker.start()
    root = broker.log_dirs[0]
    assert loaded_events(broker) == [f"loaded log dir {root} (clean shutdown)"]
    assert not [e for e in broker.lines if e["level"] == "warning"]  # nothing rebuilt
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        assert {p: fetch_all(wire, "kept", p) for p in (0, 1)} == before
        assert [r.offset for r in fetch_all(wire, "kept", 0, start=77)] == list(range(77, 100))
        configs = wire.call(
            m.DescribeConfigsRequest(
                correlation_id=0,
                resources=[
                    m.DescribeConfigsResource(
                        resource_type=m.ConfigResourceType.TOPIC,
                        resource_name="kept",
                        configuration_keys=["retention.ms"],
                    )
                ],
            )
        )
        assert configs.results[0].configs[0].value == "99999999"
        assert wire.produce("kept", 0, batch(1)).base_offset == 100
    assert broker.stop() == 0
    assert bad_events(broker.lines) == []


@pytest.mark.slow
def test_sigkill_keeps_every_acks_all_record(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=["log.segment.bytes=65536"])
    partitions = 3
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("durable", partitions=partitions)

    # partition -> [(base offset, the batch's values)] for every acknowledged request
    acked: dict[int, list[tuple[int, list[bytes]]]] = {p: [] for p in range(partitions)}
    enough = threading.Event()
    failures: list[BaseException] = []

    def produce_until_killed() -> None:
        """Pipeline acks=all requests (8 in flight) until the broker goes away."""
        try:
            with Wire(broker.port) as producer:  # type: ignore[arg-type]
                in_flight: dict[int, tuple[int, list[bytes]]] = {}
                i = 0
                while True:
                    while len(in_flight) < 8:
                        partition = i % partitions
                        data = batch(10, tag=f"n{i}-", value_bytes=200)
                        request, raw = producer.produce_request(
                            [("durable", partition, data)], acks=m.ACKS_ALL
                        )
                        values = [f"n{i}-{j}".encode().ljust(200, b".") for j in range(10)]
                        in_flight[producer.send(request, raw)] = (partition, values)
                        i += 1
                    response, _ = producer.recv()
                    partition, values = in_flight.pop(response.correlation_id)
                    result = response.topics[0].partitions[0]
                    assert result.error_code == 0, result
                    acked[partition].append((result.base_offset, values))
                    if sum(map(len, acked.values())) >= 300:
                        enough.set()
        except (EOFError, ConnectionError, OSError):
            pass  # the broker was killed
        except BaseException as exc:
            failures.append(exc)
            enough.set()

    thread = threading.Thread(target=produce_until_killed)
    thread.start()
    assert enough.wait(60)
    broker.kill()  # while requests are in flight
    thread.join(30)
    assert failures == []

    broker.lines.clear()
    broker.start()
    assert loaded_events(broker) == [f"loaded log dir {broker.log_dirs[0]} (unclean shutdown)"]
    with Wire(broker.port) as wire:  # type: ignore[arg-type]
        for partition in range(partitions):
            records = fetch_all(wire, "durable", partition)
            assert [r.offset for r in records] == list(range(len(records)))  # dense
            by_offset = {r.offset: r.value for r in records}
            for base_offset, values in acked[partition]:
                got = [by_offset.get(base_offset + j) for j in range(len(values))]
                assert got == values, (partition, base_offset)
        # The log keeps going after the recovery.
        assert wire.produce("durable", 0, batch(1), acks=m.ACKS_ALL).error_code == 0
    assert broker.stop() == 0
