"""Partition leadership planning for the cluster controller: a pure, deterministic function from (live nodes,
topics, current leaders) to new leaders, where every partition whose leader changes gets its leader epoch bumped.

Two placement policies, because what a move costs differs:

* `sticky` (topic data, replication factor 1): a partition's log lives on its replicas' disks only, so a live
  leader is never moved and a partition is only ever led by one of its assigned replicas: the first live one in
  assignment order. With no live replica the partition goes offline (`NO_LEADER`, epoch bumped) until a replica
  returns, as Kafka's OfflinePartitionLeaderElection does without unclean election. Moving it to another node
  would serve an empty log under the old partition's name.
* `balanced` (the offsets topic, whose records live in ZooKeeper and can be loaded by any node): the leaders
  are spread so every live node leads floor(P/N) or ceil(P/N) partitions of the topic, moving as few
  partitions as that allows (the nodes already leading the most keep the larger shares).

No live node leaves a partition leaderless (`NO_LEADER`, epoch bumped), as Kafka's controller does when the
last ISR member goes. A new partition starts at leader epoch 0. Outputs never depend on dict/set order.

Example: live {1, 2}; `__consumer_offsets` with 4 partitions all led by node 1 at epoch 3 (balanced) ⇒
partitions 0, 1 stay on node 1 at epoch 3; partitions 2, 3 move to node 2 at epoch 4.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from zkcoord.topic_partition import TopicPartition

NO_LEADER = -1
INITIAL_LEADER_EPOCH = 0


class Placement(enum.Enum):
    STICKY = "sticky"
    BALANCED = "balanced"


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic as the controller sees it: partition -> replica list (from /brokers/topics/[t]) and a policy."""

    replicas: Mapping[int, Sequence[int]]
    placement: Placement = Placement.STICKY

    @property
    def partitions(self) -> tuple[int, ...]:
        return tuple(sorted(self.replicas))


@dataclass(frozen=True, slots=True, order=True)
class Leadership:
    """Who leads a partition and in which leader epoch (NO_LEADER = -1 when nobody can)."""

    leader: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class LeadershipPlan:
    """The complete new leader map (sorted by partition) and the partitions whose leadership changed."""

    leaders: tuple[tuple[TopicPartition, Leadership], ...]
    changed: tuple[TopicPartition, ...]

    def as_dict(self) -> dict[TopicPartition, Leadership]:
        return dict(self.leaders)

    def led_by(self, node: int) -> tuple[TopicPartition, ...]:
        return tuple(tp for tp, lead in self.leaders if lead.leader == node)


def single_replica_assignment(
    partitions: int, nodes: Collection[int], start: int = 0
) -> dict[int, list[int]]:
    """A replication-factor-1 assignment for a new topic: partition p on the (start + p)-th live node in id
    order (Kafka's AdminUtils round-robins the first replica the same way from a start index)."""
    if partitions < 1:
        raise ValueError(f"a topic needs at least one partition, got {partitions}")
    ordered = sorted(set(nodes))
    if not ordered:
        raise ValueError("no live nodes to assign partitions to")
    return {p: [ordered[(start + p) % len(ordered)]] for p in range(partitions)}


def plan_leadership(
    live_nodes: Collection[int],
    topics: Mapping[str, TopicSpec],
    current: Mapping[TopicPartition, Leadership],
) -> LeadershipPlan:
    """New leaders for every partition of `topics` (partitions of other topics in `current` are dropped)."""
    live = tuple(sorted(set(live_nodes)))
    total_load = dict.fromkeys(live, 0)
    chosen: dict[TopicPartition, int] = {}
    for topic in sorted(topics):
        spec = topics[topic]
        placed = (
            _place_balanced(topic, spec, live, current, total_load)
            if spec.placement is Placement.BALANCED
            else _place_sticky(topic, spec, live, current, total_load)
        )
        chosen.update(placed)
    leaders: list[tuple[TopicPartition, Leadership]] = []
    changed: list[TopicPartition] = []
    for tp in sorted(chosen):
        node = chosen[tp]
        old = current.get(tp)
        if old is None:
            lead = Leadership(node, INITIAL_LEADER_EPOCH)
            changed.append(tp)
        elif old.leader == node:
            lead = old
        else:
            lead = Leadership(node, old.leader_epoch + 1)
            changed.append(tp)
        leaders.append((tp, lead))
    return LeadershipPlan(tuple(leaders), tuple(changed))


def _place_sticky(
    topic: str,
    spec: TopicSpec,
    live: tuple[int, ...],
    current: Mapping[TopicPartition, Leadership],
    total_load: dict[int, int],
) -> dict[TopicPartition, int]:
    placed: dict[TopicPartition, int] = {}
    orphans: list[TopicPartition] = []
    live_set = frozenset(live)
    for p in spec.partitions:
        tp = TopicPartition(topic, p)
        old = current.get(tp)
        if old is not None and old.leader in live_set:
            placed[tp] = old.leader
            total_load[old.leader] += 1
        else:
            orphans.append(tp)
    for tp in orphans:
        preferred = [r for r in spec.replicas[tp[1]] if r in live_set]
        node = preferred[0] if preferred else NO_LEADER
        placed[tp] = node
        if node != NO_LEADER:
            total_load[node] += 1
    return placed


def _place_balanced(
    topic: str,
    spec: TopicSpec,
    live: tuple[int, ...],
    current: Mapping[TopicPartition, Leadership],
    total_load: dict[int, int],
) -> dict[TopicPartition, int]:
    partitions = spec.partitions
    if not live:
        return {TopicPartition(topic, p): NO_LEADER for p in partitions}
    held: dict[int, list[int]] = {n: [] for n in live}
    for p in partitions:
        old = current.get(TopicPartition(topic, p))
        if old is not None and old.leader in held:
            held[old.leader].append(p)
    # Giving the ceil shares to the nodes that already hold the most maximises the partitions that stay put.
    base, extra = divmod(len(partitions), len(live))
    by_holding = sorted(live, key=lambda n: (-len(held[n]), n))
    quota = {n: base + (1 if i < extra else 0) for i, n in enumerate(by_holding)}
    placed: dict[TopicPartition, int] = {}
    topic_load = dict.fromkeys(live, 0)
    for n in live:
        for p in held[n][: quota[n]]:
            placed[TopicPartition(topic, p)] = n
            topic_load[n] += 1
    for p in partitions:
        tp = TopicPartition(topic, p)
        if tp in placed:
            continue
        open_nodes = [n for n in live if topic_load[n] < quota[n]]
        node = min(open_nodes, key=lambda n: (topic_load[n] - quota[n], total_load[n], n))
        placed[tp] = node
        topic_load[node] += 1
    for node in placed.values():
        total_load[node] += 1
    return placed
