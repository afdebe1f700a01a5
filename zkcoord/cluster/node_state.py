"""The cluster node's lifecycle as data: whether it serves, must register again, or is closed, the events that
move it and the one table of transitions with the work each asks for (`TRANSITIONS`), checked by `transition()`.
No I/O, no clock: `zkcoord.cluster.node.ClusterNode` feeds the events and does the work, through
`zkcoord.zk.coalescing.CoalescingWorker`.

The node answers for its offsets partitions only in SERVING, which only RESUMED enters, and only a pass of an
unchanged connection generation may feed RESUMED (the worker checks that under the listener's lock): a pass that
read ZooKeeper before a suspension cannot switch serving back on. A LOST (the session's ephemerals are gone)
leaves the node EXPIRED until a pass has registered it again (REGISTERING, then REGISTERED); a LOST during that
registration keeps it EXPIRED, so the next pass registers once more.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from zkcoord.zk.lifecycle import IllegalTransition, freeze, lookup


class NodeState(Enum):
    CREATED = "created"  # constructed; start() not done
    SERVING = "serving"  # answers for the partitions it leads and has loaded
    PAUSED = "paused"  # connection suspended, or registered again: serves nothing until a pass resumes
    EXPIRED = "expired"  # the session was lost: its registration is gone; the next pass registers again
    REGISTERING = "registering"  # a pass is registering again (its partitions resigned)
    CLOSED = "closed"

    def __str__(self) -> str:
        return self.name


class NodeEvent(Enum):
    START = "start"  # registered at start-up
    # kazoo's connection thread (each also starts a new connection generation)
    SUSPENDED = "suspended"
    LOST = "lost"
    CONNECTED = "connected"
    CHANGED = "changed"  # a watch fired, a bad znode changed, a store's compaction is due
    RESYNC = "resync"  # nothing happened for a while (or a failed load is due): refresh anyway
    # the worker's pass
    REGISTER = "register"  # the pass starts registering again
    REGISTERED = "registered"  # ... and has
    RESUMED = "resumed"  # the pass read the tree in an unchanged generation: serve
    RESUME_STALE = "resume_stale"  # the generation moved during the pass: the listener's stop stands
    FAILED = "failed"  # the pass failed (ZooKeeper, malformed data, the node id taken): refresh again
    CLOSE = "close"

    def __str__(self) -> str:
        return self.name


class NodeWork(Enum):
    REFRESH = "refresh"  # read brokers and offsets-partition leaders, resign, load, compact


S = NodeState
E = NodeEvent
Move = tuple[NodeState, frozenset[NodeWork]]

REFRESH: frozenset[NodeWork] = frozenset({NodeWork.REFRESH})
_NONE: frozenset[NodeWork] = frozenset()
_STARTED = (S.SERVING, S.PAUSED, S.EXPIRED, S.REGISTERING)
_ALL_OPEN = (S.CREATED, *_STARTED)


def _stays(states: tuple[NodeState, ...], work: frozenset[NodeWork]) -> dict[NodeState, Move]:
    return {s: (s, work) for s in states}


# TRANSITIONS[event][state] = (next state, work to do). A pair missing here is illegal. CLOSED ignores every
# event: a watch or a pass still in flight must not revive a closed node.
_TABLE: dict[NodeEvent, dict[NodeState, Move]] = {
    E.START: {S.CREATED: (S.SERVING, _NONE), S.EXPIRED: (S.EXPIRED, REFRESH)},  # lost while starting
    E.SUSPENDED: {**_stays(_ALL_OPEN, REFRESH), S.SERVING: (S.PAUSED, REFRESH)},
    E.LOST: {s: (S.EXPIRED, REFRESH) for s in _ALL_OPEN},
    E.CONNECTED: _stays(_ALL_OPEN, REFRESH),
    E.CHANGED: _stays(_ALL_OPEN, REFRESH),
    E.RESYNC: _stays(_ALL_OPEN, REFRESH),
    E.REGISTER: {S.EXPIRED: (S.REGISTERING, _NONE)},
    E.REGISTERED: {S.REGISTERING: (S.PAUSED, _NONE), S.EXPIRED: (S.EXPIRED, _NONE)},  # lost meanwhile
    E.RESUMED: {S.SERVING: (S.SERVING, _NONE), S.PAUSED: (S.SERVING, _NONE)},
    E.RESUME_STALE: _stays(_STARTED, REFRESH),
    E.FAILED: {**_stays(_STARTED, REFRESH), S.REGISTERING: (S.EXPIRED, REFRESH)},  # register again
    E.CLOSE: {s: (S.CLOSED, _NONE) for s in _ALL_OPEN},
}
TRANSITIONS: Mapping[NodeEvent, Mapping[NodeState, Move]] = freeze(_TABLE, S.CLOSED)

# Events only a pass of an unchanged connection generation may feed (through the worker's generation check).
NEEDS_CURRENT_GENERATION: frozenset[NodeEvent] = frozenset({E.RESUMED})
CONNECTION_EVENTS: frozenset[NodeEvent] = frozenset({E.SUSPENDED, E.LOST, E.CONNECTED})


def transition(current: NodeState, event: NodeEvent) -> Move:
    """(next state, work to add) for `event` in `current`; `IllegalTransition` when the table has no such move."""
    return lookup("cluster node", TRANSITIONS, current, event)


def serves(state: NodeState) -> bool:
    return state is S.SERVING


def must_register(state: NodeState) -> bool:
    return state is S.EXPIRED


__all__ = [
    "CONNECTION_EVENTS",
    "NEEDS_CURRENT_GENERATION",
    "REFRESH",
    "TRANSITIONS",
    "IllegalTransition",
    "NodeEvent",
    "NodeState",
    "NodeWork",
    "must_register",
    "serves",
    "transition",
]
