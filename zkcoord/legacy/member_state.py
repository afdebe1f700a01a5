"""The legacy member's lifecycle as data: its states, the events that move it, and the one table of
transitions (`TRANSITIONS`), checked by `transition()`; whether the member may hand out records, is stable or
stops is read from the state alone, never kept beside it.

The runtime (`zkcoord.zk.member.LegacyConsumer`) feeds events from three sources and carries out what the
state says: the caller (`START`, `LEAVE`, `CLOSE`, `CLOSED`), kazoo's threads (`REQUEST` from watches, `SUSPEND`,
`RECONNECT`, `SESSION_LOST`), and its rebalance thread, which walks one attempt through `REREGISTER` /
`REGISTERED`, `FENCE` (eager) or `RECONCILE` (fast mode's incremental hand-over) and `INSTALL`, and ends a rebalance with `DONE`, `GIVE_UP` or `DUPLICATE`. Events from
kazoo's threads arrive at any moment, so every state the member can be in after `START` accepts them.

A rebalance that is due while one runs is not a state: it is the runtime's "rebalance due" event latch, which
coalesces bursts of watch events into one rebalance (the original's `isWatcherTriggered`). The table therefore
has no "due" states; `DONE` and `GIVE_UP` are fed only when nothing became due meanwhile (else the next
rebalance runs at once, and the state stays what the events made it).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType

from zkcoord.errors import ZkcoordError


class MemberState(Enum):
    CREATED = "created"  # constructed; nothing in ZooKeeper yet
    REGISTERING = "registering"  # writing my ids znode: at start, or again after the session moved
    REBALANCING = "rebalancing"  # a rebalance is due or running, and the fetch path is fenced
    OWNING = "owning"  # hands out the share the last rebalance installed; a new one may be due or starting
    # An incremental rebalance runs: the partitions it keeps are still handed out, the ones it releases are
    # not any more, the ones it claims not yet.
    RECONCILING = "reconciling"
    STABLE = "stable"  # owning, and the last rebalance finished with nothing due since
    WAITING_FOR_BROKER = "waiting_for_broker"  # stable, fenced: no broker registered (as the original)
    FAILED = "failed"  # the last rebalance gave up (faithful retries exhausted, or an error no retry covers)
    SUSPENDED = "suspended"  # connection suspended: fenced, my znodes may survive, so ownership is kept
    EXPIRED = "expired"  # session lost: ZooKeeper deleted my ephemerals, ownership dropped, register again
    STOPPED = "stopped"  # another session holds my consumer id: no more rebalances until close()
    # leave() runs (fast mode's make-before-break exit): deregistered, no more rebalances; what is still held
    # is handed out until its successor waits for it (or the leave's deadline), then released.
    LEAVING = "leaving"
    CLOSING = "closing"  # close() runs: commit, release, deregister
    CLOSED = "closed"

    def __str__(self) -> str:
        return self.name


class MemberEvent(Enum):
    START = "start"  # start() called
    REGISTERED = "registered"  # my ids znode is written under the session now current
    REREGISTER = "reregister"  # an attempt found the session moved or my ids znode gone: register again
    REQUEST = "request"  # a watch fired, or an attempt was dropped and must run again: a rebalance is due
    SUSPEND = "suspend"  # kazoo: SUSPENDED
    RECONNECT = "reconnect"  # kazoo: CONNECTED again
    SESSION_LOST = "session_lost"  # kazoo: LOST
    FENCE = "fence"  # an attempt fences the fetch path before it commits and releases
    # An incremental attempt releases only what moves: kept partitions stay handed out when it starts while
    # they are handed out, else the attempt fences as FENCE does.
    RECONCILE = "reconcile"
    INSTALL = "install"  # the attempt claimed its share and read its offsets, session and generation unmoved
    DONE = "done"  # a rebalance ended well and nothing became due meanwhile
    GIVE_UP = "give_up"  # a rebalance ended without its share and nothing became due: idle until an event
    DUPLICATE = "duplicate"  # my consumer id is registered by another session
    LEAVE = "leave"  # leave() called while stable
    CLOSE = "close"  # close() called
    CLOSED = "closed"  # close() finished

    def __str__(self) -> str:
        return self.name


class IllegalStateTransition(ZkcoordError):
    """The member got an event its state does not accept (a runtime bug: the table is the specification)."""

    def __init__(self, from_state: MemberState, event: MemberEvent) -> None:
        super().__init__(f"legacy member: event {event} is illegal in state {from_state}")
        self.from_state = from_state
        self.event = event


S = MemberState
E = MemberEvent
_ORDER = {
    state: i for i, state in enumerate(MemberState)
}  # declaration order: tables read the same every run

# The fetch path may hand out records only in these states; entering one needs INSTALL (checked by a test).
HANDS_OUT: frozenset[MemberState] = frozenset({S.OWNING, S.STABLE, S.RECONCILING, S.LEAVING})
# No rebalance runs (a due one waits; the iterator goes on): a leaving member is no longer registered.
PAUSED: frozenset[MemberState] = frozenset({S.LEAVING})
# `is_stable()`: no rebalance due or running, and the last one succeeded.
SETTLED: frozenset[MemberState] = frozenset({S.STABLE, S.WAITING_FOR_BROKER})
# No more rebalances; the iterator ends; watches unsubscribe.
STOPPING: frozenset[MemberState] = frozenset({S.STOPPED, S.CLOSING, S.CLOSED})
# The next attempt must write my ids znode before anything else.
MUST_REGISTER: frozenset[MemberState] = frozenset({S.REGISTERING, S.EXPIRED})

# After START, before close(): every state kazoo's threads can find the member in.
_LIVE: frozenset[MemberState] = frozenset(S) - {S.CREATED} - STOPPING


def _stays(states: frozenset[MemberState] | set[MemberState]) -> dict[MemberState, MemberState]:
    return {s: s for s in states}


# TRANSITIONS[event][state] = next state. A pair missing here is illegal. Once stopping, every event but
# CLOSE / CLOSED leaves the state as it is: a watch or an attempt still in flight must not revive the member.
_TABLE: dict[MemberEvent, dict[MemberState, MemberState]] = {
    E.START: {S.CREATED: S.REGISTERING},
    E.REGISTERED: {
        S.REGISTERING: S.REBALANCING,
        # A session event arrived while the znode was written: its own rebalance checks the session again.
        **_stays({S.REBALANCING, S.SUSPENDED, S.EXPIRED}),
    },
    E.REREGISTER: {
        s: S.REGISTERING
        for s in (S.REGISTERING, S.REBALANCING, S.OWNING, S.RECONCILING, S.SUSPENDED, S.EXPIRED)
    },
    E.REQUEST: {
        S.STABLE: S.OWNING,  # the original keeps fetching until the rebalance fences, and so does the member
        S.WAITING_FOR_BROKER: S.REBALANCING,
        S.FAILED: S.REBALANCING,
        **_stays({S.REGISTERING, S.REBALANCING, S.OWNING, S.RECONCILING, S.SUSPENDED, S.EXPIRED, S.LEAVING}),
    },
    E.SUSPEND: {
        **{s: S.SUSPENDED for s in _LIVE - {S.EXPIRED, S.LEAVING}},
        S.EXPIRED: S.EXPIRED,  # nothing left to keep; it must still register again
        S.LEAVING: S.STOPPED,  # fenced; no reconnect may rebalance (register again): leave() closes
    },
    E.RECONNECT: {
        S.SUSPENDED: S.REBALANCING,  # same session or not, the next attempt decides
        S.STABLE: S.OWNING,
        S.WAITING_FOR_BROKER: S.REBALANCING,
        S.FAILED: S.REBALANCING,
        **_stays({S.REGISTERING, S.REBALANCING, S.OWNING, S.RECONCILING, S.EXPIRED, S.LEAVING}),
    },
    E.SESSION_LOST: {**{s: S.EXPIRED for s in _LIVE - {S.LEAVING}}, S.LEAVING: S.STOPPED},
    E.FENCE: {
        **{s: S.REBALANCING for s in (S.REBALANCING, S.OWNING, S.SUSPENDED)},
        S.EXPIRED: S.EXPIRED,  # lost mid-attempt: the attempt's session check drops it
    },
    E.RECONCILE: {
        S.OWNING: S.RECONCILING,  # the kept share goes on being handed out
        S.RECONCILING: S.RECONCILING,  # the next attempt after a claim conflict
        # Fenced already (first rebalance, a failed one, a reconnect): stays fenced until INSTALL.
        S.REBALANCING: S.REBALANCING,
        S.SUSPENDED: S.REBALANCING,
        S.EXPIRED: S.EXPIRED,
    },
    E.INSTALL: {S.REBALANCING: S.OWNING, S.RECONCILING: S.OWNING},
    E.DONE: {
        S.OWNING: S.STABLE,
        # An attempt ends well without INSTALL only when no broker exists (SUSPENDED: its reconnect event is
        # still on the way while the attempt's reads already went through).
        S.REBALANCING: S.WAITING_FOR_BROKER,
        S.SUSPENDED: S.WAITING_FOR_BROKER,
        S.RECONCILING: S.WAITING_FOR_BROKER,  # the brokers went away after a conflict: fenced, as above
    },
    E.GIVE_UP: {
        S.REBALANCING: S.FAILED,
        # Every attempt failed before it fenced: the share stays handed out, as it does today; not stable.
        S.OWNING: S.OWNING,
        # An incremental rebalance gave up: what it kept stays handed out; not stable.
        S.RECONCILING: S.OWNING,
        # A session event arrived after the last attempt: its rebalance follows.
        **_stays({S.REGISTERING, S.SUSPENDED, S.EXPIRED}),
    },
    E.DUPLICATE: {s: S.STOPPED for s in _LIVE},
    # Only from STABLE: no attempt runs or is due, so none can feed the attempt's events afterwards.
    E.LEAVE: {S.STABLE: S.LEAVING},
    E.CLOSE: {s: S.CLOSING for s in frozenset(S) - {S.CLOSING, S.CLOSED}},
    E.CLOSED: {S.CLOSING: S.CLOSED},
}
for _event, _moves in _TABLE.items():
    if _event not in (E.CLOSE, E.CLOSED):
        _moves.update(_stays(STOPPING))

TRANSITIONS: Mapping[MemberEvent, Mapping[MemberState, MemberState]] = MappingProxyType(
    {event: MappingProxyType(moves) for event, moves in _TABLE.items()}
)

# The same table read the other way (the group core's `VALID_PREVIOUS`): which states may precede each state.
VALID_PREVIOUS: Mapping[MemberState, frozenset[MemberState]] = MappingProxyType(
    {
        to: frozenset(src for moves in _TABLE.values() for src, dst in moves.items() if dst is to)
        for to in MemberState
    }
)


def transition(current: MemberState, event: MemberEvent) -> MemberState:
    """The state `event` moves `current` to; `IllegalStateTransition` when the table has no such move."""
    try:
        return TRANSITIONS[event][current]
    except KeyError:
        raise IllegalStateTransition(current, event) from None


def hands_out(state: MemberState) -> bool:
    """May the fetch path hand out records (the fence is down)?"""
    return state in HANDS_OUT


def describe_table() -> list[str]:
    """The table as Markdown rows (`| event | from -> to, ... |`), for docs/legacy-member.md; a self-move of a
    stopping state is left out (every event but CLOSE / CLOSED is ignored once stopping)."""
    rows = ["| event | from → to |", "|---|---|"]
    for event, moves in TRANSITIONS.items():
        shown = [
            f"{src} → {dst}" if dst is not src else f"{src} (stays)"
            for src, dst in sorted(moves.items(), key=lambda move: _ORDER[move[0]])
            if not (src in STOPPING and dst is src)
        ]
        rows.append(f"| `{event}` | {', '.join(shown)} |")
    return rows


__all__ = [
    "HANDS_OUT",
    "MUST_REGISTER",
    "SETTLED",
    "STOPPING",
    "TRANSITIONS",
    "VALID_PREVIOUS",
    "IllegalStateTransition",
    "MemberEvent",
    "MemberState",
    "describe_table",
    "hands_out",
    "transition",
]
