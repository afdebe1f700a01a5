"""Pure broker-protocol assignors: range, roundrobin, sticky, cooperative-sticky, and KIP-429 revocations."""

from zkcoord.assignors._common import Assignment, TopicPartition
from zkcoord.assignors.api import STRATEGIES, assign
from zkcoord.assignors.cooperative import cooperative_revocations
from zkcoord.assignors.invariants import AssignmentInvariantError, check_assignment

__all__ = [
    "STRATEGIES",
    "Assignment",
    "AssignmentInvariantError",
    "TopicPartition",
    "assign",
    "check_assignment",
    "cooperative_revocations",
]
