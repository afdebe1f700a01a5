"""Kafka's RoundRobinAssignor: all partitions in (topic, partition) order dealt over members in a cycle."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from zkcoord.assignors._common import Assignment, java_key, member_order, normalise_subscriptions
from zkcoord.topic_partition import TopicPartition


def roundrobin_assign(
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    instance_ids: Mapping[str, str | None] | None = None,
) -> Assignment:
    """Deal every partition of every subscribed topic, sorted by (topic, partition), to the next member of the
    circular member order that subscribes to its topic (members that do not are skipped, and the cycle moves on).

    >>> roundrobin_assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    {'C0': [('t0', 0), ('t0', 2), ('t1', 1)], 'C1': [('t0', 1), ('t1', 0), ('t1', 2)]}
    """
    subs = normalise_subscriptions(subscriptions, partitions_per_topic)
    ordered = member_order(subs, instance_ids)
    result: Assignment = {m: [] for m in ordered}
    if not ordered:
        return {}
    c = len(ordered)
    topics = sorted(set().union(*subs.values()), key=java_key)
    everyone = [all(t in subs[m] for m in ordered) for t in topics]
    pos = 0  # index of the member the cycle points at
    for topic, all_subscribed in zip(topics, everyone, strict=True):
        n = partitions_per_topic[topic]
        if all_subscribed:
            # Nobody is skipped: partition p goes to member (pos + p) % c, computed in O(n) without scanning.
            for p in range(n):
                result[ordered[(pos + p) % c]].append(TopicPartition(topic, p))
            pos = (pos + n) % c
            continue
        for p in range(n):
            while topic not in subs[ordered[pos]]:
                pos = (pos + 1) % c
            result[ordered[pos]].append(TopicPartition(topic, p))
            pos = (pos + 1) % c
    return {m: result[m] for m in sorted(result)}
