"""Server-side partition assignors: ``range``, ``roundrobin`` and ``cooperative-sticky``.

Each assignor is a pure function of

- ``subscriptions``: member id → the topics it subscribes to;
- ``partitions``: topic → partition count (a topic missing or at 0 is skipped: nobody gets it);
- ``previous``: member id → ``{topic: [partitions]}`` the member owned in the last generation
  (only the sticky assignor looks at it),

and returns an :class:`AssignmentPlan`: every member of ``subscriptions`` appears in it (possibly
with ``{}``), partitions listed in ascending order, topics in name order.

Invariants, checked by the tests for every assignor and group size:

1. a partition goes only to a member subscribed to its topic;
2. no partition goes to two members;
3. every partition of a subscribed topic is assigned — except, for cooperative-sticky, the ones
   counted in ``revoking`` (see below), which the follow-up rebalance hands out.

Strategies:

- ``range`` (per topic, as the issue specifies): the C members subscribed to a topic of P
  partitions, sorted by member id, take consecutive chunks of ``M = ceil(P / C)``: member i
  gets ``i*M .. min((i+1)*M, P) - 1``. So P=7, C=3 gives 3, 3, 1 and P=10, C=3 gives 4, 4, 2.
  (Kafka's own RangeAssignor spreads the remainder instead: 3, 2, 2 and 4, 3, 3.)
- ``roundrobin`` (Kafka's RoundRobinAssignor): every partition of every subscribed topic,
  topics sorted by name, is dealt in turn to the members sorted by id, skipping a member that
  does not subscribe to the partition's topic.
- ``cooperative-sticky``: members keep what they owned as long as the assignment stays
  balanced (partition counts of members that could take each other's partitions differ by at
  most one); unowned partitions go to the eligible member with the fewest; then partitions move
  one at a time from the fullest member that can give to the eligible member holding the
  fewest (at least two fewer). With identical subscriptions this is the minimum number of
  moves (a property test checks it). Cooperative (KIP-429): a partition that
  moves from one *current* member to another is left unassigned in this generation (the owner
  gives it up first) and counted in ``revoking``; the coordinator starts a follow-up rebalance
  once the members have their assignment, and that one hands the partition to its new owner.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR_ORDER",
    "AssignmentPlan",
    "MemberAssignment",
    "cooperative_sticky_assign",
    "range_assign",
    "roundrobin_assign",
    "sticky_target",
]

MemberAssignment = dict[str, list[int]]  # topic -> partitions, ascending
TopicPartition = tuple[str, int]
Subscriptions = Mapping[str, Collection[str]]
Previous = Mapping[str, Mapping[str, Sequence[int]]]


@dataclass
class AssignmentPlan:
    """The assignment of one generation: member id → its partitions."""

    assignment: dict[str, MemberAssignment]
    revoking: int = 0  # partitions held back this generation (cooperative: moving owners)
    moved: list[TopicPartition] = field(default_factory=list)  # those partitions


Assignor = Callable[[Subscriptions, Mapping[str, int], Previous], AssignmentPlan]


def _empty(subscriptions: Subscriptions) -> dict[str, MemberAssignment]:
    return {member: {} for member in subscriptions}


def _finish(owned: Mapping[str, Collection[TopicPartition]]) -> dict[str, MemberAssignment]:
    result: dict[str, MemberAssignment] = {}
    for member, tps in owned.items():
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in tps:
            by_topic[topic].append(partition)
        result[member] = {t: sorted(ps) for t, ps in sorted(by_topic.items())}
    return result


def range_assign(
    subscriptions: Subscriptions, partitions: Mapping[str, int], previous: Previous | None = None
) -> AssignmentPlan:
    """Per topic, consecutive chunks of ``ceil(P / C)`` partitions, members by id order."""
    result = _empty(subscriptions)
    members_of: dict[str, list[str]] = defaultdict(list)
    for member in sorted(subscriptions):
        for topic in sorted(set(subscriptions[member])):
            members_of[topic].append(member)
    for topic in sorted(members_of):
        count = partitions.get(topic, 0)
        if count <= 0:
            continue
        members = members_of[topic]
        chunk = -(-count // len(members))  # ceil(P / C)
        for i, member in enumerate(members):
            start = i * chunk
            if start < count:
                result[member][topic] = list(range(start, min(start + chunk, count)))
    return AssignmentPlan(result)


def roundrobin_assign(
    subscriptions: Subscriptions, partitions: Mapping[str, int], previous: Previous | None = None
) -> AssignmentPlan:
    """Kafka's RoundRobinAssignor: deal every partition in turn to the subscribed members."""
    members = sorted(subscriptions)
    subscribed = {m: set(subscriptions[m]) for m in members}
    topics = sorted({t for m in members for t in subscribed[m] if partitions.get(t, 0) > 0})
    owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    turn = 0
    for topic in topics:
        for partition in range(partitions[topic]):
            while topic not in subscribed[members[turn % len(members)]]:
                turn += 1
            owned[members[turn % len(members)]].append((topic, partition))
            turn += 1
    return AssignmentPlan(_finish(owned))


def sticky_target(
    subscriptions: Subscriptions, partitions: Mapping[str, int], previous: Previous | None = None
) -> dict[str, list[TopicPartition]]:
    """The balanced assignment closest to ``previous`` (see the module docstring)."""
    members = sorted(subscriptions)
    subscribed = {m: {t for t in subscriptions[m] if partitions.get(t, 0) > 0} for m in members}
    eligible: dict[str, list[str]] = defaultdict(list)  # topic -> members subscribed
    for member in members:
        for topic in subscribed[member]:
            eligible[topic].append(member)
    owner: dict[TopicPartition, str] = {}
    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    # 1. keep what each member owned and may still own (first claim wins a dispute)
    for member in members:
        for topic, parts in sorted((previous or {}).get(member, {}).items()):
            if topic not in subscribed[member]:
                continue
            for partition in sorted(set(parts)):
                tp = (topic, partition)
                if 0 <= partition < partitions[topic] and tp not in owner:
                    owner[tp] = member
                    owned[member].append(tp)
    # 2. unowned partitions to the eligible member holding the fewest
    for topic in sorted(eligible):
        for partition in range(partitions[topic]):
            tp = (topic, partition)
            if tp not in owner:
                member = min(eligible[topic], key=lambda m: (len(owned[m]), m))
                owner[tp] = member
                owned[member].append(tp)
    # 3. balance: the fullest member that can give, gives its latest partition to the eligible
    #    member holding the fewest (at least two fewer). Taking always from the top and giving
    #    to the bottom means no member both gives and receives: no partition moves twice.
    while (move := _next_move(members, owned, eligible)) is not None:
        donor, tp, taker = move
        owned[donor].remove(tp)
        owned[taker].append(tp)
        owner[tp] = taker
    return owned


def _next_move(
    members: list[str], owned: dict[str, list[TopicPartition]], eligible: dict[str, list[str]]
) -> tuple[str, TopicPartition, str] | None:
    for donor in sorted(members, key=lambda m: (-len(owned[m]), m)):
        have = len(owned[donor])
        for tp in reversed(owned[donor]):  # the latest acquired goes first
            takers = [c for c in eligible[tp[0]] if len(owned[c]) <= have - 2]
            if takers:
                return donor, tp, min(takers, key=lambda m: (len(owned[m]), m))
    return None


def cooperative_sticky_assign(
    subscriptions: Subscriptions, partitions: Mapping[str, int], previous: Previous | None = None
) -> AssignmentPlan:
    """The sticky target, minus partitions that change hands between current members."""
    target = sticky_target(subscriptions, partitions, previous)
    previous_owner: dict[TopicPartition, str] = {}
    for member, by_topic in (previous or {}).items():
        if member in subscriptions:
            for topic, parts in by_topic.items():
                for partition in parts:
                    previous_owner.setdefault((topic, partition), member)
    moved: list[TopicPartition] = []
    for member, tps in target.items():
        keep = []
        for tp in tps:
            was = previous_owner.get(tp)
            if was is not None and was != member:
                moved.append(tp)
            else:
                keep.append(tp)
        target[member] = keep
    return AssignmentPlan(_finish(target), revoking=len(moved), moved=sorted(moved))


def _sticky_eager(
    subscriptions: Subscriptions, partitions: Mapping[str, int], previous: Previous | None = None
) -> AssignmentPlan:
    return AssignmentPlan(_finish(sticky_target(subscriptions, partitions, previous)))


ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "cooperative-sticky": cooperative_sticky_assign,
    "sticky": _sticky_eager,  # KIP-54: the same balance, without the two-step hand-over
}
# What a member sending no assignor list accepts, best first (Kafka's consumer default is
# [range, cooperative-sticky]).
DEFAULT_ASSIGNOR_ORDER: tuple[str, ...] = ("range", "cooperative-sticky", "roundrobin", "sticky")
