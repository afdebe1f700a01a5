"""Shared types, member ordering and input validation for the broker-protocol assignors."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from zkcoord.topic_partition import TopicPartition as TopicPartition

Assignment = dict[str, list[TopicPartition]]


def java_key(s: str) -> bytes:
    """Sort key matching Java's `String.compareTo` (UTF-16 code units), which Kafka's orderings use."""
    return s.encode("utf-16-be", "surrogatepass")


def member_order(members: Iterable[str], instance_ids: Mapping[str, str | None] | None) -> list[str]:
    """Members in Kafka's `MemberInfo` order: static members first by instance id, then dynamic by member id."""
    ids = instance_ids or {}

    def key(m: str) -> tuple[int, bytes, bytes]:
        inst = ids.get(m)
        # Kafka's MemberInfo.compareTo leaves equal instance ids unordered; the member id makes it deterministic.
        return (0, java_key(inst), java_key(m)) if inst is not None else (1, b"", java_key(m))

    return sorted(members, key=key)


def normalise_subscriptions(
    subscriptions: Mapping[str, Collection[str]], partitions_per_topic: Mapping[str, int]
) -> dict[str, frozenset[str]]:
    """Subscriptions as frozensets restricted to topics that exist (Kafka ignores topics without metadata)."""
    for topic, count in partitions_per_topic.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"partitions_per_topic[{topic!r}] must be a non-negative int, got {count!r}")
    out: dict[str, frozenset[str]] = {}
    for member, topics in subscriptions.items():
        if isinstance(topics, str):
            raise ValueError(f"subscriptions[{member!r}] must be a collection of topics, not a string")
        out[member] = frozenset(t for t in topics if partitions_per_topic.get(t, 0) > 0)
    return out


def empty_assignment(members: Iterable[str]) -> Assignment:
    return {m: [] for m in members}


def sort_lists(assignment: Assignment) -> Assignment:
    for parts in assignment.values():
        parts.sort()
    return assignment
