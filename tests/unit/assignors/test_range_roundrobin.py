"""Range and roundrobin: Kafka's javadoc examples, static-member ordering, and the shared invariants."""

from __future__ import annotations

import pytest

from zkcoord.assignors import assign
from zkcoord.assignors.invariants import check_assignment


def run(strategy, subs, ppt, **kw):
    result = assign(strategy, subs, ppt, **kw)
    check_assignment(result, subs, ppt, balance="per-topic" if strategy == "range" else "total")
    return result


def test_range_javadoc_example():
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    assert run("range", subs, {"t0": 3, "t1": 3}) == {
        "C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
        "C1": [("t0", 2), ("t1", 2)],
    }


def test_roundrobin_javadoc_examples():
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    assert run("roundrobin", subs, {"t0": 3, "t1": 3}) == {
        "C0": [("t0", 0), ("t0", 2), ("t1", 1)],
        "C1": [("t0", 1), ("t1", 0), ("t1", 2)],
    }
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    assert run("roundrobin", subs, {"t0": 1, "t1": 2, "t2": 3}) == {
        "C0": [("t0", 0)],
        "C1": [("t1", 0)],
        "C2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)],
    }


def test_unknown_strategy_lists_valid_ones():
    with pytest.raises(ValueError, match="range, roundrobin, sticky, cooperative-sticky"):
        assign("uniform", {"a": ["t"]}, {"t": 1})
