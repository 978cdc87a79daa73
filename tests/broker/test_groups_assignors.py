"""The server-side assignors: worked examples and invariants (hypothesis)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.groups.assignors import (
    ASSIGNORS,
    cooperative_sticky_assign,
    range_assign,
    roundrobin_assign,
    sticky_target,
)


def counts(plan_assignment: dict[str, dict[str, list[int]]], topic: str) -> list[int]:
    return [len(plan_assignment[m].get(topic, [])) for m in sorted(plan_assignment)]


@pytest.mark.parametrize(
    ("partitions", "consumers", "expected"),
    [(7, 3, [3, 3, 1]), (10, 3, [4, 4, 2]), (6, 3, [2, 2, 2]), (3, 5, [1, 1, 1, 0, 0])],
)
def test_range_follows_the_issue_formula(
    partitions: int, consumers: int, expected: list[int]
) -> None:
    subs = {f"m{i}": ["t"] for i in range(consumers)}
    plan = range_assign(subs, {"t": partitions})
    assert counts(plan.assignment, "t") == expected
    # consecutive chunks, members in id order
    flat = [p for m in sorted(subs) for p in plan.assignment[m].get("t", [])]
    assert flat == list(range(partitions))


def test_range_kafka_documented_example() -> None:
    """Kafka's RangeAssignor javadoc: C0, C1; t0 and t1 of 3 partitions each."""
    plan = range_assign({"C1": ["t0", "t1"], "C0": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert plan.assignment == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C1": {"t0": [2], "t1": [2]}}


def test_roundrobin_kafka_documented_examples() -> None:
    """Kafka's RoundRobinAssignor javadoc, both examples."""
    plan = roundrobin_assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert plan.assignment == {"C0": {"t0": [0, 2], "t1": [1]}, "C1": {"t0": [1], "t1": [0, 2]}}
    plan = roundrobin_assign(
        {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]},
        {"t0": 1, "t1": 2, "t2": 3},
    )
    assert plan.assignment == {
        "C0": {"t0": [0]},
        "C1": {"t1": [0]},
        "C2": {"t1": [1], "t2": [0, 1, 2]},
    }


topics_st = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 12), min_size=1, max_size=4
)


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, list[str]], dict[str, int]]:
    partitions = draw(topics_st)
    names = [*sorted(partitions), "missing"]
    members = draw(st.integers(1, 7))
    subs = {
        f"m{i:02d}": draw(st.lists(st.sampled_from(names), min_size=1, max_size=5, unique=True))
        for i in range(members)
    }
    return subs, partitions


@settings(max_examples=300, deadline=None)
@given(groups(), st.sampled_from(sorted(ASSIGNORS)))
def test_every_partition_assigned_exactly_once_to_a_subscriber(
    group: tuple[dict[str, list[str]], dict[str, int]], name: str
) -> None:
    subs, partitions = group
    plan = ASSIGNORS[name](subs, partitions, {})
    assert set(plan.assignment) == set(subs)
    owners: Counter[tuple[str, int]] = Counter()
    for member, by_topic in plan.assignment.items():
        for topic, parts in by_topic.items():
            assert topic in subs[member]
            assert parts == sorted(parts)
            owners.update((topic, p) for p in parts)
    expected = {
        (t, p)
        for t, n in partitions.items()
        if any(t in s for s in subs.values())
        for p in range(n)
    }
    assert set(owners) == expected
    assert all(n == 1 for n in owners.values())
    assert plan.revoking == 0  # no previous owners: nothing to revoke


def minimum_moves(previous: dict[str, int], survivors: list[str], members: int, total: int) -> int:
    """Identical subscriptions: the fewest partitions that must leave surviving owners."""
    quota, extra = divmod(total, members)
    ranked = sorted(survivors, key=lambda m: -previous.get(m, 0))
    moves = 0
    for i, member in enumerate(ranked):
        target = quota + (1 if i < extra else 0)
        moves += max(0, previous.get(member, 0) - target)
    return moves


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(0, 6),
)
def test_sticky_moves_the_minimum(total: int, before: int, after: int, leavers: int) -> None:
    old_members = [f"m{i}" for i in range(before)]
    first = sticky_target({m: ["t"] for m in old_members}, {"t": total})
    previous = {m: {"t": sorted(p for _, p in tps)} for m, tps in first.items()}
    leavers = min(leavers, before)
    survivors = old_members[leavers:]
    new_members = survivors + [f"n{i}" for i in range(max(after - len(survivors), 0))]
    if not new_members:
        return
    target = sticky_target({m: ["t"] for m in new_members}, {"t": total}, previous)
    sizes = [len(target[m]) for m in new_members]
    assert max(sizes) - min(sizes) <= 1  # balanced
    moved = sum(
        1
        for m in survivors
        for p in previous[m]["t"]
        if ("t", p) not in target[m]  # left a member that is still here
    )
    counts_before = {m: len(previous[m]["t"]) for m in survivors}
    assert moved == minimum_moves(counts_before, survivors, len(new_members), total)


def test_cooperative_holds_back_partitions_that_change_owner() -> None:
    previous = {"a": {"t": [0, 1, 2, 3]}}
    plan = cooperative_sticky_assign({"a": ["t"], "b": ["t"]}, {"t": 4}, previous)
    assert plan.revoking == 2
    assert plan.assignment["b"] == {}
    kept = plan.assignment["a"]["t"]
    assert len(kept) == 2 and set(kept) | {p for _, p in plan.moved} == {0, 1, 2, 3}
    # the follow-up round: a owns only what it kept; b now gets the rest, nothing moves
    plan2 = cooperative_sticky_assign({"a": ["t"], "b": ["t"]}, {"t": 4}, plan.assignment)
    assert plan2.revoking == 0
    assert plan2.assignment["a"]["t"] == kept
    assert set(plan2.assignment["b"]["t"]) == {p for _, p in plan.moved}


def test_partitions_of_a_departed_member_are_not_held_back() -> None:
    previous = {"a": {"t": [0, 1]}, "gone": {"t": [2, 3]}}
    plan = cooperative_sticky_assign({"a": ["t"], "b": ["t"]}, {"t": 4}, previous)
    assert plan.revoking == 0
    assert plan.assignment == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}
