"""plan_reset: every target of kafka-consumer-groups --reset-offsets, and the clamp to each
log's [start, end] (odradek groups reset-offsets and the console share it)."""

from __future__ import annotations

import pytest

from odradek.client.offset_reset import plan_reset
from odradek.client.types import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
STARTS, ENDS = {A: 5, B: 0}, {A: 50, B: 10}


@pytest.mark.parametrize(
    ("target", "kwargs", "expected"),
    [
        ("earliest", {}, {A: 5, B: 0}),
        ("latest", {}, {A: 50, B: 10}),
        ("offset", {"value": 7}, {A: 7, B: 7}),
        ("offset", {"value": 100}, {A: 50, B: 10}),  # clamped to the end
        ("offset", {"value": 0}, {A: 5, B: 0}),  # and to the start
        ("timestamp", {"found": {A: 20, B: None}}, {A: 20, B: 10}),  # none: the log end
        ("timestamp", {"found": {}}, {A: 50, B: 10}),
        ("shift", {"value": -3, "committed": {A: 30, B: 2}}, {A: 27, B: 0}),
        ("shift", {"value": 8, "committed": {A: 48, B: 1}}, {A: 50, B: 9}),
    ],
)
def test_targets(target: str, kwargs: dict, expected: dict) -> None:
    assert plan_reset(target, [A, B], STARTS, ENDS, **kwargs) == expected


def test_refusals() -> None:
    with pytest.raises(ValueError, match="reset target"):
        plan_reset("sideways", [A], STARTS, ENDS)
    with pytest.raises(ValueError, match="needs a value"):
        plan_reset("offset", [A], STARTS, ENDS)
    with pytest.raises(ValueError, match="no committed offset"):
        plan_reset("shift", [A, B], STARTS, ENDS, value=1, committed={A: 9})
