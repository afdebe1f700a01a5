"""Classic group states and the table of legal transitions (Kafka's `GroupMetadata.validPreviousStates`), checked."""

from __future__ import annotations

from enum import Enum

from zkcoord.group.errors import IllegalStateTransition


class GroupState(Enum):
    """Values are the names DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_ALL = frozenset(GroupState)

VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: _ALL,
}

# States from which a rebalance may start (`canRebalance`).
CAN_REBALANCE = frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY})


def check_transition(group_id: str, current: GroupState, target: GroupState) -> GroupState:
    """Return `target` if the table allows `current -> target`, else raise `IllegalStateTransition`."""
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(group_id, current, target)
    return target


def parse_state(name: str) -> GroupState | None:
    """Case-insensitive lookup of a reported state name (ListGroups v4 filters); None when unknown."""
    lowered = name.lower()
    for state in GroupState:
        if state.value.lower() == lowered:
            return state
    return None
