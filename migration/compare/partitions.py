"""A partition increase as the ZooKeeper-era tools made it (`kafka-topics --alter --partitions N --zookeeper`,
AdminUtils.addPartitions): the existing replica lists are kept, the new partitions' replicas are appended to
`/brokers/topics/T`, and the controller, watching that znode, creates their partition state (leaders).

`grown_assignment` is pure; `increase_partitions` does the reads and the write through zkcoord.zk.registry (only
zkcoord.zk talks to kazoo).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.legacy.codecs import TopicAssignment
from zkcoord.zk import registry


class PartitionIncreaseError(ZkcoordError):
    """The topic could not be grown (missing, not growing, no broker, or changed concurrently)."""


def grown_assignment(
    existing: Mapping[int, Sequence[int]], partitions: int, brokers: Sequence[int]
) -> dict[int, tuple[int, ...]]:
    """`existing` plus partitions len(existing)..partitions-1, each with as many replicas as partition 0 has:
    partition p's replicas are the (i0 + p)-th and following brokers in id order (wrapping), i0 = position of
    partition 0's first replica. AdminUtils likewise continued partition 0's round-robin (it passed that
    broker's id itself as the start index; the position is what it meant). Raises ConfigError when the topic
    would not grow or cannot be placed."""
    if sorted(existing) != list(range(len(existing))) or not existing:
        raise ConfigError(f"existing partitions must be 0..n-1, got {sorted(existing)}")
    if partitions <= len(existing):
        raise ConfigError(
            f"a partition increase needs more than {len(existing)} partitions, got {partitions}"
        )
    ordered = sorted(set(brokers))
    if not ordered:
        raise ConfigError("no live broker to place the new partitions on")
    rf = len(existing[0])
    if rf > len(ordered):
        raise ConfigError(f"replication factor {rf} exceeds the {len(ordered)} live brokers")
    first = existing[0][0] if existing[0] else ordered[0]
    start = ordered.index(first) if first in ordered else 0
    out = {p: tuple(rs) for p, rs in existing.items()}
    for p in range(len(existing), partitions):
        base = start + p
        out[p] = tuple(ordered[(base + i) % len(ordered)] for i in range(rf))
    return out


def increase_partitions(client: Any, topic: str, partitions: int) -> tuple[int, TopicAssignment]:
    """Grow `topic` to `partitions` in ZooKeeper (`client`: a started kazoo client); returns (partitions
    before, the assignment written)."""
    current = registry.read_topic(client, topic)
    if current is None:
        raise PartitionIncreaseError(f"topic {topic!r}: not in ZooKeeper (/brokers/topics/{topic})")
    brokers = sorted(registry.read_brokers(client))
    try:
        grown = grown_assignment(current.replicas, partitions, brokers)
    except ConfigError as exc:
        raise PartitionIncreaseError(f"topic {topic!r}: {exc}") from None
    return len(current.partitions), registry.write_topic(client, topic, grown)
