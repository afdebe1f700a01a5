"""The churn table: what the comparison runner does for each scheduled churn event, decided without I/O from the
event and a snapshot of the play (`PlayView`), as one `Action` the runner carries out (`runner._Play._carry_out`).

One row per churn kind in `CHURN_TABLE`; `plan(event, view, rng)` looks the kind up, picks the target member (a
member index, or a draw from the scenario-seeded `rng` for "random") for the kinds that act on one, and returns
either what to do or a `Skip` with the reason the churn row records. The runner adds only what the doing reveals (new member names, the killed
ZooKeeper node, ...) to the row.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from migration.compare.scenario import PROTOCOLS, ChurnEvent, ChurnKind, Family

ZK_RESTART_AFTER_S = 2.0  # a killed ZooKeeper leader is restarted this long after the kill
STALL_PAST_SESSION_S = 1.5  # a classic member "session-expiry" stalls this long beyond the session timeout


class Target(NamedTuple):
    """A live member a churn event acts on."""

    name: str
    protocol: str


@dataclass(frozen=True, slots=True)
class PlayView:
    """What the churn decisions need of a play, read by the runner just before the event."""

    shared: bool  # one mixed group of every protocol's members
    family: Family  # the family of the play's protocol (the first protocol of a shared play)
    node_started: bool  # the runner started the node, so it can kill and restart it
    zk_nodes: int  # nodes of the runner's own ZooKeeper ensemble; 0 when the ZooKeeper was given
    live: tuple[Target, ...]  # each live member, in join order
    session_timeout_ms: int


@dataclass(frozen=True, slots=True)
class Skip:
    """Not applied: the churn row says why."""

    reason: str


@dataclass(frozen=True, slots=True)
class SpawnMembers:
    count: int
    protocol: str | None  # None: the play's protocol


@dataclass(frozen=True, slots=True)
class GrowTopic:
    topic: str
    partitions: int


@dataclass(frozen=True, slots=True)
class KillZkLeader:
    restart_after_s: float = ZK_RESTART_AFTER_S


@dataclass(frozen=True, slots=True)
class KillCoordinator:
    """SIGKILL the node and restart it in the background (the schedule goes on meanwhile)."""


@dataclass(frozen=True, slots=True)
class ReplaceMember:
    """Stop `member` cleanly, then start a member of `protocol` in its slot."""

    member: str
    protocol: str


@dataclass(frozen=True, slots=True)
class LeaveMember:
    """A clean leave (SIGTERM), waited for in the background."""

    member: str


@dataclass(frozen=True, slots=True)
class CrashMember:
    member: str


@dataclass(frozen=True, slots=True)
class ExpireSession:
    """A legacy member expires its own ZooKeeper session on the server (SIGUSR1)."""

    member: str
    detail: Mapping[str, Any] = field(default_factory=lambda: {"how": "server-side session close"})


@dataclass(frozen=True, slots=True)
class SuspendMember:
    """SIGSTOP now, SIGCONT after `resume_after_s`; `detail` goes into the churn row."""

    member: str
    resume_after_s: float
    detail: Mapping[str, Any]


Action = (
    Skip
    | SpawnMembers
    | GrowTopic
    | KillZkLeader
    | KillCoordinator
    | ReplaceMember
    | LeaveMember
    | CrashMember
    | ExpireSession
    | SuspendMember
)

NO_TARGET = Skip("no live member to target")


def _join(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    return SpawnMembers(ev.count, ev.protocol)


def _partition_increase(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    assert ev.topic is not None and ev.partitions
    return GrowTopic(ev.topic, ev.partitions)


def _zk_leader_kill(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    if view.zk_nodes < 2:
        return Skip("no local ZooKeeper ensemble to disturb")
    return KillZkLeader()


def _coordinator_kill(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    if not view.shared and view.family is Family.LEGACY:
        return Skip("a legacy group has no coordinator")
    if not view.node_started:
        return Skip("the node was given, not started by the runner")
    return KillCoordinator()


def _replace(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    assert target is not None and ev.protocol is not None
    return ReplaceMember(target.name, ev.protocol)


def _leave(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    assert target is not None
    return LeaveMember(target.name)


def _crash(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    assert target is not None
    return CrashMember(target.name)


def _pause(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    assert target is not None
    return SuspendMember(target.name, ev.duration_s, {"duration_s": ev.duration_s})


def _session_expiry(ev: ChurnEvent, view: PlayView, target: Target | None) -> Action:
    assert target is not None
    if PROTOCOLS[target.protocol] is Family.LEGACY:
        return ExpireSession(target.name)
    # classic and consumer: heartbeats stop for longer than the session timeout
    stall = view.session_timeout_ms / 1000.0 + STALL_PAST_SESSION_S
    return SuspendMember(target.name, stall, {"how": "stalled past session timeout", "stall_s": stall})


@dataclass(frozen=True, slots=True)
class Rule:
    """How one churn kind is decided: `targets_member` rules get the live member the event names (no member:
    NO_TARGET, before the rule is asked)."""

    decide: Callable[[ChurnEvent, PlayView, Target | None], Action]
    targets_member: bool


CHURN_TABLE: dict[ChurnKind, Rule] = {
    ChurnKind.JOIN: Rule(_join, targets_member=False),
    ChurnKind.PARTITION_INCREASE: Rule(_partition_increase, targets_member=False),
    ChurnKind.ZK_LEADER_KILL: Rule(_zk_leader_kill, targets_member=False),
    ChurnKind.COORDINATOR_KILL: Rule(_coordinator_kill, targets_member=False),
    ChurnKind.REPLACE: Rule(_replace, targets_member=True),
    ChurnKind.LEAVE: Rule(_leave, targets_member=True),
    ChurnKind.CRASH: Rule(_crash, targets_member=True),
    ChurnKind.PAUSE: Rule(_pause, targets_member=True),
    ChurnKind.SESSION_EXPIRY: Rule(_session_expiry, targets_member=True),
}


def pick_target(ev: ChurnEvent, live: tuple[Target, ...], rng: random.Random) -> Target | None:
    """The live member `ev` targets: by index in join order, or drawn from `rng` for "random" (the only use of
    `rng`, so a scenario's seed gives the same draws every play); None when there is none."""
    if not live:
        return None
    if ev.member is None:
        return live[rng.randrange(len(live))]
    return live[ev.member] if ev.member < len(live) else None


def plan(ev: ChurnEvent, view: PlayView, rng: random.Random) -> Action:
    """What to do for `ev` in the play `view` shows.

    >>> view = PlayView(False, Family.LEGACY, True, 1, (Target("m0", "legacy-fast"),), 6000)
    >>> plan(ChurnEvent(1.0, ChurnKind.COORDINATOR_KILL), view, random.Random(0))
    Skip(reason='a legacy group has no coordinator')
    >>> plan(ChurnEvent(1.0, ChurnKind.CRASH, member=0), view, random.Random(0))
    CrashMember(member='m0')
    """
    rule = CHURN_TABLE[ev.kind]
    if not rule.targets_member:
        return rule.decide(ev, view, None)
    target = pick_target(ev, view.live, rng)
    if target is None:
        return NO_TARGET
    return rule.decide(ev, view, target)
