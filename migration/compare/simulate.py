"""What-if rebalances through the pure assignors only (no I/O, no clock): how many partitions move and how
balanced the group stays, for legacy and broker strategies under the same membership churn.

Determinism: every random choice comes from the `random.Random` passed in, members are named `m0000`, `m0001`,
... in join order, and no result depends on dict or set iteration order. The same seed gives the same rows.
"""

from __future__ import annotations

import csv
import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TextIO

from migration.compare.scenario import STRATEGIES, ChurnKind, Family, Scenario
from zkcoord.topic_partition import TopicPartition

Assignment = dict[str, list[TopicPartition]]

# (members in join order, topic -> partition count, owned: member -> partitions it owns now) -> new assignment.
AssignFn = Callable[[Sequence[str], Mapping[str, int], Mapping[str, Sequence[TopicPartition]]], Assignment]

MAX_ROUNDS = 4  # a cooperative rebalance needs two rounds; more means the assignor does not converge


class SimulationError(RuntimeError):
    """An assignor broke an invariant the simulation relies on (a partition twice, or never converging)."""


@dataclass(frozen=True, slots=True)
class Assignor:
    """One strategy of one protocol family, as a pure function. `cooperative`: members keep the partitions they
    keep (only revoked ones stop); otherwise every member gives up everything at the start of a rebalance."""

    family: str
    strategy: str
    cooperative: bool
    fn: AssignFn

    @property
    def label(self) -> str:
        return f"{self.family}/{self.strategy}"


def legacy_assignor(strategy: str, roundrobin_generation: str = "0.10.2") -> Assignor:
    """The 0.8-era assignor (`zkcoord.legacy.assign`), one stream per member per topic."""
    from zkcoord.legacy.assignment import assign as legacy_assign
    from zkcoord.legacy.ids import consumer_of_thread

    def fn(
        members: Sequence[str], partitions: Mapping[str, int], owned: Mapping[str, Sequence[TopicPartition]]
    ) -> Assignment:
        consumers = {m: {t: 1 for t in sorted(partitions)} for m in members}
        decision = legacy_assign(
            strategy,
            consumers,
            {t: list(range(n)) for t, n in sorted(partitions.items())},
            roundrobin_generation=roundrobin_generation,
        )
        out: Assignment = {m: [] for m in members}
        for tp in sorted(decision):
            out[consumer_of_thread(decision[tp])].append(tp)
        return out

    return Assignor(Family.LEGACY.value, strategy, False, fn)


def broker_assignor(strategy: str) -> Assignor:
    """A broker-protocol assignor (`zkcoord.assignors.assign`); every member subscribes to every topic."""
    from zkcoord.assignors import assign as broker_assign

    def fn(
        members: Sequence[str], partitions: Mapping[str, int], owned: Mapping[str, Sequence[TopicPartition]]
    ) -> Assignment:
        topics = sorted(partitions)
        result = broker_assign(
            strategy,
            {m: topics for m in members},
            dict(partitions),
            owned={m: list(owned.get(m, ())) for m in members},
            generations={m: 1 for m in members if owned.get(m)},
        )
        return {m: sorted(TopicPartition(*tp) for tp in result.get(m, [])) for m in members}

    return Assignor(Family.CLASSIC.value, strategy, strategy == "cooperative-sticky", fn)


def available_assignors(
    families: Iterable[str] = ("legacy", "classic"), strategies: Iterable[str] | None = None
) -> tuple[list[Assignor], list[str]]:
    """The real assignors that import and answer a one-member probe, and a note for each that does not
    (another helper may still be writing it)."""
    wanted = None if strategies is None else set(strategies)
    candidates: list[tuple[str, str]] = []
    for family in families:
        for s in STRATEGIES[Family(family)]:
            if wanted is None or s in wanted:
                candidates.append((family, s))
    ok: list[Assignor] = []
    missing: list[str] = []
    for family, s in candidates:
        try:
            a = make_assignor(family, s)
            a.fn(["m0000"], {"t": 1}, {})
            ok.append(a)
        except (ImportError, NotImplementedError, AttributeError) as exc:
            missing.append(f"{family}/{s}: not available ({type(exc).__name__}: {exc})")
    return ok, missing


def consumer_assignor(strategy: str) -> Assignor:
    """A consumer-protocol server assignor (`zkcoord.group.consumer_assignors`, KIP-848): members keep what they
    keep (the coordinator revokes only what moves), so it is cooperative; every member subscribes to every topic."""
    from zkcoord.group.consumer_assignors import assign as consumer_assign

    def fn(
        members: Sequence[str], partitions: Mapping[str, int], owned: Mapping[str, Sequence[TopicPartition]]
    ) -> Assignment:
        current: dict[str, dict[str, frozenset[int]]] = {}
        for m in members:
            for t, p in owned.get(m, ()):
                current.setdefault(m, {}).setdefault(t, frozenset())
                current[m][t] |= {p}
        result = consumer_assign(
            strategy, {m: frozenset(partitions) for m in members}, dict(partitions), current
        )
        return {
            m: sorted(TopicPartition(t, p) for t, ps in result.get(m, {}).items() for p in ps)
            for m in members
        }

    return Assignor(Family.CONSUMER.value, strategy, True, fn)


def make_assignor(family: str, strategy: str) -> Assignor:
    """The real assignor of a protocol family ("legacy", "classic" or "consumer") and strategy."""
    if family == Family.LEGACY.value:
        return legacy_assignor(strategy)
    if family == Family.CONSUMER.value:
        return consumer_assignor(strategy)
    return broker_assignor(strategy)


# --------------------------------------------------------------------------------------------------------------
# One rebalance


@dataclass(frozen=True, slots=True)
class RebalanceResult:
    """What one rebalance did. `moved`: partitions whose owner changed (including those of departed members);
    `moved_between_survivors`: of those, the ones taken from a member that is still in the group (the avoidable
    part); `stopped`: partitions that stopped being consumed during the rebalance (eager: everything that was
    owned; cooperative: only revoked ones); `imbalance`: max - min partition count over members after it."""

    assignment: Assignment
    rounds: int
    moved: int
    moved_between_survivors: int
    stopped: int
    imbalance: int
    total_partitions: int


def rebalance(
    assignor: Assignor,
    members: Sequence[str],
    partitions: Mapping[str, int],
    owned: Mapping[str, Sequence[TopicPartition]],
) -> RebalanceResult:
    """Run the assignor until every partition has an owner (one round for eager protocols, usually two for
    cooperative ones), checking that no partition is given twice."""
    all_tps = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
    current = {m: list(owned.get(m, ())) for m in members}
    prev_owner = {tp: m for m in sorted(owned) for tp in owned[m]}
    live = set(members)
    existing = set(all_tps)
    rounds = 0
    # Partitions of members that left stop in every protocol; eager protocols stop everything that was owned.
    stopped = {
        tp for tp, m in prev_owner.items() if tp in existing and (m not in live or not assignor.cooperative)
    }
    while True:
        rounds += 1
        if rounds > MAX_ROUNDS:
            raise SimulationError(
                f"{assignor.label} did not assign every partition within {MAX_ROUNDS} rounds"
            )
        result = assignor.fn(members, partitions, current)
        owner: dict[TopicPartition, str] = {}
        for m in members:
            for tp in result.get(m, ()):
                if tp in owner:
                    raise SimulationError(f"{assignor.label} gave {tp} to both {owner[tp]} and {m}")
                owner[tp] = m
        if assignor.cooperative:
            # A partition stops only when it leaves its owner in this round.
            for m, tps in current.items():
                stopped.update(tp for tp in tps if owner.get(tp) != m)
        current = {m: sorted(result.get(m, ())) for m in members}
        if len(owner) == len(all_tps) or not assignor.cooperative:
            break
    final_owner = {tp: m for m in members for tp in current[m]}
    moved = [tp for tp in sorted(prev_owner) if tp in final_owner and final_owner[tp] != prev_owner[tp]]
    between = [tp for tp in moved if prev_owner[tp] in live]
    counts = [len(current[m]) for m in members]
    return RebalanceResult(
        assignment=current,
        rounds=rounds,
        moved=len(moved),
        moved_between_survivors=len(between),
        stopped=len(stopped),
        imbalance=(max(counts) - min(counts)) if counts else 0,
        total_partitions=len(all_tps),
    )


def member_name(n: int) -> str:
    return f"m{n:04d}"


# --------------------------------------------------------------------------------------------------------------
# Sweeps: random churn at a given rate


@dataclass(frozen=True, slots=True)
class SweepCase:
    group_size: int
    churn: int  # membership changes coalesced into each rebalance
    topics: int
    partitions_per_topic: int
    rebalances: int


@dataclass(frozen=True, slots=True)
class SweepRow:
    """Mean figures per rebalance for one assignor in one case (over all its trials)."""

    assignor: str
    group_size: int
    churn: int
    partitions: int
    rebalances: int
    moved_mean: float
    moved_between_survivors_mean: float
    stopped_mean: float
    moved_pct: float  # moved / partitions, in percent
    imbalance_max: int
    rounds_mean: float


def churn_plan(case: SweepCase, rng: random.Random) -> list[list[tuple[str, str]]]:
    """The membership changes of each rebalance: ("join"|"leave", member). The group size drifts around
    `case.group_size` (joins and leaves are equally likely; it never drops below one member)."""
    members = [member_name(i) for i in range(case.group_size)]
    next_id = case.group_size
    plan: list[list[tuple[str, str]]] = []
    for _ in range(case.rebalances):
        step: list[tuple[str, str]] = []
        for _ in range(case.churn):
            if len(members) > 1 and (rng.random() < 0.5 or len(members) >= 2 * case.group_size):
                gone = members.pop(rng.randrange(len(members)))
                step.append(("leave", gone))
            else:
                m = member_name(next_id)
                next_id += 1
                members.append(m)
                step.append(("join", m))
        plan.append(step)
    return plan


def run_case(assignor: Assignor, case: SweepCase, plan: Sequence[Sequence[tuple[str, str]]]) -> SweepRow:
    """Play one churn plan through one assignor; the first (initial) assignment is not counted."""
    partitions = {f"t{i}": case.partitions_per_topic for i in range(case.topics)}
    members = [member_name(i) for i in range(case.group_size)]
    state = rebalance(assignor, members, partitions, {}).assignment
    results: list[RebalanceResult] = []
    for step in plan:
        for what, m in step:
            if what == "join":
                members.append(m)
            else:
                members.remove(m)
        r = rebalance(assignor, list(members), partitions, state)
        results.append(r)
        state = r.assignment
    n = max(len(results), 1)
    total = case.topics * case.partitions_per_topic
    moved = sum(r.moved for r in results) / n
    return SweepRow(
        assignor=assignor.label,
        group_size=case.group_size,
        churn=case.churn,
        partitions=total,
        rebalances=len(results),
        moved_mean=round(moved, 3),
        moved_between_survivors_mean=round(sum(r.moved_between_survivors for r in results) / n, 3),
        stopped_mean=round(sum(r.stopped for r in results) / n, 3),
        moved_pct=round(100.0 * moved / total, 2) if total else 0.0,
        imbalance_max=max((r.imbalance for r in results), default=0),
        rounds_mean=round(sum(r.rounds for r in results) / n, 3),
    )


def sweep_cases(
    group_sizes: Sequence[int],
    churn_rates: Sequence[int],
    topics: int,
    partitions_per_topic: int,
    rebalances: int,
) -> list[SweepCase]:
    return [
        SweepCase(g, c, topics, partitions_per_topic, rebalances)
        for g, c in itertools.product(sorted(set(group_sizes)), sorted(set(churn_rates)))
    ]


def sweep(
    assignors: Sequence[Assignor],
    cases: Sequence[SweepCase],
    rng: random.Random,
    on_step: Callable[[], None] | None = None,
) -> list[SweepRow]:
    """Every case through every assignor. Each case draws ONE churn plan from `rng` and plays it through all
    assignors, so they are compared on identical churn."""
    rows: list[SweepRow] = []
    for case in cases:
        plan = churn_plan(case, rng)
        for a in assignors:
            rows.append(run_case(a, case, plan))
            if on_step is not None:
                on_step()
    return rows


# --------------------------------------------------------------------------------------------------------------
# A scenario's churn, played through the assignors


@dataclass(frozen=True, slots=True)
class ScenarioStep:
    """One rebalance the scenario's churn causes for one protocol run."""

    protocol: str
    assignor: str
    at_s: float
    event: str
    members: int
    partitions: int
    moved: int
    moved_between_survivors: int
    stopped: int
    imbalance: int
    rounds: int


def scenario_steps(
    scenario: Scenario, assignor_for: Callable[[str, str], Assignor], rng: random.Random
) -> list[ScenarioStep]:
    """Each protocol of `scenario` through `assignor_for(family, strategy)`. Events that change no membership
    and no partition count (a pause shorter than the session timeout, a ZooKeeper leader or coordinator kill)
    cause no rebalance here; a pause longer than the session timeout and a session expiry cause two (the member
    drops out, then comes back). `member: random` is drawn from `rng` once per event, shared by all protocols."""
    random_picks = [rng.random() for _ in scenario.churn]
    out: list[ScenarioStep] = []
    for run in scenario.protocols:
        out.extend(
            _play(
                scenario,
                run.protocol,
                run.members,
                assignor_for(run.family.value, run.strategy),
                random_picks,
            )
        )
    return out


def _play(
    scenario: Scenario, protocol: str, initial: int, assignor: Assignor, random_picks: Sequence[float]
) -> list[ScenarioStep]:
    partitions = scenario.partitions_per_topic()
    members = [member_name(i) for i in range(initial)]
    next_id = initial
    state = rebalance(assignor, members, partitions, {}).assignment
    out: list[ScenarioStep] = []
    for ev, pick in zip(scenario.churn, random_picks, strict=True):
        # Each entry of `changes` is one rebalance: (label, members after, partitions after).
        changes: list[tuple[str, list[str], dict[str, int]]] = []
        target = None
        if (
            ev.kind in (ChurnKind.LEAVE, ChurnKind.CRASH, ChurnKind.PAUSE, ChurnKind.SESSION_EXPIRY)
            and members
        ):
            index = ev.member if ev.member is not None else int(pick * len(members))
            target = members[min(index, len(members) - 1)]
        if ev.kind is ChurnKind.JOIN:
            joined = [member_name(next_id + i) for i in range(ev.count)]
            next_id += ev.count
            changes.append(("join", [*members, *joined], partitions))
        elif ev.kind in (ChurnKind.LEAVE, ChurnKind.CRASH) and target is not None:
            changes.append((ev.kind.value, [m for m in members if m != target], partitions))
        elif target is not None and (
            ev.kind is ChurnKind.SESSION_EXPIRY
            or (ev.kind is ChurnKind.PAUSE and ev.duration_s * 1000 > scenario.session_timeout_ms)
        ):
            rest = [m for m in members if m != target]
            changes.append((f"{ev.kind.value} (drop)", rest, partitions))
            changes.append((f"{ev.kind.value} (rejoin)", [*rest, target], partitions))
        elif ev.kind is ChurnKind.PARTITION_INCREASE and ev.topic is not None:
            changes.append(("partition-increase", members, {**partitions, ev.topic: ev.partitions}))
        for label, members_after, partitions_after in changes:
            members, partitions = members_after, partitions_after
            r = rebalance(assignor, members, partitions, state)
            state = r.assignment
            out.append(
                ScenarioStep(
                    protocol=protocol,
                    assignor=assignor.label,
                    at_s=ev.at_s,
                    event=label,
                    members=len(members),
                    partitions=r.total_partitions,
                    moved=r.moved,
                    moved_between_survivors=r.moved_between_survivors,
                    stopped=r.stopped,
                    imbalance=r.imbalance,
                    rounds=r.rounds,
                )
            )
    return out


# --------------------------------------------------------------------------------------------------------------
# Output (edge): CSV and a rich table


def rows_as_dicts(rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
    for r in rows:
        d = asdict(r)
        d.pop("assignment", None)
        yield d


def write_csv(rows: Sequence[Any], out: TextIO) -> None:
    if not rows:
        return
    names = [f.name for f in fields(rows[0])]
    w = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    w.writeheader()
    for d in rows_as_dicts(rows):
        w.writerow(d)


def write_csv_file(rows: Sequence[Any], path: str | Path) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        write_csv(rows, fh)


_HEADERS = {
    "group_size": "group",
    "moved_mean": "moved",
    "moved_between_survivors_mean": "moved from\nsurvivors",
    "moved_between_survivors": "moved from\nsurvivors",
    "stopped_mean": "stopped",
    "moved_pct": "moved %",
    "imbalance_max": "imbalance\n(max)",
    "rounds_mean": "rounds",
}


def rich_table(rows: Sequence[Any], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    if not rows:
        return table
    names = [f.name for f in fields(rows[0])]
    for n in names:
        label = _HEADERS.get(n, n.replace("_", " "))
        table.add_column(label, justify="left" if n in ("assignor", "protocol", "event") else "right")
    for d in rows_as_dicts(rows):
        table.add_row(*(str(d[n]) for n in names))
    return table
