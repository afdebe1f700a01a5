"""Range and roundrobin: Kafka's javadoc examples, static-member ordering, exhaustive small cases."""

from __future__ import annotations

import itertools

import pytest

from zkcoord.assignors import STRATEGIES, assign

from .helpers import checked_assign


def test_range_javadoc_example():
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    assert checked_assign("range", subs, {"t0": 3, "t1": 3}) == {
        "C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
        "C1": [("t0", 2), ("t1", 2)],
    }


def test_roundrobin_javadoc_examples():
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    assert checked_assign("roundrobin", subs, {"t0": 3, "t1": 3}) == {
        "C0": [("t0", 0), ("t0", 2), ("t1", 1)],
        "C1": [("t0", 1), ("t1", 0), ("t1", 2)],
    }
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    assert checked_assign("roundrobin", subs, {"t0": 1, "t1": 2, "t2": 3}) == {
        "C0": [("t0", 0)],
        "C1": [("t1", 0)],
        "C2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)],
    }


def test_range_static_members_order_first_by_instance_id():
    subs = {"a-dyn": ["t"], "b-static": ["t"], "c-static": ["t"]}
    # c-static has the smaller instance id, so it is first; the dynamic member comes last despite its member id.
    inst = {"b-static": "zz", "c-static": "aa"}
    assert checked_assign("range", subs, {"t": 4}, instance_ids=inst) == {
        "a-dyn": [("t", 3)],
        "b-static": [("t", 2)],
        "c-static": [("t", 0), ("t", 1)],
    }


def test_roundrobin_static_members_order_first():
    subs = {"m1": ["t"], "m2": ["t"]}
    assert checked_assign("roundrobin", subs, {"t": 3}, instance_ids={"m2": "i"}) == {
        "m1": [("t", 1)],
        "m2": [("t", 0), ("t", 2)],
    }


def test_range_uneven_subscriptions_per_topic():
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t1"]}
    assert checked_assign("range", subs, {"t0": 3, "t1": 2}) == {
        "C0": [("t0", 0), ("t0", 1)],
        "C1": [("t0", 2), ("t1", 0)],
        "C2": [("t1", 1)],
    }


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_missing_topics_and_more_members_than_partitions(strategy):
    subs = {"a": ["t", "gone"], "b": ["t"], "c": ["t"], "d": []}
    result = checked_assign(strategy, subs, {"t": 2})
    assert sorted(tp for tps in result.values() for tp in tps) == [("t", 0), ("t", 1)]
    assert result["d"] == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_members(strategy):
    assert checked_assign(strategy, {}, {"t": 3}) == {}


@pytest.mark.parametrize("bad", [{"t": -1}, {"t": "3"}, {"t": True}])
def test_bad_partition_counts_are_named(bad):
    with pytest.raises(ValueError, match="partitions_per_topic\\['t'\\]"):
        assign("range", {"a": ["t"]}, bad)
    checked_assign("range", {"a": ["t"]}, {"t": 1})


def test_subscription_given_as_string_is_rejected():
    with pytest.raises(ValueError, match="subscriptions\\['a'\\]"):
        assign("roundrobin", {"a": "topic"}, {"topic": 1})
    checked_assign("roundrobin", {"a": ["topic"]}, {"topic": 1})


def test_unknown_strategy_lists_valid_ones():
    with pytest.raises(ValueError, match=r"'uniform'.*range, roundrobin, sticky, cooperative-sticky"):
        assign("uniform", {"a": ["t"]}, {"t": 1})
    checked_assign("range", {"a": ["t"]}, {"t": 1})


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_exhaustive_three_members_two_topics(strategy):
    """Every subscription pattern of three members over two topics, with 0, 1, 2 or 5 partitions each."""
    options = [(), ("t0",), ("t1",), ("t0", "t1")]
    for n0, n1 in itertools.product((0, 1, 2, 5), repeat=2):
        for pattern in itertools.product(options, repeat=3):
            subs = {f"m{i}": list(p) for i, p in enumerate(pattern)}
            checked_assign(strategy, subs, {"t0": n0, "t1": n1})
