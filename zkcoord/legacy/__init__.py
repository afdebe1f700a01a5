"""Pure 0.8-era ZooKeeper consumer protocol: znode paths, payload codecs, assignors, topic filters."""

from zkcoord.legacy.assignment import (
    Decision,
    RoundRobinSubscriptionError,
    assign,
    consumers_for_topic,
    owned_by,
    strategy_for,
)
from zkcoord.topic_partition import TopicPartition

__all__ = [
    "Decision",
    "RoundRobinSubscriptionError",
    "TopicPartition",
    "assign",
    "consumers_for_topic",
    "owned_by",
    "strategy_for",
]
