"""Kafka's RangeAssignor: per topic, contiguous partition ranges over the members subscribed to it."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from zkcoord.assignors._common import Assignment, member_order, normalise_subscriptions
from zkcoord.topic_partition import TopicPartition


def range_assign(
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    instance_ids: Mapping[str, str | None] | None = None,
) -> Assignment:
    """Assign each topic independently: with n partitions and c members, member i (in Kafka's member order)
    gets `n // c` partitions plus one more if `i < n % c`, as one contiguous range.

    >>> range_assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    {'C0': [('t0', 0), ('t0', 1), ('t1', 0), ('t1', 1)], 'C1': [('t0', 2), ('t1', 2)]}
    """
    subs = normalise_subscriptions(subscriptions, partitions_per_topic)
    ordered = member_order(subs, instance_ids)
    result: Assignment = {m: [] for m in ordered}
    by_topic: dict[str, list[str]] = {}
    for member in ordered:  # keeps Kafka's member order within each topic
        for topic in subs[member]:
            by_topic.setdefault(topic, []).append(member)
    for topic in sorted(by_topic):
        members = by_topic[topic]
        n = partitions_per_topic[topic]
        per, extra = divmod(n, len(members))
        start = 0
        for i, member in enumerate(members):
            length = per + (1 if i < extra else 0)
            if length:
                result[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
            start += length
    # Topics are visited in sorted order and ranges are ascending, so every list is already sorted.
    return {m: result[m] for m in sorted(result)}
