"""What the lifecycle tables of the controller and the cluster node share (`zkcoord.zk.controller_state`,
`zkcoord.cluster.node_state`): the error for a move a table does not have, and the checked lookup. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import TypeVar

from zkcoord.errors import ZkcoordError

S = TypeVar("S", bound=Enum)
E = TypeVar("E", bound=Enum)
W = TypeVar("W", bound=Enum)


class IllegalTransition(ZkcoordError):
    """A runtime fed an event its state does not accept (a runtime bug: the table is the specification)."""

    def __init__(self, machine: str, from_state: Enum, event: Enum) -> None:
        super().__init__(f"{machine}: event {event} is illegal in state {from_state}")
        self.machine = machine
        self.from_state = from_state
        self.event = event


def freeze(
    table: dict[E, dict[S, tuple[S, frozenset[W]]]], closed: S
) -> Mapping[E, Mapping[S, tuple[S, frozenset[W]]]]:
    """`table` read-only, with the terminal state `closed` taking every event and staying, without work: a watch
    or a pass still in flight must not revive a closed runtime."""
    return MappingProxyType(
        {event: MappingProxyType({**moves, closed: (closed, frozenset())}) for event, moves in table.items()}
    )


def lookup(
    machine: str, table: Mapping[E, Mapping[S, tuple[S, frozenset[W]]]], current: S, event: E
) -> tuple[S, frozenset[W]]:
    """(next state, work to add) for `event` in `current`; `IllegalTransition` when `table` has no such move."""
    try:
        return table[event][current]
    except KeyError:
        raise IllegalTransition(machine, current, event) from None


def state_changes(table: Mapping[E, Mapping[S, tuple[S, frozenset[W]]]]) -> dict[tuple[S, E], S]:
    """Every move of `table` that changes the state, as {(from, event): to} (what a reader checks first)."""
    return {
        (src, event): dst
        for event, moves in table.items()
        for src, (dst, _) in moves.items()
        if dst is not src
    }
