"""Pure broker-protocol assignors: range, roundrobin, sticky, cooperative-sticky."""

from zkcoord.assignors._common import Assignment, TopicPartition
from zkcoord.assignors.api import STRATEGIES, assign

__all__ = ["STRATEGIES", "Assignment", "TopicPartition", "assign"]
