"""The per-group migration state machine (Planned → DualCommit → Verified → Finalized, and RolledBack from
any of them), the checked transition table, the marker payload, and the pure decisions each step makes:
what to copy to the broker, what rollback writes to ZooKeeper, what could go wrong. No I/O.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zkcoord.bridge.policy import (
    Agreement,
    PartitionDivergence,
    TopicPartition,
    as_tp,
    divergence_report,
)
from zkcoord.errors import ZkcoordError

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


# ---------------------------------------------------------------------------------------------- marker


@dataclass(frozen=True, slots=True)
class Marker:
    """The payload of /consumers/[group]/migration."""

    group: str
    state: MigrationState
    step: Step
    updated_ms: int
    tool: str = "zkcoord"

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": MARKER_VERSION,
                "group": self.group,
                "state": self.state.value,
                "step": self.step.value,
                "updated_ms": self.updated_ms,
                "tool": self.tool,
            },
            separators=(",", ":"),
        ).encode()

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
            )
        except MalformedMarker:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MalformedMarker(f"{path}: malformed migration marker ({exc}): {data[:120]!r}") from None


# --------------------------------------------------------------------------------------------- decisions


def seed_broker(zookeeper: Mapping[Any, int], broker: Mapping[Any, int]) -> dict[TopicPartition, int]:
    """What dual-commit copies to the broker: ZooKeeper offsets where the broker has none or is behind.
    Never lowers a broker offset."""
    zk = {as_tp(k): v for k, v in zookeeper.items() if v >= 0}
    br = {as_tp(k): v for k, v in broker.items() if v >= 0}
    return {tp: off for tp, off in sorted(zk.items()) if br.get(tp, -1) < off}


def rollback_zookeeper(zookeeper: Mapping[Any, int], broker: Mapping[Any, int]) -> dict[TopicPartition, int]:
    """What rollback writes to ZooKeeper: broker offsets where ZooKeeper has none or is behind, so that
    ZK := max(zk, broker) and no offset regresses for members that go back to ZooKeeper storage."""
    return seed_broker(broker, zookeeper)


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
    broker_members: tuple[str, ...] = ()
    broker_state: str = ""
    offset_bridges: tuple[str, ...] = ()  # running `zkcoord serve --bridge-zk-offsets` registrations


@dataclass(frozen=True, slots=True)
class PlanReport:
    group: str
    changes: tuple[str, ...]
    risks: tuple[str, ...]
    divergence: tuple[PartitionDivergence, ...]
    to_seed: Mapping[TopicPartition, int]


def assess(facts: GroupFacts) -> PlanReport:
    """What `dual-commit` will change and what could go wrong, for an operator to read before going on."""
    report = divergence_report(facts.zookeeper, facts.broker) if facts.broker_error is None else ()
    to_seed = seed_broker(facts.zookeeper, facts.broker) if facts.broker_error is None else {}
    changes: list[str] = []
    risks: list[str] = []
    if facts.broker_error is None:
        changes.append(
            f"copy {len(to_seed)} of {len(facts.zookeeper)} ZooKeeper offsets to the broker "
            "(where the broker has none or is behind; no broker offset is lowered)"
        )
    changes.append(f"write the marker /consumers/{facts.group}/migration (state planned → dual-commit)")
    changes.append(
        "then bounce the legacy members with offsets.storage=kafka and dual.commit.enabled=true "
        "(zkcoord legacy members: --offsets-storage kafka --dual-commit)"
    )
    if facts.offset_bridges:
        changes.append(
            f"the coordinator offset bridge is on ({len(facts.offset_bridges)} node(s)): commits of broker-protocol "
            "members are mirrored to ZooKeeper and their OffsetFetch reads max(broker, ZooKeeper), so members "
            "can also move straight to the broker protocol and a rollback stays current"
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
    if facts.broker_members:
        risks.append(
            f"{len(facts.broker_members)} broker-protocol member(s) in group state '{facts.broker_state}': "
            "they do not see ZooKeeper ownership, so a partition can be consumed by both kinds at once"
        )
        if not facts.offset_bridges:
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
