"""The shared invariant checker every assignor result must pass; used by the tests and by callers' sanity checks."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from zkcoord.assignors._common import TopicPartition


class AssignmentInvariantError(AssertionError):
    """An assignment broke an assignor invariant; the message names the member/partition at fault."""


def check_assignment(
    assignment: Mapping[str, Collection[TopicPartition]],
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    *,
    complete: bool = True,
    balance: str = "total",
) -> None:
    """Raise AssignmentInvariantError unless: every member is present with a sorted list, no partition is given
    twice, members get only partitions of topics they subscribe to and that exist, every partition of a
    subscribed topic is assigned (unless `complete` is False, as for a cooperative round that withholds
    partitions), and, when all subscriptions are equal, counts differ by at most one: over all topics
    (`balance="total"`: roundrobin, sticky) or within each topic (`balance="per-topic"`: range). `balance="movable"` (sticky) also demands, for any subscriptions,
    Kafka's `isBalanced`: no partition could move to an eligible member holding two or more fewer partitions."""
    if balance not in ("total", "per-topic", "movable", "none"):
        raise ValueError(f"balance must be 'total', 'per-topic', 'movable' or 'none', got {balance!r}")
    if sorted(assignment) != sorted(subscriptions):
        raise AssignmentInvariantError(
            f"members differ: assigned {sorted(assignment)} vs subscribed {sorted(subscriptions)}"
        )
    seen: dict[TopicPartition, str] = {}
    for member in sorted(assignment):
        parts = list(assignment[member])
        if parts != sorted(parts):
            raise AssignmentInvariantError(f"{member}: partition list is not sorted")
        topics = set(subscriptions[member])
        for tp in parts:
            topic, p = tp
            if topic not in topics:
                raise AssignmentInvariantError(f"{member} got {tp} but does not subscribe to {topic!r}")
            if not 0 <= p < partitions_per_topic.get(topic, 0):
                raise AssignmentInvariantError(f"{member} got {tp}, which does not exist")
            if tp in seen:
                raise AssignmentInvariantError(f"{tp} assigned to both {seen[tp]} and {member}")
            seen[tp] = member
    if complete:
        subscribed = set().union(*(set(t) for t in subscriptions.values())) if subscriptions else set()
        for topic in sorted(subscribed):
            for p in range(partitions_per_topic.get(topic, 0)):
                if (topic, p) not in seen:
                    raise AssignmentInvariantError(
                        f"{(topic, p)} of subscribed topic {topic!r} is unassigned"
                    )
    distinct = {
        frozenset(t for t in topics if partitions_per_topic.get(t, 0) > 0)
        for topics in subscriptions.values()
    }
    if complete and balance == "movable":
        _check_movable(assignment, subscriptions, partitions_per_topic)
    if not complete or len(distinct) != 1 or balance == "none":
        return
    groups: list[list[int]]
    if balance in ("total", "movable"):
        groups = [[len(assignment[m]) for m in assignment]]
    else:
        per_topic: dict[str, dict[str, int]] = {t: dict.fromkeys(assignment, 0) for t in next(iter(distinct))}
        for member in assignment:
            for topic, _p in assignment[member]:
                per_topic[topic][member] += 1
        groups = [list(per_topic[t].values()) for t in sorted(per_topic)]
    for counts in groups:
        if counts and max(counts) - min(counts) > 1:
            raise AssignmentInvariantError(
                f"unbalanced ({balance}) with equal subscriptions: counts {min(counts)}..{max(counts)}"
            )


def _check_movable(
    assignment: Mapping[str, Collection[TopicPartition]],
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
) -> None:
    count = {m: len(assignment[m]) for m in assignment}
    holders: dict[str, set[str]] = {}
    for member in assignment:
        for topic, _p in assignment[member]:
            holders.setdefault(topic, set()).add(member)
    eligible_by_topic: dict[str, list[str]] = {}
    for m in sorted(subscriptions):
        for topic in set(subscriptions[m]):
            eligible_by_topic.setdefault(topic, []).append(m)
    for topic in sorted(holders):
        eligible = eligible_by_topic.get(topic, [])
        src = max(sorted(holders[topic]), key=lambda m: count[m])
        dst = min(sorted(eligible), key=lambda m: count[m])
        if count[src] - count[dst] >= 2:
            raise AssignmentInvariantError(
                f"a partition of {topic!r} could move from {src} ({count[src]}) to {dst} ({count[dst]})"
            )
