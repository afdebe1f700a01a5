"""Carries out the migration steps for one group against ZooKeeper and the broker: checks the marker's
state, journals begin/done/failed under the state dir, does the step's idempotent work, and moves the
marker with a versioned write (so two concurrent `migrate` runs cannot both succeed).

Order inside a step: journal "begin" → work → marker → journal "done". A crash anywhere leaves either the
old state (re-run the step: its work is idempotent) or the new state with the work done.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migration.workflow.states import (
    POINT_OF_NO_RETURN,
    POINT_OF_NO_RETURN_PROXY,
    TARGET,
    GroupFacts,
    Invocation,
    Marker,
    MemberInfo,
    MembershipPhase,
    MigrationState,
    PlanReport,
    Step,
    assess,
    check_step,
    describe_members,
    finalize_blockers,
    guide,
    is_legacy,
    next_move,
    observe_phase,
    phase_transition,
    rollback_zookeeper,
    seed_broker,
    settle_problems,
    summarize,
    transition,
)
from zkcoord.bridge.membership import read_members, repair
from zkcoord.bridge.mixed_policy import classic_marker
from zkcoord.bridge.policy import (
    Agreement,
    PartitionDivergence,
    StoreRead,
    TopicPartition,
    disagreements,
    divergence_report,
    explain,
)
from zkcoord.bridge.zk_store import list_offset_bridges
from zkcoord.errors import ZkcoordError
from zkcoord.legacy import paths
from zkcoord.zk import mixed_group, registry
from zkcoord.zk.cluster_owners import foreign_brokers
from zkcoord.zk.handoff import Phase, handoff_path, read_handoff
from zkcoord.zk.offset_store import (
    WriteMode,
    ZooKeeperOffsetStore,
    list_member_ids,
    list_owners,
    read_node,
    write_node,
)
from zkcoord.zk.registrations import proxy_bootstraps

log = logging.getLogger(__name__)


class StepFailed(ZkcoordError):
    """A step's work did not complete; the group stays in its previous state. Re-run the step."""

    retriable = True


def marker_path(group: str) -> str:
    # A child of the group's znode that no legacy reader looks at (docs/migration.md §4).
    return f"{paths.group_path(group)}/migration"


@dataclass(frozen=True, slots=True)
class Membership:
    """What the group's registrations and owner znodes show right now."""

    members: tuple[MemberInfo, ...]
    owners: dict[TopicPartition, str]
    partitions: dict[str, int]  # partition count of every topic the group owns or has offsets for
    topics: tuple[str, ...]  # the topics the members subscribe to (from their registrations)
    phase: MembershipPhase | None  # None: no member registered
    problems: tuple[str, ...]  # why the group is not settled (empty: settled)


@dataclass
class StepOutcome:
    group: str
    step: Step
    before: MigrationState
    after: MigrationState
    changed: bool
    lines: list[str] = field(default_factory=list)
    ok: bool = True
    divergence: tuple[PartitionDivergence, ...] = ()
    view: dict[str, Any] = field(default_factory=dict)  # the --json document of this group (json_schema.py)


def _subscription(data: bytes | None) -> list[str]:
    """The topics of a registration's static subscription (none for a wildcard or unreadable one)."""
    try:
        obj = json.loads(data or b"")
    except ValueError:
        return []
    sub = obj.get("subscription") if isinstance(obj, dict) and obj.get("pattern") == "static" else None
    return [str(t) for t in sub] if isinstance(sub, dict) else []


class Journal:
    """Append-only JSON lines, one file per group: <state_dir>/<group>.journal.jsonl."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(state_dir)

    def path(self, group: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in group)
        return self.dir / f"{safe}.journal.jsonl"

    def append(self, group: str, entry: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.path(group), "a", encoding="utf-8") as out:
            out.write(json.dumps({"group": group, **entry}, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def entries(self, group: str) -> list[dict[str, Any]]:
        path = self.path(group)
        if not path.exists():
            return []
        found = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line from a crash
        return found


class MigrationRunner:
    """The steps of `zkcoord migrate` for any number of groups, over one ZooKeeper client and an optional
    broker (`broker_for(group)` returns a BrokerOffsetStore-like object; None = no broker reachable)."""

    def __init__(
        self,
        zk: Any,
        broker_for: Callable[[str], Any] | None,
        state_dir: str | os.PathLike[str],
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        how: Invocation | None = None,
    ) -> None:
        self.zk = zk
        self.how = how or Invocation()
        self.broker_for = broker_for
        self.journal = Journal(state_dir)
        self.clock_ms = clock_ms
        self._recorded_phase: dict[str, MembershipPhase | None] = {}  # the marker's phase when a step began

    # ------------------------------------------------------------------------------------------ state

    def marker(self, group: str) -> tuple[Marker | None, int]:
        data, version = read_node(self.zk, marker_path(group))
        if data is None:
            return None, -1
        return Marker.decode(marker_path(group), data), version

    def state(self, group: str) -> MigrationState:
        marker, _ = self.marker(group)
        return MigrationState.NONE if marker is None else marker.state

    def _set_state(
        self,
        group: str,
        step: Step,
        old: MigrationState,
        new: MigrationState,
        version: int,
        phase: MembershipPhase | None = None,
    ) -> None:
        transition(group, old, new)
        if phase is None:
            phase = self._recorded_phase.get(group)
        marker = Marker(group, new, step, self.clock_ms(), phase=phase)
        write_node(self.zk, marker_path(group), marker.encode(), version)

    # ------------------------------------------------------------------------------------- membership

    def membership(self, group: str, coordinator_members: set[str] | None = None) -> Membership:
        """The members ZooKeeper shows; `coordinator_members` (the member ids DescribeGroups answered, None when
        unknown) tells a broker-protocol member that is gone from one that is there."""
        raw_ids = mixed_group.read_ids(self.zk, group)
        views = read_members(self.zk, group)
        members = []
        topics: set[str] = set()
        for view in views:
            data = raw_ids.get(view.consumer_id)
            marker = classic_marker(data) or {}
            topics.update(_subscription(data))
            member_id = marker.get("member_id", "")
            members.append(
                MemberInfo(
                    view.consumer_id,
                    view.protocol,
                    view.owned,
                    client_id=marker.get("client_id", ""),
                    member_id=member_id,
                    registered=data is not None,
                    gone=bool(marker)
                    and coordinator_members is not None
                    and member_id not in coordinator_members,
                )
            )
        owners = list_owners(self.zk, group)
        offsets, _ = self.zookeeper_offsets(group)
        partitions: dict[str, int] = {}
        for topic in sorted({t for t, _ in owners} | {tp.topic for tp in offsets}):
            assignment = registry.read_topic(self.zk, topic)
            if assignment is not None:
                partitions[topic] = len(assignment.partitions)
        live = [m for m in members if m.registered and not m.gone]
        problems = settle_problems(live, owners, partitions) if live else []
        problems += [
            f"broker-protocol member {m.client_id or m.consumer_id} is gone from the coordinator's group but its "
            f"znodes hold {', '.join(f'{tp[0]}-{tp[1]}' for tp in m.owned) or 'nothing'}"
            for m in members
            if m.gone
        ]
        return Membership(
            tuple(members),
            owners,
            partitions,
            tuple(sorted(topics or partitions)),
            observe_phase(live),
            tuple(problems),
        )

    def coordinator_members(self, group: str) -> set[str] | None:
        """The member ids the coordinator has in the group (DescribeGroups), None when it did not answer."""
        if self.broker_for is None:
            return None
        try:
            described = self.broker_for(group).describe()
        except Exception as exc:  # informative only: members are then shown without the gone check
            log.info("group=%s describe failed: %s", group, exc)
            return None
        return {str(m["member_id"]) for m in described["members"]}

    def next_steps(self, group: str, state: MigrationState, seen: Membership) -> list[str]:
        return [f"  {line}" for line in self._guide(group, state, seen)]

    def _guide(self, group: str, state: MigrationState, seen: Membership) -> list[str]:
        marker, _ = self.marker(group)
        return guide(
            group,
            state,
            seen.members,
            seen.problems,
            bridge_on=bool(list_offset_bridges(self.zk)),
            recorded=None if marker is None else marker.phase,
            topics=seen.topics,
            how=self.how,
            proxied=bool(self._proxies(group)),
            handoff=None if (handoff := read_handoff(self.zk, group)[0]) is None else handoff.phase,
        )

    def _proxies(self, group: str) -> list[str]:
        """The running `zkcoord proxy` nodes that coordinate `group` (their announcements)."""
        return proxy_bootstraps(self.zk, group)

    def view(self, group: str, state: MigrationState, seen: Membership) -> dict[str, Any]:
        """The part of every --json document that describes the group: state, members, next steps."""
        marker, _ = self.marker(group)
        return {
            "group": group,
            "state": state.value,
            "membership": {
                "phase": None if seen.phase is None else seen.phase.value,
                "recorded": None if marker is None or marker.phase is None else marker.phase.value,
                "members": [
                    {
                        "consumer_id": m.consumer_id,
                        "client_id": m.client_id or None,
                        "protocol": m.protocol,
                        "owns": [f"{tp[0]}-{tp[1]}" for tp in m.owned],
                        "gone": not m.registered or m.gone,
                    }
                    for m in seen.members
                ],
                "not_settled": list(seen.problems),
            },
            "next": [
                {"text": line.strip(), "command": line.split("$ ", 1)[1] if "$ " in line else None}
                for line in self._guide(group, state, seen)
            ],
        }

    def _phase_to_record(self, group: str, after: MigrationState, seen: Membership) -> MembershipPhase | None:
        recorded = self._recorded_phase.get(group)
        if seen.phase is None:
            return recorded
        return phase_transition(group, after, recorded, seen.phase)

    def _membership_lines(self, group: str, seen: Membership, recorded: MembershipPhase | None) -> list[str]:
        now = "empty (no member registered)" if seen.phase is None else seen.phase.value
        was = "none yet" if recorded is None else recorded.value
        lines = [f"  membership phase: {now} (recorded at the last step: {was})"]
        lines.extend(f"  {line}" for line in describe_members(seen.members))
        lines.extend(f"  not settled: {p}" for p in seen.problems)
        return lines

    # ------------------------------------------------------------------------------------------ reads

    def zookeeper_offsets(self, group: str) -> tuple[dict[TopicPartition, int], list[str]]:
        read = ZooKeeperOffsetStore(self.zk, group).read()
        offsets = {TopicPartition(*tp): v for tp, v in read.offsets.items()}
        return offsets, [str(e) for _, e in sorted(read.errors.items())]

    def broker_offsets(self, group: str) -> StoreRead:
        if self.broker_for is None:
            raise StepFailed("this step needs the broker: pass --bootstrap HOST:PORT")
        read: StoreRead = self.broker_for(group).read_offsets(None)
        return read

    def _broker_or_fail(self, group: str, step: Step) -> dict[TopicPartition, int]:
        read = self.broker_offsets(group)
        if read.request_error is not None:
            raise StepFailed(
                f"group {group!r}: {step.value}: cannot read broker offsets: {read.request_error}"
            )
        return dict(read.offsets)

    # ------------------------------------------------------------------------------------------ steps

    def _begin(self, group: str, step: Step) -> tuple[MigrationState, int, bool]:
        marker, version = self.marker(group)
        state = MigrationState.NONE if marker is None else marker.state
        self._recorded_phase[group] = None if marker is None else marker.phase
        try:
            changes = check_step(group, step, state)
        except ZkcoordError as exc:
            self.journal.append(group, self._entry(step, "refused", state, state, {"reason": str(exc)}))
            raise
        self.journal.append(group, self._entry(step, "begin", state, TARGET[step], {}))
        return state, version, changes

    def _entry(
        self, step: Step, event: str, before: MigrationState, after: MigrationState, detail: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "ts_ms": self.clock_ms(),
            "step": step.value,
            "event": event,
            "from": before.value,
            "to": after.value,
            "detail": detail,
        }

    def _finish(
        self,
        group: str,
        step: Step,
        before: MigrationState,
        after: MigrationState,
        version: int,
        detail: dict[str, Any],
        phase: MembershipPhase | None = None,
    ) -> None:
        if (
            before is not after
            or version < 0
            or (phase is not None and phase != self._recorded_phase.get(group))
        ):
            self._set_state(group, step, before, after, version, phase)
        if phase is not None:
            detail = {**detail, "membership": phase.value}
        self.journal.append(group, self._entry(step, "done", before, after, detail))

    def _fail(
        self, group: str, step: Step, state: MigrationState, message: str, detail: dict[str, Any]
    ) -> StepFailed:
        self.journal.append(group, self._entry(step, "failed", state, state, {"reason": message, **detail}))
        return StepFailed(message)

    def gather(self, group: str) -> GroupFacts:
        zk, zk_errors = self.zookeeper_offsets(group)
        broker: dict[TopicPartition, int] = {}
        broker_error: str | None = None
        members: tuple[str, ...] = ()
        clients: tuple[str, ...] = ()
        broker_state = ""
        if self.broker_for is None:
            broker_error = "no --bootstrap given"
        else:
            store = self.broker_for(group)
            read = store.read_offsets(None)
            if read.request_error is not None:
                broker_error = str(read.request_error)
            else:
                broker = dict(read.offsets)
                try:
                    described = store.describe()
                    members = tuple(m["member_id"] for m in described["members"])
                    clients = tuple(str(m.get("client_id") or "") for m in described["members"])
                    broker_state = described["state"]
                except Exception as exc:  # DescribeGroups is informative only
                    log.info("group=%s describe failed: %s", group, exc)
        owners = tuple(list_owners(self.zk, group).items())
        bridges = tuple(str(b.get("name")) for b in list_offset_bridges(self.zk))
        return GroupFacts(
            group=group,
            legacy_members=tuple(list_member_ids(self.zk, group)),
            owners=owners,
            zookeeper=zk,
            zookeeper_errors=tuple(zk_errors),
            broker=broker,
            broker_error=broker_error,
            broker_members=members,
            broker_clients=clients,
            broker_state=broker_state,
            offset_bridges=bridges,
        )

    def plan(self, group: str) -> tuple[StepOutcome, PlanReport]:
        before, version, _ = self._begin(group, Step.PLAN)
        facts = self.gather(group)
        if self.broker_for is not None and facts.broker_error is not None:
            # A plan is what dual-commit will do, and that is unknown while the broker does not answer for the
            # group: nothing is marked, the operator is told what to check.
            raise self._fail(
                group,
                Step.PLAN,
                before,
                f"group {group!r}: plan: the broker did not answer for the group's offsets ({facts.broker_error}); "
                f"nothing was marked. Check that a coordinator serves the group (`zkcoord cluster describe --zk "
                f"{self.how.zk}` lists the nodes and the leaders of __consumer_offsets), then run again: "
                f"$ {self.how.migrate('plan', group)}",
                {"broker_error": facts.broker_error},
            )
        if self.zk.exists(paths.group_path(group)) is None and not facts.broker and not facts.broker_members:
            # Nothing of the group anywhere: most likely a mistyped id or chroot. Marking it would create
            # /consumers/G, a group `legacy list` then shows for good.
            where = (
                "the broker has no offsets or members for it"
                if facts.broker_error is None
                else ("no --bootstrap to ask the broker")
            )
            raise self._fail(
                group,
                Step.PLAN,
                before,
                f"group {group!r}: plan: no /consumers/{group} in ZooKeeper and {where}: is the group id (or the "
                f"chroot) right? `zkcoord legacy list --zk {self.how.zk}` lists the ZooKeeper groups; nothing was "
                "marked",
                {},
            )
        seen = self.membership(group, self._described_ids(facts))
        phase = self._phase_to_record(group, MigrationState.PLANNED, seen)
        facts = dataclasses.replace(
            facts, bridged_members=sum(1 for m in seen.members if not is_legacy(m) and not m.gone)
        )
        report = assess(facts)
        lines = [f"group {group}: state {before.value}"]
        lines.append(
            f"  legacy members (/consumers/{group}/ids): {', '.join(facts.legacy_members) or 'none'}"
        )
        lines.append(
            "  broker members (DescribeGroups): "
            + (
                f"unknown ({facts.broker_error})"
                if facts.broker_error
                else (
                    ", ".join(
                        f"{c} ({m})" if c else m
                        for m, c in zip(
                            facts.broker_members,
                            facts.broker_clients or ("",) * len(facts.broker_members),
                            strict=True,
                        )
                    )
                    or "none"
                )
                + (f" [{facts.broker_state}]" if facts.broker_state else "")
            )
        )
        lines.append(f"  offsets: {len(facts.zookeeper)} in ZooKeeper, {len(facts.broker)} on the broker")
        lines.append(
            "  coordinator offset bridge (serve --bridge-zk-offsets): "
            + (f"on ({', '.join(facts.offset_bridges)})" if facts.offset_bridges else "not registered")
        )
        if report.divergence:
            counts = summarize(report.divergence)
            if facts.offset_bridges:
                # The broker side answers max(coordinator, ZooKeeper): equal is not agreement.
                counts.pop(Agreement.AGREE.value, None)
                lines.append(
                    "  stores (broker read through the offset bridge, max of the coordinator's and ZooKeeper's): "
                    + (
                        ", ".join(f"{k} {v}" for k, v in counts.items() if v)
                        or "ZooKeeper not ahead anywhere"
                    )
                )
            else:
                lines.append("  stores: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
        lines.extend(f"  will: {c}" for c in report.changes)
        lines.extend(f"  risk: {r}" for r in report.risks)
        lines.extend(self._membership_lines(group, seen, self._recorded_phase.get(group)))
        foreign = foreign_brokers(self.zk)
        if foreign:
            # The data is on brokers zkcoord did not start: `serve --zk` refuses to join them; the proxy stands
            # in front of them instead (docs/proxy.md).
            lines.append(
                f"  data: on brokers zkcoord did not start ({foreign.describe()}): member by member (the "
                "recommended path) runs through `zkcoord proxy --bridge-zk-groups ... --bridge-zk-offsets` in front "
                "of them, and ends with `zkcoord migrate handoff` to their own coordinator (docs/proxy.md)"
            )
        else:
            lines.append(
                "  member by member (the recommended path) needs the coordinator running with --bridge-zk-groups "
                "matching this group and --bridge-zk-offsets"
            )
        lines.append(f"  {POINT_OF_NO_RETURN_PROXY if foreign else POINT_OF_NO_RETURN}")
        self._finish(
            group,
            Step.PLAN,
            before,
            MigrationState.PLANNED,
            version,
            {
                "zookeeper": len(facts.zookeeper),
                "broker": len(facts.broker),
                "to_seed": len(report.to_seed),
                "risks": list(report.risks),
            },
            phase,
        )
        lines.extend(self.next_steps(group, MigrationState.PLANNED, seen))
        view = self.view(group, MigrationState.PLANNED, seen)
        view["plan"] = {
            "offsets": {
                "zookeeper": len(facts.zookeeper),
                "broker": len(facts.broker),
                "to_seed": len(report.to_seed),
            },
            # through an offset bridge the broker side is max(coordinator, ZooKeeper): "bridged"
            "broker_offsets": "bridged" if facts.offset_bridges else "coordinator",
            "broker_members": list(facts.broker_members),
            "broker_state": facts.broker_state or None,
            "offset_bridges": list(facts.offset_bridges),
            "changes": list(report.changes),
            "risks": list(report.risks),
        }
        outcome = StepOutcome(
            group,
            Step.PLAN,
            before,
            MigrationState.PLANNED,
            before is not MigrationState.PLANNED,
            lines,
            view=view,
        )
        return outcome, report

    @staticmethod
    def _described_ids(facts: GroupFacts) -> set[str] | None:
        return None if facts.broker_error is not None or not facts.broker_state else set(facts.broker_members)

    def dual_commit(self, group: str) -> StepOutcome:
        """Seed the broker with ZooKeeper offsets it lacks (never lowering one) and enter dual-commit."""
        before, version, _ = self._begin(group, Step.DUAL_COMMIT)
        zk, _ = self.zookeeper_offsets(group)
        try:
            broker = self._broker_or_fail(group, Step.DUAL_COMMIT)
        except StepFailed as exc:
            raise self._fail(group, Step.DUAL_COMMIT, before, str(exc), {}) from None
        bridges = list_offset_bridges(self.zk)
        to_seed = seed_broker(zk, broker, bridged=bool(bridges))
        if to_seed:
            reply = self.broker_for(group).write_offsets(to_seed)  # type: ignore[misc]
            failed = [(tp, err) for tp, err in reply.errors if err is not None]
            confirmed = {tp for tp, _ in reply.errors}
            failed += [(tp, "no reply") for tp in to_seed if tp not in confirmed]
            if failed:
                first = "; ".join(f"{tp.topic}-{tp.partition}: {err}" for tp, err in failed[:5])
                raise self._fail(
                    group,
                    Step.DUAL_COMMIT,
                    before,
                    f"group {group!r}: dual-commit: the broker refused {len(failed)} of {len(to_seed)} seed "
                    f"offsets ({first}); state stays '{before.value}', re-run dual-commit",
                    {"failed": len(failed)},
                )
        seen = self.membership(group)
        phase = self._phase_to_record(group, MigrationState.DUAL_COMMIT, seen)
        self._finish(
            group,
            Step.DUAL_COMMIT,
            before,
            MigrationState.DUAL_COMMIT,
            version,
            {"seeded": len(to_seed)},
            phase,
        )
        lines = [
            f"group {group}: {before.value} -> dual-commit; copied {len(to_seed)} offset(s) to the broker",
            f"  the coordinator offset bridge is on, {len(bridges)} node(s): broker-protocol members keep ZooKeeper "
            "current too"
            if bridges
            else "  no coordinator offset bridge is registered: for broker-protocol members, run the coordinator "
            "with `zkcoord serve --bridge-zk-offsets` so ZooKeeper stays current for tools and rollback",
            *self.next_steps(group, MigrationState.DUAL_COMMIT, seen),
        ]
        return StepOutcome(
            group,
            Step.DUAL_COMMIT,
            before,
            MigrationState.DUAL_COMMIT,
            before is not MigrationState.DUAL_COMMIT,
            lines,
        )

    def _compare(
        self, group: str, step: Step, state: MigrationState, max_lag: int
    ) -> tuple[tuple[PartitionDivergence, ...], tuple[PartitionDivergence, ...]]:
        zk, zk_errors = self.zookeeper_offsets(group)
        try:
            broker = self._broker_or_fail(group, step)
        except StepFailed as exc:
            raise self._fail(group, step, state, str(exc), {}) from None
        if zk_errors:
            raise self._fail(
                group, step, state, f"group {group!r}: malformed ZooKeeper offsets: {zk_errors[0]}", {}
            )
        report = divergence_report(zk, broker)
        bad = disagreements(report, max_lag)
        if list_offset_bridges(self.zk) and not finalize_blockers(self.membership(group).members):
            # Through a coordinator offset bridge every commit is mirrored to ZooKeeper after it is acknowledged:
            # with no ZooKeeper member left (nobody reads ZooKeeper offsets but a rollback, which raises them to
            # the broker's first), "broker ahead" is a commit in flight to ZooKeeper, not a disagreement.
            bad = tuple(r for r in bad if r.agreement is not Agreement.BROKER_AHEAD)
        return report, bad

    def verify(self, group: str, max_lag: int = 0) -> StepOutcome:
        before, version, _ = self._begin(group, Step.VERIFY)
        report, bad = self._compare(group, Step.VERIFY, before, max_lag)
        counts = summarize(report)
        if bad:
            after = MigrationState.DUAL_COMMIT
            if before is not after:
                self._set_state(group, Step.VERIFY, before, after, version)
            lines = [
                f"group {group}: {len(bad)} of {len(report)} partition(s) disagree beyond --max-lag {max_lag}:"
            ]
            lines.extend(f"  {explain(row)}" for row in bad)
            if list_offset_bridges(self.zk) and any(r.agreement is Agreement.BROKER_AHEAD for r in bad):
                lines.append(
                    "  note: a coordinator offset bridge is on; 'broker ahead' there means commits it has not "
                    "mirrored yet (ZooKeeper unreachable from serve? see its 'zk offset bridge' log lines)"
                )
            lines.append(
                f"  state: {after.value} (fix the cause, let members commit, then verify again: "
                f"$ {self.how.migrate('verify', group)} --max-lag {max_lag})"
            )
            self.journal.append(
                group,
                self._entry(
                    Step.VERIFY,
                    "failed",
                    before,
                    after,
                    {
                        "reason": f"{len(bad)} partition(s) disagree beyond --max-lag {max_lag}; first: "
                        + explain(bad[0]),
                        "disagreements": len(bad),
                        **counts,
                    },
                ),
            )
            view = self.view(group, after, self.membership(group))
            view["verify"] = _verify_view(False, max_lag, report, bad)
            return StepOutcome(
                group,
                Step.VERIFY,
                before,
                after,
                before is not after,
                lines,
                ok=False,
                divergence=bad,
                view=view,
            )
        seen = self.membership(group)
        phase = self._phase_to_record(group, MigrationState.VERIFIED, seen)
        self._finish(
            group,
            Step.VERIFY,
            before,
            MigrationState.VERIFIED,
            version,
            {"max_lag": max_lag, **counts},
            phase,
        )
        lines = [
            f"group {group}: verified — {len(report)} partition(s), all within --max-lag {max_lag} "
            f"({counts['agree']} identical)",
        ]
        if list_offset_bridges(self.zk):
            lines.append(
                "  (through the offset bridge the broker side reads max(coordinator, ZooKeeper): this shows that no "
                "ZooKeeper offset is ahead of it)"
            )
        lines.extend(self.next_steps(group, MigrationState.VERIFIED, seen))
        view = self.view(group, MigrationState.VERIFIED, seen)
        view["verify"] = _verify_view(True, max_lag, report, ())
        return StepOutcome(
            group,
            Step.VERIFY,
            before,
            MigrationState.VERIFIED,
            before is not MigrationState.VERIFIED,
            lines,
            view=view,
        )

    def finalize(self, group: str, max_lag: int = 0) -> StepOutcome:
        before, version, _ = self._begin(group, Step.FINALIZE)
        if before is MigrationState.FINALIZED:
            return self._clean_up(group, before)
        seen = self.membership(group, self.coordinator_members(group))
        blockers = finalize_blockers(seen.members)
        recorded = self._recorded_phase.get(group)
        if blockers and (
            seen.phase is MembershipPhase.MIXED
            or recorded in (MembershipPhase.MIXED, MembershipPhase.BROKER_ONLY)
        ):
            raise self._fail(
                group,
                Step.FINALIZE,
                before,
                f"group {group!r}: finalize refused: {len(blockers)} ZooKeeper member(s) remain in a group "
                f"migrating member by member: {', '.join(blockers)}. Restart each as a broker-protocol member "
                f"(`zkcoord migrate status --group {group}` names the next), then finalize",
                {"zookeeper_members": blockers},
            )
        phase = self._phase_to_record(group, MigrationState.FINALIZED, seen)
        report, bad = self._compare(group, Step.FINALIZE, before, max_lag)
        if bad:
            raise self._fail(
                group,
                Step.FINALIZE,
                before,
                f"group {group!r}: finalize refused: {len(bad)} partition(s) disagree beyond --max-lag {max_lag} "
                f"since verify (first: {explain(bad[0])}); run verify again: $ {self.how.migrate('verify', group)}",
                {"disagreements": len(bad)},
            )
        snapshot = {f"{r.tp.topic}/{r.tp.partition}": [r.zookeeper, r.broker] for r in report}
        self._finish(
            group, Step.FINALIZE, before, MigrationState.FINALIZED, version, {"snapshot": snapshot}, phase
        )
        lines = [
            f"group {group}: finalized; {len(report)} partition(s) recorded in the journal",
            *self.next_steps(group, MigrationState.FINALIZED, seen),
        ]
        return StepOutcome(group, Step.FINALIZE, before, MigrationState.FINALIZED, True, lines)

    def _clean_up(self, group: str, state: MigrationState) -> StepOutcome:
        """`finalize` again on a finalized group: once no coordinator offset bridge is registered (the coordinators
        run without the bridge flags: past the point of no return) and no ZooKeeper member is left, the ids and
        owner znodes the bridge wrote for broker-protocol members and the group's fence are garbage: nothing
        maintains them and no ZooKeeper member waits on them. They are deleted (what `migrate repair --force`
        does); ZooKeeper offsets stay (a barrier rollback raises them to the broker's first)."""
        seen = self.membership(group, self.coordinator_members(group))
        bridges = list_offset_bridges(self.zk)
        legacy = finalize_blockers(seen.members)
        leftovers = [m for m in seen.members if not is_legacy(m)]
        lines = [f"group {group}: already finalized"]
        deleted: list[str] = []
        if leftovers and not bridges and not legacy:
            deleted = repair(self.zk, group)
            lines.append(
                f"  cleaned up the coordinator bridge's znodes of {len(leftovers)} broker-protocol member(s): "
                f"deleted {len(deleted)} znode(s) (ids, owners, the fence /zkcoord/mixed-groups/{group})"
            )
            lines.append(
                f"  ZooKeeper offsets under /consumers/{group}/offsets keep their last mirrored values (not updated "
                "any more; `migrate rollback` raises them to the broker's before anyone reads them)"
            )
            seen = self.membership(group, self.coordinator_members(group))
        elif leftovers and bridges:
            lines.append(
                f"  not cleaned up: {len(bridges)} coordinator offset bridge(s) still registered "
                f"({', '.join(str(b.get('name')) for b in bridges)})"
            )
        elif leftovers and legacy:
            lines.append(f"  not cleaned up: ZooKeeper member(s) registered: {', '.join(legacy)}")
        self.journal.append(
            group, self._entry(Step.FINALIZE, "done", state, state, {"rerun": True, "cleaned_up": deleted})
        )
        lines.extend(self.next_steps(group, state, seen))
        return StepOutcome(group, Step.FINALIZE, state, state, bool(deleted), lines)

    def rollback(self, group: str) -> StepOutcome:
        """ZooKeeper := max(zk, broker) partition by partition, never lowering a ZooKeeper offset."""
        before, version, _ = self._begin(group, Step.ROLLBACK)
        zk, _ = self.zookeeper_offsets(group)
        try:
            broker = self._broker_or_fail(group, Step.ROLLBACK)
        except StepFailed as exc:
            raise self._fail(
                group,
                Step.ROLLBACK,
                before,
                f"{exc} (rollback needs the broker's offsets to avoid a regression)",
                {},
            ) from None
        to_write = rollback_zookeeper(zk, broker)
        report = ZooKeeperOffsetStore(self.zk, group).write(
            {(tp.topic, tp.partition): off for tp, off in to_write.items()}, WriteMode.NEVER_REGRESS
        )
        if report.errors:
            (topic, partition), first = sorted(report.errors.items())[0]
            raise self._fail(
                group,
                Step.ROLLBACK,
                before,
                f"group {group!r}: rollback could not write {len(report.errors)} ZooKeeper offset(s) "
                f"(first {topic}-{partition}: {first}); state stays '{before.value}', re-run rollback",
                {"failed": len(report.errors)},
            )
        seen = self.membership(group, self.coordinator_members(group))
        walk = next_move(
            seen.members, seen.problems, back=True, group=group, topics=seen.topics, how=self.how
        )
        self._finish(
            group,
            Step.ROLLBACK,
            before,
            MigrationState.ROLLED_BACK,
            version,
            {
                "written": len(report.written),
                "kept_higher": len(report.kept_higher),
                "next_member": walk.member,
                "members_done": walk.done,
            },
            self._phase_to_record(group, MigrationState.ROLLED_BACK, seen),
        )
        lines = [
            f"group {group}: {before.value} -> rolled-back; raised {len(report.written)} ZooKeeper offset(s) to the "
            f"broker's, {len(report.kept_higher)} were already higher (none lowered)",
            "  ZooKeeper members that committed to the broker: restart them with offsets.storage=zookeeper "
            "(`zkcoord legacy consume ... --property offsets.storage=zookeeper`)",
            *self.next_steps(group, MigrationState.ROLLED_BACK, seen),
        ]
        return StepOutcome(
            group,
            Step.ROLLBACK,
            before,
            MigrationState.ROLLED_BACK,
            before is not MigrationState.ROLLED_BACK,
            lines,
        )

    def status(self, group: str, tail: int = 5) -> list[str]:
        return self.status_view(group, tail)[0]

    def status_view(self, group: str, tail: int = 5) -> tuple[list[str], dict[str, Any]]:
        """The status lines and the --json document (read-only: nothing is written)."""
        marker, version = self.marker(group)
        if marker is None:
            lines = [f"group {group}: no migration marker (state none)"]
        else:
            lines = [
                f"group {group}: state {marker.state.value} (step {marker.step.value} at "
                f"{_utc(marker.updated_ms)}, marker znode version {version})"
            ]
        handoff, _ = read_handoff(self.zk, group)
        if handoff is not None:
            lines.append(
                f"  hand-off: {handoff.phase.value} since {_utc(handoff.updated_ms)} ({handoff_path(group)}; "
                f"{handoff.members} member(s) when it began)"
                + ("; the cluster's coordinator has the group" if handoff.phase is Phase.FORWARDING else "")
            )
        seen = self.membership(group, self.coordinator_members(group))
        recorded = None if marker is None else marker.phase
        lines.extend(self._membership_lines(group, seen, recorded))
        state = MigrationState.NONE if marker is None else marker.state
        lines.extend(self.next_steps(group, state, seen))
        entries = self.journal.entries(group)[-tail:]
        if entries:
            lines.append(f"  journal ({self.journal.path(group)}, last {len(entries)}):")
        journal = []
        for entry in entries:
            reason = (entry.get("detail") or {}).get("reason")
            lines.append(
                f"    {_utc(entry.get('ts_ms'))} {entry.get('step')} {entry.get('event')} "
                f"{entry.get('from')} -> {entry.get('to')}" + (f": {reason}" if reason else "")
            )
            journal.append(
                {
                    "time": _utc(entry.get("ts_ms")),
                    "step": entry.get("step"),
                    "event": entry.get("event"),
                    "from": entry.get("from"),
                    "to": entry.get("to"),
                    "reason": reason,
                }
            )
        view = self.view(group, state, seen)
        view["status"] = {
            "marker": None
            if marker is None
            else {"step": marker.step.value, "updated": _utc(marker.updated_ms), "version": version},
            "journal": journal,
        }
        if handoff is not None:
            view["status"]["handoff"] = {"phase": handoff.phase.value, "updated": _utc(handoff.updated_ms)}
        return lines, view


def _verify_view(
    ok: bool, max_lag: int, report: Sequence[PartitionDivergence], bad: Sequence[PartitionDivergence]
) -> dict[str, Any]:
    return {
        "ok": ok,
        "max_lag": max_lag,
        "partitions": len(report),
        "counts": summarize(report),
        "disagreements": [
            {
                "topic": r.tp.topic,
                "partition": r.tp.partition,
                "zookeeper": r.zookeeper,
                "broker": r.broker,
                "agreement": r.agreement.value,
                "lag": r.lag,
                "cause": explain(r),
            }
            for r in bad
        ],
    }


def _utc(ms: object) -> str:
    """Epoch milliseconds as an ISO UTC time a person reads (the raw value when it is not a number)."""
    if not isinstance(ms, int):
        return str(ms)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
