"""The single public entry to the broker-protocol assignors: validates input, dispatches by strategy name."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from zkcoord.assignors._common import Assignment, TopicPartition
from zkcoord.assignors.range import range_assign
from zkcoord.assignors.roundrobin import roundrobin_assign
from zkcoord.assignors.sticky import cooperative_sticky_assign, sticky_assign

STRATEGIES: tuple[str, ...] = ("range", "roundrobin", "sticky", "cooperative-sticky")


def assign(
    strategy: str,
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    *,
    owned: Mapping[str, Collection[TopicPartition]] | None = None,
    generations: Mapping[str, int] | None = None,
    instance_ids: Mapping[str, str | None] | None = None,
) -> Assignment:
    """Run the assignor named `strategy` (the JoinGroup protocol name) and return member -> sorted partitions.

    Every member of `subscriptions` appears in the result (possibly with an empty list). Topics missing from
    `partitions_per_topic` are ignored, as Kafka ignores topics without metadata. `owned` and `generations` are
    the OwnedPartitions/GenerationId of ConsumerProtocolSubscription v1/v2 and matter only to the sticky
    assignors; `instance_ids` (group.instance.id) orders static members first for range and roundrobin.
    """
    if strategy == "range":
        return range_assign(subscriptions, partitions_per_topic, instance_ids)
    if strategy == "roundrobin":
        return roundrobin_assign(subscriptions, partitions_per_topic, instance_ids)
    if strategy in ("sticky", "cooperative-sticky"):
        run = sticky_assign if strategy == "sticky" else cooperative_sticky_assign
        return run(subscriptions, partitions_per_topic, owned=owned, generations=generations)
    raise ValueError(f"unknown assignment strategy {strategy!r}; valid strategies: {', '.join(STRATEGIES)}")
