"""The what-if simulation: the loop's arithmetic on a stand-in assignor (hand-computed), determinism, and
sanity on the real assignors (sticky moves fewer partitions than range on a leave)."""

from __future__ import annotations

import csv
import io
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migration.compare import simulate as sim
from migration.compare.scenario import builtin_scenario, parse_scenario


def deal_fn(members, partitions, owned):
    """Stand-in eager assignor: sorted partitions dealt over sorted members."""
    tps = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
    ms = sorted(members)
    out = {m: [] for m in ms}
    for i, tp in enumerate(tps):
        out[ms[i % len(ms)]].append(tp)
    return out


def cooperative_fn(members, partitions, owned):
    """Stand-in cooperative assignor: computes the deal target, but in the first round holds back partitions
    that would move from one live member to another (they are assigned in the next round)."""
    target = deal_fn(members, partitions, owned)
    owner = {tp: m for m in owned for tp in owned[m]}
    out = {m: [] for m in target}
    for m, tps in target.items():
        for tp in tps:
            if owner.get(tp) in (None, m) or owner[tp] not in members:
                out[m].append(tp)
    return out


DEAL = sim.Assignor("test", "deal", False, deal_fn)
COOP = sim.Assignor("test", "coop", True, cooperative_fn)


def test_leave_and_join_arithmetic_on_stand_in():
    parts = {"t": 4}
    start = sim.rebalance(DEAL, ["m0", "m1"], parts, {})
    assert start.assignment == {"m0": [("t", 0), ("t", 2)], "m1": [("t", 1), ("t", 3)]}
    # m1 leaves: its two partitions move to m0; nobody else loses any; eager stops all four.
    left = sim.rebalance(DEAL, ["m0"], parts, start.assignment)
    assert (left.moved, left.moved_between_survivors, left.stopped, left.imbalance, left.rounds) == (
        2,
        0,
        4,
        0,
        1,
    )
    # m2 joins: deal gives m0 {0, 2}, m2 {1, 3}: two partitions taken from the survivor m0.
    joined = sim.rebalance(DEAL, ["m0", "m2"], parts, left.assignment)
    assert (joined.moved, joined.moved_between_survivors, joined.stopped) == (2, 2, 4)


def test_cooperative_needs_two_rounds_and_stops_only_moved():
    parts = {"t": 4}
    start = sim.rebalance(COOP, ["m0"], parts, {})
    joined = sim.rebalance(COOP, ["m0", "m1"], parts, start.assignment)
    assert joined.assignment == {"m0": [("t", 0), ("t", 2)], "m1": [("t", 1), ("t", 3)]}
    assert (joined.rounds, joined.moved, joined.stopped) == (2, 2, 2)


def test_assignor_that_gives_a_partition_twice_is_caught():
    bad = sim.Assignor("test", "bad", False, lambda ms, parts, owned: {m: [("t", 0)] for m in ms})
    with pytest.raises(sim.SimulationError, match=r"gave \('t', 0\) to both m0 and m1"):
        sim.rebalance(bad, ["m0", "m1"], {"t": 1}, {})


def test_assignor_that_never_converges_is_caught():
    lazy = sim.Assignor("test", "lazy", True, lambda ms, parts, owned: {m: [] for m in ms})
    with pytest.raises(sim.SimulationError, match="did not assign every partition"):
        sim.rebalance(lazy, ["m0"], {"t": 1}, {})


def test_sweep_is_deterministic_per_seed_and_compares_on_identical_churn():
    cases = sim.sweep_cases([3, 6], [1, 3], topics=2, partitions_per_topic=5, rebalances=15)
    a = sim.sweep([DEAL, COOP], cases, random.Random(42))
    b = sim.sweep([DEAL, COOP], cases, random.Random(42))
    c = sim.sweep([DEAL, COOP], cases, random.Random(43))
    assert a == b
    assert a != c
    assert len(a) == 8
    # Both stand-ins reach the same target on the same churn: same moves, but the cooperative one stops less.
    for eager, coop in zip(a[::2], a[1::2], strict=True):
        assert eager.moved_mean == coop.moved_mean
        assert coop.stopped_mean <= eager.stopped_mean == 10.0


def test_churn_plan_keeps_at_least_one_member():
    plan = sim.churn_plan(sim.SweepCase(1, 5, 1, 1, 20), random.Random(0))
    size = 1
    for step in plan:
        for what, _ in step:
            size += 1 if what == "join" else -1
            assert size >= 1


def real(family, strategy):
    return sim.make_assignor(family, strategy)


def test_sticky_moves_fewer_partitions_than_range_on_a_leave():
    parts = {"t0": 6, "t1": 6}
    members = [sim.member_name(i) for i in range(4)]
    moved = {}
    for family, strategy in (
        ("classic", "range"),
        ("classic", "sticky"),
        ("legacy", "range"),
        ("classic", "cooperative-sticky"),
    ):
        a = real(family, strategy)
        start = sim.rebalance(a, members, parts, {})
        after = sim.rebalance(a, [m for m in members if m != "m0001"], parts, start.assignment)
        moved[(family, strategy)] = (after.moved, after.moved_between_survivors, after.stopped)
    # m0001 owned 3 of 12 partitions: sticky moves exactly those; range reshuffles survivors too.
    assert moved[("classic", "sticky")] == (3, 0, 12)
    assert moved[("classic", "cooperative-sticky")] == (3, 0, 3)
    assert moved[("classic", "range")][0] > 3
    assert moved[("classic", "range")][1] > 0
    # One stream per member: the 0.8 range assignor and Kafka's RangeAssignor decide alike.
    assert moved[("legacy", "range")] == moved[("classic", "range")]


def test_real_assignors_sweep_sanity():
    assignors, missing = sim.available_assignors()
    assert missing == []
    assert [a.label for a in assignors] == [
        "legacy/range", "legacy/roundrobin", "classic/range", "classic/roundrobin", "classic/sticky", "classic/cooperative-sticky",
    ]  # fmt: skip
    rows = sim.sweep(assignors, sim.sweep_cases([5], [1], 3, 8, 30), random.Random(7))
    by = {r.assignor: r for r in rows}
    assert by["classic/sticky"].moved_mean < by["classic/range"].moved_mean
    assert by["classic/sticky"].moved_mean < by["classic/roundrobin"].moved_mean
    assert by["classic/roundrobin"].imbalance_max <= 1
    assert by["legacy/roundrobin"].imbalance_max <= 1
    assert by["classic/cooperative-sticky"].stopped_mean < by["classic/sticky"].stopped_mean == 24.0
    assert by["classic/cooperative-sticky"].rounds_mean > 1.0


@settings(max_examples=25, deadline=None)
@given(
    size=st.integers(1, 6),
    churn=st.integers(1, 3),
    partitions=st.integers(1, 7),
    seed=st.integers(0, 2**32),
    strategy=st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]),
)
def test_every_rebalance_assigns_each_partition_once(size, churn, partitions, seed, strategy):
    a = real("classic", strategy)
    case = sim.SweepCase(size, churn, 2, partitions, 6)
    plan = sim.churn_plan(case, random.Random(seed))
    row = sim.run_case(a, case, plan)
    assert 0 <= row.moved_between_survivors_mean <= row.moved_mean <= 2 * partitions
    assert row.stopped_mean <= 2 * partitions


def test_scenario_churn_through_assignors_is_deterministic():
    sc = builtin_scenario("demo")
    a = sim.scenario_steps(sc, sim.make_assignor, random.Random(1))
    assert a == sim.scenario_steps(sc, sim.make_assignor, random.Random(1))
    per_protocol = {p.protocol: [s.event for s in a if s.protocol == p.protocol] for p in sc.protocols}
    # The 1.5 s pause is shorter than the 4 s session timeout: no rebalance for it.
    for events in per_protocol.values():
        assert events == ["join", "leave", "crash", "partition-increase"]


def test_cooperative_sticky_stops_less_than_eager_range_on_the_mixed_scenario():
    sc = builtin_scenario("mixed")
    a = sim.scenario_steps(sc, sim.make_assignor, random.Random(1))
    events = [s.event for s in a if s.protocol == "classic-confluent"]
    assert events == [
        "join", "leave", "session-expiry (drop)", "session-expiry (rejoin)", "crash", "partition-increase",
    ]  # fmt: skip
    coop = [s for s in a if s.protocol == "classic-confluent"]
    eager = [s for s in a if s.protocol == "classic-kafka-python"]
    assert sum(s.stopped for s in coop) < sum(s.stopped for s in eager)


def test_long_pause_and_session_expiry_drop_and_rejoin():
    sc = parse_scenario(
        """
name: p
duration_s: 10
session_timeout_ms: 1000
topics: [{name: t, partitions: 4}]
producer: {rate_per_s: 1, duration_s: 1}
protocols: {classic-kafka-python: {members: 2, strategy: range}}
churn:
  - {at_s: 1, event: pause, member: 0, duration_s: 2}
  - {at_s: 3, event: session-expiry, member: 1}
  - {at_s: 4, event: zk-leader-kill}
""",
        "p.yaml",
    )
    steps = sim.scenario_steps(sc, sim.make_assignor, random.Random(0))
    assert [(s.event, s.members) for s in steps] == [
        ("pause (drop)", 1), ("pause (rejoin)", 2), ("session-expiry (drop)", 1), ("session-expiry (rejoin)", 2),
    ]  # fmt: skip


def test_csv_output_has_header_and_rows():
    rows = sim.sweep([DEAL], sim.sweep_cases([2], [1], 1, 3, 2), random.Random(0))
    buf = io.StringIO()
    sim.write_csv(rows, buf)
    parsed = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert len(parsed) == 1
    assert parsed[0]["assignor"] == "test/deal" and parsed[0]["rebalances"] == "2"
