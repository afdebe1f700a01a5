"""The per-group migration state machine (Planned → DualCommit → Verified → Finalized, and RolledBack from
any of them), the checked transition table, the marker payload, the group's membership phase (legacy only →
mixed → broker only, KIP-866 style), and the pure decisions each step makes: what to copy to the broker, what
rollback writes to ZooKeeper, which member moves next, what could go wrong. No I/O.
"""

from __future__ import annotations

import enum
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from zkcoord.bridge.policy import (
    Agreement,
    PartitionDivergence,
    TopicPartition,
    divergence_report,
)
from zkcoord.errors import ZkcoordError
from zkcoord.zk.handoff import Phase as HandoffPhase
from zkcoord.zk.handoff import handoff_path

MARKER_VERSION = 1


class MigrationState(enum.Enum):
    NONE = "none"  # no marker znode: the group was never planned
    PLANNED = "planned"
    DUAL_COMMIT = "dual-commit"
    VERIFIED = "verified"
    FINALIZED = "finalized"
    ROLLED_BACK = "rolled-back"


class Step(enum.Enum):
    PLAN = "plan"
    DUAL_COMMIT = "dual-commit"
    VERIFY = "verify"
    FINALIZE = "finalize"
    ROLLBACK = "rollback"


S = MigrationState

# The state each step leaves the group in when it succeeds.
TARGET: dict[Step, MigrationState] = {
    Step.PLAN: S.PLANNED,
    Step.DUAL_COMMIT: S.DUAL_COMMIT,
    Step.VERIFY: S.VERIFIED,
    Step.FINALIZE: S.FINALIZED,
    Step.ROLLBACK: S.ROLLED_BACK,
}

# States a step may start from. Re-running a step in its own target state is allowed: every step is
# idempotent, and re-running is how a step that died half way is repaired.
VALID_FROM: dict[Step, frozenset[MigrationState]] = {
    Step.PLAN: frozenset({S.NONE, S.PLANNED, S.ROLLED_BACK}),
    Step.DUAL_COMMIT: frozenset({S.PLANNED, S.DUAL_COMMIT}),
    Step.VERIFY: frozenset({S.DUAL_COMMIT, S.VERIFIED}),
    Step.FINALIZE: frozenset({S.VERIFIED, S.FINALIZED}),
    Step.ROLLBACK: frozenset({S.PLANNED, S.DUAL_COMMIT, S.VERIFIED, S.FINALIZED, S.ROLLED_BACK}),
}

# Every transition the machine can make (a failed verify sends VERIFIED back to DUAL_COMMIT).
VALID_PREVIOUS: dict[MigrationState, frozenset[MigrationState]] = {
    S.NONE: frozenset(),
    S.PLANNED: frozenset({S.NONE, S.PLANNED, S.ROLLED_BACK}),
    S.DUAL_COMMIT: frozenset({S.PLANNED, S.DUAL_COMMIT, S.VERIFIED}),
    S.VERIFIED: frozenset({S.DUAL_COMMIT, S.VERIFIED}),
    S.FINALIZED: frozenset({S.VERIFIED, S.FINALIZED}),
    S.ROLLED_BACK: frozenset({S.PLANNED, S.DUAL_COMMIT, S.VERIFIED, S.FINALIZED, S.ROLLED_BACK}),
}

NEXT_COMMAND: dict[MigrationState, str] = {
    S.NONE: "plan",
    S.PLANNED: "dual-commit",
    S.DUAL_COMMIT: "verify",
    S.VERIFIED: "finalize",
    S.FINALIZED: "(done; rollback if needed)",
    S.ROLLED_BACK: "plan (to start again)",
}


class MembershipPhase(enum.Enum):
    """Which kinds of member the group holds (KIP-866's migration state, for members instead of metadata)."""

    LEGACY_ONLY = "legacy-only"  # ZooKeeper members only: nothing of the member migration has happened
    MIXED = "mixed"  # both kinds, one group through `serve --bridge-zk-groups`: walk on, or walk back
    BROKER_ONLY = "broker-only"  # broker-protocol members only; ZooKeeper still mirrors them until finalize


P = MembershipPhase

# Every move between phases is legal while the migration is open: mixed is reached member by member, and a direct
# legacy-only <-> broker-only move is the barrier way (every member stopped, then started as the other kind, the
# group empty in between). The one rule is the point of no return below.
# A group finalized once it held broker-protocol members only has passed the point of no return for its members:
# a ZooKeeper member showing up afterwards is an operator's mistake to report, not a phase to record. (A group
# finalized while legacy-only took the offsets-only path: its members still have the member walk ahead.)
POINT_OF_NO_RETURN = (
    "point of no return: `migrate finalize` once no ZooKeeper member is left, then running the coordinator "
    "without --bridge-zk-groups / --bridge-zk-offsets for this group. Until then every move can be walked back "
    "member by member (`migrate rollback`); after it, going back means stopping every broker-protocol member "
    "first (the barrier way), then `migrate rollback`"
)
# In front of the team's own brokers (`zkcoord proxy`, docs/proxy.md) the walk ends with `migrate handoff` instead
# of verify/finalize, and its point of no return is the hand-off's switch to forwarding.
POINT_OF_NO_RETURN_PROXY = (
    "point of no return: `migrate handoff` switching the group to `forwarding` once no ZooKeeper member is left (the "
    "cluster's own coordinator then has it). Until then every move can be walked back member by member (`migrate "
    "rollback`); after it, going back is the barrier way (docs/proxy.md 'Hand-off')"
)


class IllegalStep(ZkcoordError):
    """A step was asked of a group in a state it cannot start from."""

    def __init__(self, group: str, step: Step, state: MigrationState) -> None:
        allowed = ", ".join(sorted(s.value for s in VALID_FROM[step]))
        super().__init__(
            f"group {group!r} is in state '{state.value}'; `migrate {step.value}` needs one of: {allowed}. "
            f"Next step for this group: `zkcoord migrate {NEXT_COMMAND[state]}`"
        )
        self.group, self.step, self.state = group, step, state


class IllegalTransition(ZkcoordError):
    def __init__(self, group: str, old: MigrationState, new: MigrationState) -> None:
        super().__init__(f"group {group!r}: illegal migration transition {old.value} -> {new.value}")


class MalformedMarker(ZkcoordError, ValueError):
    pass


def check_step(group: str, step: Step, state: MigrationState) -> bool:
    """True when the step would change the state, False when it re-runs in its target state; raises
    IllegalStep when the group is not in a state the step starts from."""
    if state not in VALID_FROM[step]:
        raise IllegalStep(group, step, state)
    return state is not TARGET[step]


def transition(group: str, old: MigrationState, new: MigrationState) -> MigrationState:
    if old not in VALID_PREVIOUS[new]:
        raise IllegalTransition(group, old, new)
    return new


class IllegalPhase(ZkcoordError):
    def __init__(self, group: str, old: MembershipPhase | None, new: MembershipPhase, why: str) -> None:
        before = "none" if old is None else old.value
        super().__init__(f"group {group!r}: illegal membership phase {before} -> {new.value}: {why}")


def phase_transition(
    group: str, state: MigrationState, old: MembershipPhase | None, new: MembershipPhase
) -> MembershipPhase:
    """The phase to record: `new`, unless a finalized broker-only group would go back."""
    if state is MigrationState.FINALIZED and old is P.BROKER_ONLY and new is not P.BROKER_ONLY:
        raise IllegalPhase(group, old, new, "the group is finalized (past the point of no return)")
    return new


# ---------------------------------------------------------------------------------------------- marker


@dataclass(frozen=True, slots=True)
class Marker:
    """The payload of /consumers/[group]/migration."""

    group: str
    state: MigrationState
    step: Step
    updated_ms: int
    tool: str = "zkcoord"
    phase: MembershipPhase | None = None  # None: written before phases existed, or never observed

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "version": MARKER_VERSION,
            "group": self.group,
            "state": self.state.value,
            "step": self.step.value,
            "updated_ms": self.updated_ms,
            "tool": self.tool,
        }
        if self.phase is not None:  # an optional key: markers of earlier zkcoord versions still decode
            obj["membership"] = self.phase.value
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, path: str, data: bytes) -> Marker:
        try:
            obj = json.loads(data)
            if obj.get("version") != MARKER_VERSION:
                raise MalformedMarker(f"{path}: unknown marker version {obj.get('version')!r}")
            return cls(
                group=str(obj["group"]),
                state=MigrationState(obj["state"]),
                step=Step(obj["step"]),
                updated_ms=int(obj["updated_ms"]),
                tool=str(obj.get("tool", "")),
                phase=MembershipPhase(obj["membership"]) if "membership" in obj else None,
            )
        except MalformedMarker:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MalformedMarker(f"{path}: malformed migration marker ({exc}): {data[:120]!r}") from None


# --------------------------------------------------------------------------------------------- decisions


def seed_broker(
    zookeeper: Mapping[TopicPartition, int], broker: Mapping[TopicPartition, int], *, bridged: bool = False
) -> dict[TopicPartition, int]:
    """What dual-commit copies to the broker: ZooKeeper offsets where the broker has none or is behind.
    Never lowers a broker offset.

    `bridged`: the broker side was read through a coordinator offset bridge, which answers max(its own, ZooKeeper),
    so a value equal to ZooKeeper's may be ZooKeeper's own: it is copied too, so that the coordinator holds every
    offset itself once the bridge is switched off. Still never lowering: its own offset is at most that value."""
    zk = {k: v for k, v in zookeeper.items() if v >= 0}
    br = {k: v for k, v in broker.items() if v >= 0}
    if bridged:
        return {tp: off for tp, off in sorted(zk.items()) if br.get(tp, -1) <= off}
    return {tp: off for tp, off in sorted(zk.items()) if br.get(tp, -1) < off}


def rollback_zookeeper(
    zookeeper: Mapping[TopicPartition, int], broker: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """What rollback writes to ZooKeeper: broker offsets where ZooKeeper has none or is behind, so that
    ZK := max(zk, broker) and no offset regresses for members that go back to ZooKeeper storage."""
    zk = {k: v for k, v in zookeeper.items() if v >= 0}
    return {tp: off for tp, off in sorted(broker.items()) if off >= 0 and zk.get(tp, -1) < off}


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """What plan saw of a group (gathered by the edge)."""

    group: str
    legacy_members: tuple[str, ...]
    owners: tuple[tuple[TopicPartition, str], ...]
    zookeeper: Mapping[TopicPartition, int]
    zookeeper_errors: tuple[str, ...] = ()
    broker: Mapping[TopicPartition, int] = field(default_factory=dict)
    broker_error: str | None = None
    broker_members: tuple[str, ...] = ()  # member ids (DescribeGroups)
    broker_clients: tuple[str, ...] = ()  # their client ids, in the same order: how a person knows them
    broker_state: str = ""
    offset_bridges: tuple[str, ...] = ()  # running `zkcoord serve --bridge-zk-offsets` registrations
    bridged_members: int = 0  # broker-protocol members registered in ZooKeeper by `serve --bridge-zk-groups`


@dataclass(frozen=True, slots=True)
class PlanReport:
    group: str
    changes: tuple[str, ...]
    risks: tuple[str, ...]
    divergence: tuple[PartitionDivergence, ...]
    to_seed: Mapping[TopicPartition, int]


def assess(facts: GroupFacts) -> PlanReport:
    """What `dual-commit` will change and what could go wrong, for an operator to read before going on."""
    bridged = bool(facts.offset_bridges)
    report = divergence_report(facts.zookeeper, facts.broker) if facts.broker_error is None else ()
    to_seed = (
        seed_broker(facts.zookeeper, facts.broker, bridged=bridged) if facts.broker_error is None else {}
    )
    changes: list[str] = []
    risks: list[str] = []
    if facts.broker_error is None:
        changes.append(
            f"copy {len(to_seed)} of {len(facts.zookeeper)} ZooKeeper offsets to the broker "
            + (
                "(where the broker has none, is behind, or answers ZooKeeper's own value through the offset "
                "bridge; no broker offset is lowered)"
                if bridged
                else "(where the broker has none or is behind; no broker offset is lowered)"
            )
        )
    changes.append(f"write the marker /consumers/{facts.group}/migration (state planned → dual-commit)")
    changes.append(
        "then bounce the legacy members with offsets.storage=kafka and dual.commit.enabled=true "
        "(zkcoord legacy members: `zkcoord legacy consume ... --property offsets.storage=kafka "
        "--property dual.commit.enabled=true`)"
    )
    if facts.offset_bridges:
        changes.append(
            f"the coordinator offset bridge is on ({len(facts.offset_bridges)} node(s)): commits of broker-protocol "
            "members are mirrored to ZooKeeper and their OffsetFetch reads max(broker, ZooKeeper), so members "
            "can also move straight to the broker protocol and a rollback stays current. The broker offsets read "
            "here are that max too, so an equal value does not show the coordinator holds it: no agreement is "
            "reported"
        )
    if not facts.zookeeper:
        risks.append("the group has no offsets in ZooKeeper: nothing to migrate (wrong group id or chroot?)")
    if facts.zookeeper_errors:
        risks.append(
            f"{len(facts.zookeeper_errors)} malformed offset znode(s) will not be copied: "
            + "; ".join(facts.zookeeper_errors[:3])
        )
    if facts.broker_error is not None:
        risks.append(f"the broker is not reachable ({facts.broker_error}): dual-commit cannot proceed")
    if facts.legacy_members:
        risks.append(
            f"{len(facts.legacy_members)} legacy member(s) registered: until every one runs with dual commit, "
            "ZooKeeper-only members keep moving ZooKeeper ahead of the broker (verify will show it)"
        )
    unbridged = len(facts.broker_members) - facts.bridged_members
    if facts.broker_members and unbridged > 0:
        risks.append(
            f"{unbridged} of {len(facts.broker_members)} broker-protocol member(s) in group state "
            f"'{facts.broker_state}' are not registered in ZooKeeper: they do not see ZooKeeper ownership, so a "
            "partition can be consumed by both kinds at once (run the coordinator with --bridge-zk-groups)"
        )
    if facts.broker_members and not facts.offset_bridges:
        risks.append(
            "broker-protocol members commit to the broker only and no coordinator offset bridge is "
            "registered: ZooKeeper goes stale (run the coordinator with `zkcoord serve --bridge-zk-offsets`, "
            "or rely on `migrate rollback`, which copies the broker's offsets back)"
        )
    behind = [r for r in report if r.agreement is Agreement.BROKER_AHEAD]
    missing_zk = [r for r in report if r.agreement is Agreement.MISSING_IN_ZOOKEEPER]
    if behind:
        risks.append(
            f"the broker is already ahead of ZooKeeper on {len(behind)} partition(s): someone commits to the "
            "broker; a legacy member reading ZooKeeper only would re-read up to "
            f"{max(r.lag for r in behind)} messages"
        )
    if missing_zk:
        risks.append(f"{len(missing_zk)} partition(s) have a broker offset but none in ZooKeeper")
    owned = {tp for tp, _ in facts.owners}
    unowned_offsets = [tp for tp in facts.zookeeper if tp not in owned]
    if facts.legacy_members and unowned_offsets:
        risks.append(f"{len(unowned_offsets)} partition(s) with offsets have no owner znode right now")
    return PlanReport(facts.group, tuple(changes), tuple(risks), tuple(report), to_seed)


def summarize(report: Sequence[PartitionDivergence]) -> dict[str, int]:
    counts = {a.value: 0 for a in Agreement}
    for row in report:
        counts[row.agreement.value] += 1
    return counts


# ------------------------------------------------------------------------------------------- membership


class MemberLike(Protocol):
    """What the workflow needs of a member (zkcoord.bridge.membership.MemberView has it)."""

    @property
    def consumer_id(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def owned(self) -> tuple[Any, ...]: ...


LEGACY_PROTOCOL = "legacy"


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """A member as the workflow shows it: what ZooKeeper holds for it, and whether it is still there."""

    consumer_id: str
    protocol: str
    owned: tuple[Any, ...]
    client_id: str = ""  # a broker-protocol member's client.id, from the registration the coordinator wrote
    member_id: str = ""  # its classic member id
    registered: bool = True  # its /consumers/G/ids znode exists (False: only owner znodes are left)
    gone: bool = False  # a broker-protocol member the coordinator (DescribeGroups) no longer has


def _tp(tp: Any) -> str:
    return f"{tp[0]}-{tp[1]}"


def is_legacy(member: MemberLike) -> bool:
    return member.protocol == LEGACY_PROTOCOL


def observe_phase(members: Sequence[MemberLike]) -> MembershipPhase | None:
    """The phase the registered members show; None for an empty group (it keeps its recorded phase)."""
    legacy = sum(1 for m in members if is_legacy(m))
    if not members:
        return None
    if legacy == len(members):
        return P.LEGACY_ONLY
    return P.MIXED if legacy else P.BROKER_ONLY


def settle_problems(
    members: Sequence[MemberLike], owners: Mapping[Any, str], partitions: Mapping[str, int]
) -> list[str]:
    """Why the group is not settled (empty list: it is): an owner znode held by a consumer that is not
    registered (a member gone mid-rebalance, or a coordinator that is gone), a partition of a consumed topic
    with no owner while members are registered. A member is moved only in a settled group, so every move
    starts from one owner per partition."""
    registered = {m.consumer_id for m in members}
    problems = []
    for tp, thread in sorted((tuple(k), v) for k, v in owners.items()):
        consumer = thread.rpartition("-")[0]
        if consumer not in registered:
            problems.append(f"{_tp(tp)} is held by {thread}, whose consumer {consumer} is not registered")
    if members:
        held = {tuple(k) for k in owners}
        unowned = [
            f"{topic}-{p}"
            for topic, count in sorted(partitions.items())
            for p in range(count)
            if (topic, p) not in held
        ]
        if unowned:
            problems.append(f"{len(unowned)} partition(s) have no owner: {', '.join(unowned[:8])}")
    return problems


def member_name(member: MemberLike) -> str:
    """How a person knows a member: a broker-protocol member by its client id (the consumer id the coordinator
    registered for it beside it), a ZooKeeper member by its consumer id (what `zkcoord legacy consume` prints)."""
    client = getattr(member, "client_id", "")
    return f"{client} ({member.consumer_id})" if client else member.consumer_id


def is_gone(member: MemberLike) -> bool:
    """A member whose znodes remain but who is not there any more: owner znodes without a registration, or a
    broker-protocol registration the coordinator no longer has in its group."""
    return not getattr(member, "registered", True) or bool(getattr(member, "gone", False))


def describe_members(members: Sequence[MemberLike]) -> list[str]:
    """One line per protocol: its members and what each owns, in consumer-id order; members that are gone are
    shown as gone (their znodes are left over, not a member to move)."""
    by_protocol: dict[str, list[MemberLike]] = {}
    for m in sorted(members, key=lambda m: m.consumer_id):
        by_protocol.setdefault(m.protocol, []).append(m)
    lines = []
    for protocol in sorted(by_protocol, key=lambda p: (p != LEGACY_PROTOCOL, p)):
        group = by_protocol[protocol]
        kind = "ZooKeeper (legacy)" if protocol == LEGACY_PROTOCOL else f"broker-protocol ({protocol})"
        gone = sum(1 for m in group if is_gone(m))
        lines.append(f"{kind} members: {len(group) - gone}" + (f" (+ {gone} gone)" if gone else ""))
        for m in group:
            owns = ", ".join(_tp(tp) for tp in m.owned) or "nothing"
            if not getattr(m, "registered", True):
                lines.append(f"  GONE {member_name(m)}: not registered, its owner znodes hold {owns}")
            elif getattr(m, "gone", False):
                lines.append(
                    f"  GONE {member_name(m)}: not in the coordinator's group any more; its znodes hold {owns}"
                )
            else:
                lines.append(f"  {member_name(m)} owns {owns}")
    return lines or ["no member registered"]


def finalize_blockers(members: Sequence[MemberLike]) -> list[str]:
    """The ZooKeeper members that keep a mixed group from being finalized."""
    return sorted(m.consumer_id for m in members if is_legacy(m) and not is_gone(m))


@dataclass(frozen=True, slots=True)
class Invocation:
    """How the operator reaches ZooKeeper and the broker, so that every command the tool advises works as printed
    (the same --zk, --bootstrap, security flags and --state-dir as the command that printed it)."""

    zk: str = "CONNECT"
    bootstrap: str | None = None
    zk_flags: tuple[str, ...] = ()  # --zk-jaas-config F ... (ZooKeeper security)
    broker_flags: tuple[str, ...] = ()  # --command-config F (broker security)
    state_dir: str | None = None  # None: the default

    def migrate(self, step: str, group: str) -> str:
        parts = ["zkcoord", "migrate", step, "--zk", self.zk, *self.zk_flags]
        if step == "handoff":
            # --bootstrap of handoff names a broker of the cluster (default: from /brokers/ids), never the proxy
            # the other steps were given: its coordinator is the one the group leaves.
            parts += [*self.broker_flags, *(["--state-dir", self.state_dir] if self.state_dir else [])]
        elif step != "repair":
            if self.bootstrap or step not in ("status", "plan"):
                # every step but status (and a plan without it) needs the broker: a placeholder says so
                parts += ["--bootstrap", self.bootstrap or "HOST:PORT", *self.broker_flags]
            if self.state_dir:
                parts += ["--state-dir", self.state_dir]
        return shlex.join([*parts, "--group", group])

    def zookeeper_member(self, group: str, topic: str) -> str:
        return shlex.join(
            ["zkcoord", "legacy", "consume", "--zk", self.zk, *self.zk_flags, *self.broker_flags,
             "--group", group, "--topic", topic]
        )  # fmt: skip

    def broker_member(self, group: str, topic: str, client_id: str) -> str:
        # auto.offset.reset=earliest: a partition nobody committed yet is read from its start, never skipped.
        # session.timeout.ms=10000 (Kafka's default before 3.0; librdkafka's is 45 s): a member that died (kcat
        # exits when every broker is down, e.g. a single coordinator restarting) is replaced within 10 s.
        # -u: unbuffered output, so a pipe sees each record as it is consumed.
        return shlex.join(
            ["kcat", "-b", self.bootstrap or "HOST:PORT", "-G", group, "-X", f"client.id={client_id}",
             "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000", "-u", topic]
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Move:
    """The next member move of a walk (forward: legacy → broker protocol; back: the reverse), or why none."""

    done: bool
    member: str | None = None
    lines: tuple[str, ...] = ()


def next_move(
    members: Sequence[MemberLike],
    problems: Sequence[str],
    *,
    back: bool,
    group: str = "G",
    topics: Sequence[str] = (),
    how: Invocation | None = None,
) -> Move:
    """Which member to restart as the other kind next, one at a time, each only in a settled group. Members
    move in consumer-id order (back: the same order), so two operators following the tool pick the same one.
    Every command in the lines (after `$ `) works as printed."""
    how = how or Invocation()
    live = [m for m in members if not is_gone(m)]
    movable = sorted((m for m in live if is_legacy(m) != back), key=lambda m: (m.consumer_id, m.protocol))
    direction = "back to ZooKeeper" if back else "to the broker protocol"
    check = f"$ {how.migrate('status', group)}"
    if not movable:
        return Move(True, None, (f"member walk {direction}: done, no member left to move",))
    if problems:
        return Move(
            False,
            None,
            (
                f"member walk {direction}: wait, the group is not settled ({len(movable)} member(s) left to move):",
                *(f"  {p}" for p in problems),
                f"  re-run once every partition has exactly one registered owner: {check}",
            ),
        )
    m = movable[0]
    owns = ", ".join(_tp(tp) for tp in m.owned) or "nothing"
    topic = topics[0] if len(topics) == 1 else "TOPIC"
    if back:
        steps = (
            f"  1. stop broker-protocol member {member_name(m)} (owns {owns}) with a clean leave (SIGTERM)",
            f"  2. start one ZooKeeper member in its place: $ {how.zookeeper_member(group, topic)}",
        )
    else:
        steps = (
            f"  1. stop ZooKeeper member {m.consumer_id} (owns {owns}) cleanly: SIGTERM the `zkcoord legacy "
            f"consume` that printed 'consumer id {m.consumer_id}' (or shut that consumer down)",
            "  2. start one broker-protocol member in its place (same group and topics, bootstrap = the "
            f"coordinator running with --bridge-zk-groups): $ {how.broker_member(group, topic, _next_client(group, members))}",
        )
    return Move(
        False,
        m.consumer_id,
        (
            f"member walk {direction}: {len(movable)} member(s) left; next, 1 of {len(movable)}:",
            *steps,
            f"  3. check before the next move (it names the next member only once the group has settled): {check}",
        ),
    )


def _next_client(group: str, members: Sequence[MemberLike]) -> str:
    """A client id for the next broker-protocol member no member of the group has yet."""
    taken = {getattr(m, "client_id", "") for m in members}
    n = 1
    while f"{group}-broker-{n}" in taken:
        n += 1
    return f"{group}-broker-{n}"


def guide(
    group: str,
    state: MigrationState,
    members: Sequence[MemberLike],
    problems: Sequence[str],
    *,
    bridge_on: bool,
    recorded: MembershipPhase | None,
    topics: Sequence[str] = (),
    how: Invocation | None = None,
    proxied: bool = False,
    handoff: HandoffPhase | None = None,
) -> list[str]:
    """The operator's next steps for a group, from its state and members, start to finish: plan, dual-commit,
    the member walk, verify, finalize, the point of no return, the clean-up. Runnable commands follow `$ `.
    `proxied`: a running `zkcoord proxy` coordinates the group (its walk ends with `migrate handoff`); `handoff`:
    the phase of its hand-off znode, if any."""
    how = how or Invocation()
    live = [m for m in members if not is_gone(m)]
    legacy = [m for m in live if is_legacy(m)]
    broker = [m for m in live if not is_legacy(m)]
    leftovers = [m for m in members if not is_legacy(m)]  # the bridge's znodes, of live and gone members
    walking = bool(broker) or recorded in (P.MIXED, P.BROKER_ONLY)

    def run(step: str) -> str:
        return f"$ {how.migrate(step, group)}"

    if handoff is HandoffPhase.FORWARDING:
        return [
            "next: done, the cluster's own coordinator has the group (hand-off forwarding); restart its members "
            "with bootstrap.servers = the cluster's brokers at leisure; going back is the barrier way (docs/proxy.md "
            "'Hand-off')"
        ]
    if handoff is HandoffPhase.RELEASING:
        return [
            "next: the hand-off stopped while its members were releasing (they hold nothing and are not "
            f"admitted): resume it (or delete {handoff_path(group)} to go back, docs/proxy.md 'Hand-off'):",
            f"  {run('handoff')}",
        ]
    if state in (S.NONE,):
        return [f"next: {run('plan')}"]
    if state is S.ROLLED_BACK:
        walk = next_move(members, problems, back=True, group=group, topics=topics, how=how)
        if not walk.done:
            return ["next:", *(f"  {line}" for line in walk.lines)]
        return ["next: done, every member is a ZooKeeper member again; to start over:", f"  {run('plan')}"]
    if state is S.PLANNED:
        return [f"next: {run('dual-commit')}"]
    if state in (S.DUAL_COMMIT, S.VERIFIED) and legacy and (walking or bridge_on):
        walk = next_move(members, problems, back=False, group=group, topics=topics, how=how)
        return ["next (member by member, the recommended path):", *(f"  {line}" for line in walk.lines)]
    if (
        (state in (S.DUAL_COMMIT, S.VERIFIED) or (state is S.FINALIZED and bridge_on))
        and broker
        and not legacy
        and problems
    ):
        # Every member moved, but a partition is not held yet (a member still joining): wait before verifying,
        # finalizing or switching the bridge off.
        return [
            "next: wait, the group is not settled:",
            *(f"    {p}" for p in problems),
            f"  re-run once every partition has exactly one registered owner: {run('status')}",
        ]
    if proxied and broker and not legacy and state in (S.DUAL_COMMIT, S.VERIFIED):
        # In front of the team's own brokers: the walk ends with the hand-off, not verify/finalize (docs/proxy.md).
        return [
            "next: no ZooKeeper member is left; hand the group to your cluster's own coordinator (its switch to "
            "forwarding is the point of no return, docs/proxy.md 'Hand-off'):",
            f"  {run('handoff')}",
        ]
    if state is S.DUAL_COMMIT:
        if legacy:  # no coordinator bridge: the documented offsets-only migration
            return [
                "next: restart every ZooKeeper member with offsets.storage=kafka and dual commit "
                "(`zkcoord legacy consume ... --property offsets.storage=kafka --property "
                "dual.commit.enabled=true`), then:",
                f"  {run('verify')}",
            ]
        return [f"next: {run('verify')}"]
    if state is S.VERIFIED:
        return [f"next: {run('finalize')}"]
    # FINALIZED
    if legacy and walking:
        return [
            "WARNING: ZooKeeper member(s) "
            + ", ".join(m.consumer_id for m in legacy)
            + " joined a group finalized to the broker protocol: stop them, or walk back:",
            f"  {run('rollback')}",
        ]
    if broker and bridge_on:
        return [
            "next: the point of no return. Restart every `zkcoord serve` node that serves this group without "
            "--bridge-zk-groups and --bridge-zk-offsets (the coordinator then answers its own offsets and stops "
            "writing ZooKeeper), then clean up what the bridge left in ZooKeeper:",
            f"  {run('finalize')}",
        ]
    if leftovers and not legacy and not bridge_on:
        return [
            f"next: clean up the bridge's znodes of {len(leftovers)} broker-protocol member(s) "
            "(no coordinator offset bridge is registered any more):",
            f"  {run('finalize')}",
        ]
    if legacy:
        return [
            "next: set dual.commit.enabled=false on every ZooKeeper member and restart it "
            "(`--property offsets.storage=kafka --property dual.commit.enabled=false`); rollback stays possible: "
            f"{run('rollback')}"
        ]
    return ["next: done, nothing left to do for this group"]
