"""The controller's lifecycle as data: its states, the events that move it, the one table of transitions with the
work each event asks for (`TRANSITIONS`), checked by `transition()`, and which steps a pass runs for the work it
took. No I/O, no clock: `zkcoord.zk.controller.Controller` feeds the events and does the work, through
`zkcoord.zk.coalescing.CoalescingWorker`.

Whether the node acts as controller, and whether it holds the fence (epoch) it won, is read from the state
alone: ACTIVE acts; HELD holds a fence it may not act on until a pass re-verifies it (after a suspension, or a
win or resume whose activation came in a stale connection generation); FOLLOWER holds none. Only a pass in an
unchanged connection generation may feed WON or RESUMED (the worker checks that under the listener's lock), and
RESUMED needs a held fence, so the node acts only with a fence won in its current session: a LOST makes it a
FOLLOWER, whatever it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from zkcoord.zk.lifecycle import IllegalTransition, freeze, lookup


class ControllerState(Enum):
    FOLLOWER = "follower"  # no fence: another node is controller, or an election is due
    HELD = "held"  # holds the fence it won, but must verify it before acting (suspended, stale activation)
    ACTIVE = "active"  # the controller: acts, every write fenced by the epoch it won
    CLOSED = "closed"

    def __str__(self) -> str:
        return self.name


class ControllerEvent(Enum):
    # kazoo's connection thread (each also starts a new connection generation)
    SUSPENDED = "suspended"  # stop acting first: a suspended controller may already be deposed
    LOST = "lost"  # the session and its ephemerals are gone, the fence with them
    CONNECTED = "connected"  # verify the fence (same session) or elect (new one)
    # kazoo's watch thread, the caller, the worker's idle timer
    CONTROLLER_CHANGED = "controller_changed"  # the /controller watch fired
    TREE_CHANGED = "tree_changed"  # any other watch fired, or a reconcile was requested
    RESYNC = "resync"  # nothing happened for a while: reconcile (and elect without a fence) anyway
    # the worker's pass
    WON = "won"  # won the election (epoch bumped) and the generation had not moved: act
    WON_STALE = "won_stale"  # won, but the connection changed during the pass: hold the fence, verify it
    RESUMED = "resumed"  # our /controller and epoch still ours (reconnect, spurious wake-up): act again
    RESUMED_STALE = "resumed_stale"  # as RESUMED, but the generation moved: verify again in the new one
    SESSION_CHANGED = "session_changed"  # the fence was won on a session that has since gone: drop it
    LOST_ELECTION = "lost_election"  # another session holds /controller: follow it (its watch is set)
    RESIGN = "resign"  # deposed (epoch moved) or /controller unusable (gone, malformed, names another): elect
    RETRY_ELECTION = "retry_election"  # /controller vanished between create and read: elect again
    INTERRUPTED = "interrupted"  # a ZooKeeper error cut the pass short: reconcile again (elect without fence)
    FAILED = "failed"  # the pass failed otherwise: reconcile again
    CLOSE = "close"

    def __str__(self) -> str:
        return self.name


class ControllerWork(Enum):
    ELECT = "elect"
    VERIFY = "verify"
    RECONCILE = "reconcile"
    NOTIFY = "notify"  # only wakes the worker, so a listener-side step-down reaches on_change promptly


S = ControllerState
E = ControllerEvent
W = ControllerWork
Move = tuple[ControllerState, frozenset[ControllerWork]]

HOLDS_FENCE: frozenset[ControllerState] = frozenset({S.HELD, S.ACTIVE})
_LIVE = (S.FOLLOWER, S.HELD, S.ACTIVE)
_NONE: frozenset[ControllerWork] = frozenset()


def _work(*items: ControllerWork) -> frozenset[ControllerWork]:
    return frozenset(items)


def _stays(work: frozenset[ControllerWork]) -> dict[ControllerState, Move]:
    return {s: (s, work) for s in _LIVE}


# TRANSITIONS[event][state] = (next state, work to do). A pair missing here is illegal. CLOSED ignores every
# event: a watch or a pass still in flight must not revive a closed controller.
_TABLE: dict[ControllerEvent, dict[ControllerState, Move]] = {
    E.SUSPENDED: {
        S.FOLLOWER: (S.FOLLOWER, _work(W.NOTIFY)),
        S.HELD: (S.HELD, _work(W.NOTIFY)),
        S.ACTIVE: (S.HELD, _work(W.NOTIFY)),
    },
    E.LOST: {s: (S.FOLLOWER, _work(W.NOTIFY, W.ELECT)) for s in _LIVE},
    E.CONNECTED: _stays(_work(W.VERIFY)),
    E.CONTROLLER_CHANGED: _stays(_work(W.ELECT)),
    E.TREE_CHANGED: _stays(_work(W.RECONCILE)),
    E.RESYNC: {
        S.FOLLOWER: (S.FOLLOWER, _work(W.RECONCILE, W.ELECT)),
        S.HELD: (S.HELD, _work(W.RECONCILE)),
        S.ACTIVE: (S.ACTIVE, _work(W.RECONCILE)),
    },
    # A create of /controller can succeed while active (someone deleted it): the new epoch is won again.
    E.WON: {s: (S.ACTIVE, _NONE) for s in _LIVE},
    E.WON_STALE: {
        S.FOLLOWER: (S.HELD, _work(W.VERIFY)),
        S.HELD: (S.HELD, _work(W.VERIFY)),
        S.ACTIVE: (S.ACTIVE, _work(W.VERIFY)),  # only a CONNECTED moved the generation: still acting
    },
    E.RESUMED: {S.HELD: (S.ACTIVE, _NONE), S.ACTIVE: (S.ACTIVE, _NONE)},
    E.RESUMED_STALE: {
        S.FOLLOWER: (S.FOLLOWER, _NONE),  # the listener dropped the fence meanwhile (LOST asked to elect)
        S.HELD: (S.HELD, _work(W.VERIFY)),
        S.ACTIVE: (S.ACTIVE, _work(W.VERIFY)),
    },
    E.SESSION_CHANGED: {s: (S.FOLLOWER, _NONE) for s in _LIVE},  # the same pass elects next
    E.LOST_ELECTION: {s: (S.FOLLOWER, _NONE) for s in _LIVE},
    E.RESIGN: {s: (S.FOLLOWER, _work(W.ELECT)) for s in _LIVE},
    E.RETRY_ELECTION: _stays(_work(W.ELECT)),
    E.INTERRUPTED: {
        S.FOLLOWER: (S.FOLLOWER, _work(W.RECONCILE, W.ELECT)),
        S.HELD: (S.HELD, _work(W.RECONCILE)),
        S.ACTIVE: (S.ACTIVE, _work(W.RECONCILE)),
    },
    E.FAILED: _stays(_work(W.RECONCILE)),
    E.CLOSE: {s: (S.CLOSED, _NONE) for s in _LIVE},
}
TRANSITIONS: Mapping[ControllerEvent, Mapping[ControllerState, Move]] = freeze(_TABLE, S.CLOSED)

# Events only a pass of an unchanged connection generation may feed (through the worker's generation check).
NEEDS_CURRENT_GENERATION: frozenset[ControllerEvent] = frozenset({E.WON, E.RESUMED})
CONNECTION_EVENTS: frozenset[ControllerEvent] = frozenset({E.SUSPENDED, E.LOST, E.CONNECTED})


def transition(current: ControllerState, event: ControllerEvent) -> Move:
    """(next state, work to add) for `event` in `current`; `IllegalTransition` when the table has no such move."""
    return lookup("controller", TRANSITIONS, current, event)


def acts(state: ControllerState) -> bool:
    return state is S.ACTIVE


def holds_fence(state: ControllerState) -> bool:
    return state in HOLDS_FENCE


def must_verify(state: ControllerState, work: frozenset[ControllerWork]) -> bool:
    """A pass verifies first when asked to, and whenever it holds a fence it does not act on: otherwise a node
    could keep /controller while nobody acts as controller."""
    return W.VERIFY in work or state is S.HELD


def must_elect(state: ControllerState, work: frozenset[ControllerWork], verified: bool) -> bool:
    """After the verify step (`state` as it left it): elect when asked to, or when a verify left no fence."""
    return W.ELECT in work or (verified and not holds_fence(state))


def must_reconcile(state: ControllerState, work: frozenset[ControllerWork], verified: bool) -> bool:
    """After the election step: reconcile while active, for any work but a bare NOTIFY."""
    return acts(state) and (bool(work - {W.NOTIFY}) or verified)


__all__ = [
    "CONNECTION_EVENTS",
    "HOLDS_FENCE",
    "NEEDS_CURRENT_GENERATION",
    "TRANSITIONS",
    "ControllerEvent",
    "ControllerState",
    "ControllerWork",
    "IllegalTransition",
    "acts",
    "holds_fence",
    "must_elect",
    "must_reconcile",
    "must_verify",
    "transition",
]
