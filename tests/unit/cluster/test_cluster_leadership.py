"""The leadership planner: balance, minimal movement, epoch bumps, stickiness of data partitions, determinism."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.placement.leadership import (
    NO_LEADER,
    Leadership,
    Placement,
    TopicSpec,
    plan_leadership,
    single_replica_assignment,
)

OFF = "__consumer_offsets"


def balanced(n: int) -> TopicSpec:
    return TopicSpec({p: [0] for p in range(n)}, Placement.BALANCED)


def sticky(replicas: dict[int, list[int]]) -> TopicSpec:
    return TopicSpec(replicas, Placement.STICKY)


def test_docstring_example() -> None:
    current = {(OFF, p): Leadership(1, 3) for p in range(4)}
    plan = plan_leadership([1, 2], {OFF: balanced(4)}, current)
    assert plan.as_dict() == {
        (OFF, 0): Leadership(1, 3),
        (OFF, 1): Leadership(1, 3),
        (OFF, 2): Leadership(2, 4),
        (OFF, 3): Leadership(2, 4),
    }
    assert plan.changed == ((OFF, 2), (OFF, 3))


def test_new_partitions_start_at_epoch_zero_round_robin() -> None:
    plan = plan_leadership([3, 1, 2], {OFF: balanced(6)}, {})
    assert [lead for _, lead in plan.leaders] == [Leadership(n, 0) for n in (1, 2, 3, 1, 2, 3)]
    assert len(plan.changed) == 6


def test_no_live_nodes_leaves_partitions_leaderless_with_bumped_epoch() -> None:
    current = {(OFF, 0): Leadership(1, 5), ("t", 0): Leadership(1, 2)}
    plan = plan_leadership([], {OFF: balanced(1), "t": sticky({0: [1]})}, current)
    assert plan.as_dict() == {(OFF, 0): Leadership(NO_LEADER, 6), ("t", 0): Leadership(NO_LEADER, 3)}
    # and stays so (no further bump) while nobody is alive
    again = plan_leadership([], {OFF: balanced(1), "t": sticky({0: [1]})}, plan.as_dict())
    assert again.changed == ()


def test_sticky_topic_keeps_live_leaders_when_a_node_arrives() -> None:
    current = {("t", p): Leadership(1, 0) for p in range(4)}
    plan = plan_leadership([1, 2], {"t": sticky({p: [1] for p in range(4)})}, current)
    assert plan.changed == ()


def test_sticky_topic_is_led_only_by_a_live_assigned_replica() -> None:
    spec = sticky({0: [2], 1: [9], 2: [9, 1], 3: [1]})
    plan = plan_leadership([1, 2], {"t": spec}, {})
    assert plan.as_dict() == {
        ("t", 0): Leadership(2, 0),
        ("t", 1): Leadership(NO_LEADER, 0),  # its only replica (9) is not live: offline, not moved
        ("t", 2): Leadership(1, 0),  # first live replica in assignment order
        ("t", 3): Leadership(1, 0),
    }


def test_rf1_partition_goes_offline_with_its_node_and_returns_with_it() -> None:
    """Kafka without unclean election: leader -1 (epoch bumped) while the only replica is down, then the
    replica leads again (epoch bumped) when it is back; never another node, which has none of its records.
    Partitions of deleted topics drop out of the plan."""
    spec = {"t": sticky({0: [1], 1: [2]})}
    current = {("t", 0): Leadership(1, 7), ("t", 1): Leadership(2, 0), ("gone", 0): Leadership(1, 0)}
    down = plan_leadership([2, 3], spec, current)
    assert down.as_dict() == {("t", 0): Leadership(NO_LEADER, 8), ("t", 1): Leadership(2, 0)}
    assert down.changed == (("t", 0),)
    assert plan_leadership([2, 3], spec, down.as_dict()).changed == ()  # stays offline, no further bumps
    back = plan_leadership([1, 2, 3], spec, down.as_dict())
    assert back.as_dict() == {("t", 0): Leadership(1, 9), ("t", 1): Leadership(2, 0)}
    assert back.changed == (("t", 0),)


def test_single_replica_assignment() -> None:
    assert single_replica_assignment(5, {7, 3}) == {0: [3], 1: [7], 2: [3], 3: [7], 4: [3]}
    assert single_replica_assignment(2, [1, 2, 3], start=2) == {0: [3], 1: [1]}
    with pytest.raises(ValueError, match="no live nodes"):
        single_replica_assignment(1, [])
    with pytest.raises(ValueError, match="at least one partition"):
        single_replica_assignment(0, [1])


def _kept(before: dict, after: dict) -> int:
    return sum(1 for tp, lead in after.items() if tp in before and before[tp].leader == lead.leader)


def _max_keepable(current_counts: list[int], partitions: int, nodes: int) -> int:
    base, extra = divmod(partitions, nodes)
    counts = sorted(current_counts, reverse=True) + [0] * (nodes - len(current_counts))
    return sum(min(c, base + (1 if i < extra else 0)) for i, c in enumerate(counts))


def test_balanced_exhaustive_small() -> None:
    """Every current placement of 4 partitions over nodes {0..3, dead 9} and every live set of 1-3 nodes:
    balanced, maximal stay-put, epochs bumped exactly for movers."""
    nodes = (0, 1, 2, 3, 9)
    for placement in itertools.product(nodes, repeat=4):
        current = {(OFF, p): Leadership(n, p) for p, n in enumerate(placement)}
        for size in (1, 2, 3):
            for live in itertools.combinations((0, 1, 2, 3), size):
                plan = plan_leadership(live, {OFF: balanced(4)}, current)
                after = plan.as_dict()
                counts = [sum(1 for lead in after.values() if lead.leader == n) for n in live]
                assert max(counts) - min(counts) <= 1
                held = [sum(1 for n in placement if n == node) for node in live]
                assert _kept(current, after) == _max_keepable(held, 4, len(live))
                for tp, lead in after.items():
                    moved = current[tp].leader != lead.leader
                    assert lead.leader_epoch == current[tp].leader_epoch + (1 if moved else 0)
                    assert (tp in plan.changed) == moved


topics_st = st.dictionaries(
    st.sampled_from(["a", "b", "c", OFF]),
    st.tuples(st.integers(1, 12), st.sampled_from(list(Placement))),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    live=st.sets(st.integers(0, 6), max_size=5),
    topics=topics_st,
    leaders=st.dictionaries(
        st.tuples(st.sampled_from(["a", "b", "c", OFF]), st.integers(0, 11)),
        st.tuples(st.integers(-1, 7), st.integers(0, 20)),
    ),
    pref=st.integers(0, 7),
)
def test_plan_properties(live, topics, leaders, pref) -> None:
    specs = {t: TopicSpec({p: [(pref + p) % 8] for p in range(n)}, pl) for t, (n, pl) in topics.items()}
    current = {tp: Leadership(*v) for tp, v in leaders.items()}
    plan = plan_leadership(live, specs, current)
    after = plan.as_dict()
    # exactly the partitions of the given topics, sorted
    assert [tp for tp, _ in plan.leaders] == sorted((t, p) for t, (n, _) in topics.items() for p in range(n))
    for tp, lead in after.items():
        if specs[tp[0]].placement is Placement.STICKY:
            # replication factor 1: kept where live, else its live assigned replica, else offline
            replica = specs[tp[0]].replicas[tp[1]][0]
            kept = tp in current and lead.leader == current[tp].leader and lead.leader in live
            assert kept or lead.leader == (replica if replica in live else NO_LEADER)
        else:
            assert (lead.leader in live) if live else lead.leader == NO_LEADER
        old = current.get(tp)
        if old is None:
            assert lead.leader_epoch == 0 and tp in plan.changed
        elif old.leader == lead.leader:
            assert lead == old and tp not in plan.changed
        else:
            assert lead.leader_epoch == old.leader_epoch + 1 and tp in plan.changed
        # a live leader of a sticky topic is never moved
        if specs[tp[0]].placement is Placement.STICKY and old is not None and old.leader in live:
            assert lead.leader == old.leader
    for t, (n, pl) in topics.items():
        if pl is Placement.BALANCED and live:
            counts = [sum(1 for p in range(n) if after[(t, p)].leader == node) for node in live]
            assert max(counts) - min(counts) <= 1
    # deterministic, and independent of input ordering
    again = plan_leadership(
        sorted(live, reverse=True), dict(reversed(specs.items())), dict(reversed(current.items()))
    )
    assert again == plan
    # a plan applied twice is a fixpoint
    assert plan_leadership(live, specs, after).changed == ()
