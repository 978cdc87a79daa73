"""Pipelined produce requests on one connection are appended in the order they arrived, on
every backend and for every ``acks``: the per-partition order a client sees is its send order.

An ``acks=all`` request is answered by a task of its own (it waits for the fsync), and trio
does not start tasks in the order they were scheduled: the append itself must happen in the
reader, before the task starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.protocol import messages as m
from tests.broker.wire import Wire, batch, fetch_all
from tests.broker_process import BrokerProcess

ROUNDS = 30
PIPELINED = 8


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("acks", [m.ACKS_ALL, m.ACKS_LEADER])
def test_pipelined_produces_are_appended_in_arrival_order(
    backend: str, acks: int, tmp_path: Path
) -> None:
    broker = BrokerProcess([tmp_path / "logs"], backend=backend)
    with broker, Wire(broker.port) as wire:  # type: ignore[arg-type]
        wire.create_topic("ordered")
        sent = []
        for round_number in range(ROUNDS):
            correlation_ids = []
            for i in range(PIPELINED):
                tag = f"r{round_number}-{i}-"
                request, raw = wire.produce_request([("ordered", 0, batch(1, tag=tag))], acks)
                correlation_ids.append(wire.send(request, raw))
                sent.append(f"{tag}0".encode())
            answered = {}
            for _ in correlation_ids:
                response, _ = wire.recv()
                assert response.topics[0].partitions[0].error_code == 0
                answered[response.correlation_id] = response.topics[0].partitions[0]
            assert sorted(answered) == sorted(correlation_ids)
            # each request's offset is its place in the send order
            offsets = [answered[c].base_offset for c in correlation_ids]
            assert offsets == sorted(offsets), (round_number, offsets)
        values = [record.value for record in fetch_all(wire, "ordered")]
    assert values == sent
