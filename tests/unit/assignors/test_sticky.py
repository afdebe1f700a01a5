"""Sticky and cooperative-sticky: KIP-54 examples, generation conflicts, KIP-429 withholding and revocation."""

from __future__ import annotations

import pytest

from zkcoord.assignors import assign, cooperative_revocations

from .helpers import checked_assign

STICKY = ("sticky", "cooperative-sticky")


def tps(*names: str) -> list[tuple[str, int]]:
    """tps("t0p1", "t2p0") -> [("t0", 1), ("t2", 0)]"""
    out = []
    for name in names:
        topic, p = name.split("p")
        out.append((topic, int(p)))
    return sorted(out)


def test_kip54_example_1_equal_subscriptions():
    ppt = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    subs = {c: sorted(ppt) for c in ("C0", "C1", "C2")}
    first = checked_assign("sticky", subs, ppt)
    # KIP-54: the first assignment is balanced; its identities equal round robin's here.
    assert first == {
        "C0": tps("t0p0", "t1p1", "t3p0"),
        "C1": tps("t0p1", "t2p0", "t3p1"),
        "C2": tps("t1p0", "t2p1"),
    }
    del subs["C1"]
    owned = {c: first[c] for c in subs}
    second = checked_assign("sticky", subs, ppt, owned=owned, generations={"C0": 1, "C2": 1})
    # Unlike round robin, C0 and C2 keep everything they had; only C1's three partitions move.
    assert second == {"C0": tps("t0p0", "t0p1", "t1p1", "t3p0"), "C2": tps("t1p0", "t2p0", "t2p1", "t3p1")}
    assert checked_assign("roundrobin", subs, ppt) == {
        "C0": tps("t0p0", "t1p0", "t2p0", "t3p0"),
        "C2": tps("t0p1", "t1p1", "t2p1", "t3p1"),
    }


def test_kip54_example_2_unequal_subscriptions():
    ppt = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    first = checked_assign("sticky", subs, ppt)
    assert first == {"C0": tps("t0p0"), "C1": tps("t1p0", "t1p1"), "C2": tps("t2p0", "t2p1", "t2p2")}
    assert checked_assign("roundrobin", subs, ppt)["C2"] == tps("t1p1", "t2p0", "t2p1", "t2p2")
    del subs["C0"]
    owned = {c: first[c] for c in subs}
    assert checked_assign("sticky", subs, ppt, owned=owned) == {
        "C1": tps("t0p0", "t1p0", "t1p1"),
        "C2": tps("t2p0", "t2p1", "t2p2"),
    }


@pytest.mark.parametrize("strategy", STICKY)
def test_same_generation_double_claim_is_invalidated(strategy):
    subs = {c: ["t0"] for c in ("C1", "C2", "C3")}
    owned = {"C1": tps("t0p0", "t0p1"), "C2": tps("t0p0", "t0p2"), "C3": []}
    gens = {"C1": 1, "C2": 1, "C3": 1}
    result = checked_assign(strategy, subs, {"t0": 3}, owned=owned, generations=gens)
    # Neither claimant keeps t0p0 (Kafka's partitionsWithMultiplePreviousOwners); cooperative withholds it
    # until both have revoked it.
    expected_c3 = tps("t0p0") if strategy == "sticky" else []
    assert result == {"C1": tps("t0p1"), "C2": tps("t0p2"), "C3": expected_c3}


@pytest.mark.parametrize("strategy", STICKY)
def test_higher_generation_wins_a_double_claim(strategy):
    subs = {c: ["t0"] for c in ("C1", "C2", "C3")}
    owned = {"C1": tps("t0p0", "t0p1"), "C2": tps("t0p0", "t0p2"), "C3": []}
    gens = {"C1": 2, "C2": 1, "C3": 2}
    result = checked_assign(strategy, subs, {"t0": 3}, owned=owned, generations=gens)
    # C1 (generation 2) keeps t0p0 over C2's stale claim; over quota, it keeps the lowest partition number.
    expected_c3 = tps("t0p1") if strategy == "sticky" else []
    assert result == {"C1": tps("t0p0"), "C2": tps("t0p2"), "C3": expected_c3}


def test_missing_generation_counts_as_default_and_loses():
    subs = {"A": ["t"], "B": ["t"]}
    owned = {"A": tps("tp0"), "B": tps("tp0", "tp1")}
    result = checked_assign("sticky", subs, {"t": 2}, owned=owned, generations={"A": 3})
    assert result == {"A": tps("tp0"), "B": tps("tp1")}


@pytest.mark.parametrize("strategy", STICKY)
def test_owned_partitions_of_unsubscribed_or_deleted_topics_are_dropped(strategy):
    subs = {"A": ["t"], "B": ["t", "u"]}
    owned = {"A": [("u", 0), ("gone", 0), ("t", 7)], "B": [("t", 0)]}
    result = checked_assign(strategy, subs, {"t": 2, "u": 1}, owned=owned, generations={"A": 1, "B": 1})
    assert ("t", 0) in result["B"]


def test_malformed_owned_partition_is_named():
    with pytest.raises(ValueError, match=r"owned\['A'\] holds 't0'"):
        assign("sticky", {"A": ["t0"]}, {"t0": 1}, owned={"A": ["t0"]})
    checked_assign("sticky", {"A": ["t0"]}, {"t0": 1}, owned={"A": [("t0", 0)]})


def test_cooperative_join_takes_two_rounds_and_never_double_owns():
    ppt = {"t": 6}
    subs = {"A": ["t"], "B": ["t"]}
    round0 = checked_assign("cooperative-sticky", subs, ppt)
    assert round0 == {"A": tps("tp0", "tp2", "tp4"), "B": tps("tp1", "tp3", "tp5")}
    subs["C"] = ["t"]
    gens = {"A": 1, "B": 1, "C": -1}
    round1 = checked_assign("cooperative-sticky", subs, ppt, owned=round0, generations=gens)
    # A and B each give up one partition, but C gets nothing yet: it must wait for the revocations.
    assert round1 == {"A": tps("tp0", "tp2"), "B": tps("tp1", "tp3"), "C": []}
    revoked = cooperative_revocations(round0, round1)
    assert revoked == {"A": tps("tp4"), "B": tps("tp5"), "C": []}
    round2 = checked_assign("cooperative-sticky", subs, ppt, owned=round1, generations={m: 2 for m in subs})
    assert round2 == {"A": tps("tp0", "tp2"), "B": tps("tp1", "tp3"), "C": tps("tp4", "tp5")}
    assert cooperative_revocations(round1, round2) == {"A": [], "B": [], "C": []}


def test_eager_sticky_moves_in_one_round():
    subs = {"A": ["t"], "B": ["t"], "C": ["t"]}
    owned = {"A": tps("tp0", "tp1", "tp2"), "B": tps("tp3", "tp4", "tp5")}
    result = checked_assign("sticky", subs, {"t": 6}, owned=owned, generations={"A": 1, "B": 1})
    assert result == {"A": tps("tp0", "tp1"), "B": tps("tp3", "tp4"), "C": tps("tp2", "tp5")}


def test_cooperative_revocations_member_gone():
    prev = {"A": tps("tp0", "tp1"), "B": tps("tp2")}
    new = {"A": tps("tp0", "tp1", "tp2")}
    assert cooperative_revocations(prev, new) == {"A": [], "B": tps("tp2")}
    checked_assign("sticky", {"A": ["t"]}, {"t": 3}, owned=prev, generations={"A": 1, "B": 1})


def test_partition_to_move_prefers_return_to_previous_owner_then_fresh_ones():
    from zkcoord.assignors.sticky import _pick_partition

    owner = [0, 0, 1, -1, -2]  # ids 0,1 owned by member 0; id 2 by member 1; 3 unowned; 4 double-claimed
    assert _pick_partition([0, 1, 2, 3], src=0, dst=1, owner=owner) == 2
    assert _pick_partition([0, 1, 3, 4], src=0, dst=1, owner=owner) == 4
    assert _pick_partition([0, 1], src=0, dst=1, owner=owner) == 1
    assert _pick_partition([3, 0, 1], src=0, dst=1, owner=owner) == 3  # unowned before higher ids it owned
    assert _pick_partition([0, 1], src=0, dst=2, owner=[-1, 0]) == 0
    checked_assign("sticky", {"A": ["t"]}, {"t": 1})
