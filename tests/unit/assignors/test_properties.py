"""Hypothesis properties: invariants for random inputs, stickiness on join/leave/churn, KIP-429 convergence."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.assignors import STRATEGIES, assign, check_assignment

from .helpers import checked_assign

TOPICS = ("a", "b", "c", "d")
SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def groups(draw, equal: bool | None = None, max_members: int = 6):
    """(subscriptions, partitions_per_topic, owned, generations) with random, possibly conflicting ownership."""
    ppt = {t: draw(st.integers(0, 7)) for t in TOPICS}
    members = draw(
        st.lists(st.sampled_from([f"m{i}" for i in range(9)]), min_size=1, max_size=max_members, unique=True)
    )
    if equal is None:
        equal = draw(st.booleans())
    if equal:
        common = draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))
        subs = {m: list(common) for m in members}
    else:
        subs = {m: draw(st.lists(st.sampled_from(TOPICS), unique=True)) for m in members}
    every = [(t, p) for t in TOPICS for p in range(ppt[t] + 1)]  # includes one partition that does not exist
    owned = {m: draw(st.lists(st.sampled_from(every), unique=True, max_size=8)) for m in members}
    gens = {m: draw(st.integers(-1, 3)) for m in members if draw(st.booleans())}
    return subs, ppt, owned, gens


@SETTINGS
@given(groups(), st.sampled_from(STRATEGIES))
def test_invariants_hold_for_random_groups(group, strategy):
    subs, ppt, owned, gens = group
    checked_assign(strategy, subs, ppt, owned=owned, generations=gens)


@SETTINGS
@given(groups(), st.sampled_from(("sticky", "cooperative-sticky")))
def test_sticky_is_a_fixed_point(group, strategy):
    """Re-running on its own (complete) result changes nothing: balanced assignments are kept as they are."""
    subs, ppt, owned, gens = group
    first = checked_assign("sticky", subs, ppt, owned=owned, generations=gens)
    again = checked_assign(strategy, subs, ppt, owned=first, generations={m: 5 for m in subs})
    assert again == first


@SETTINGS
@given(groups(equal=True), st.data())
def test_sticky_leave_moves_only_the_leavers_partitions(group, data):
    subs, ppt, owned, gens = group
    before = checked_assign("sticky", subs, ppt, owned=owned, generations=gens)
    leaver = data.draw(st.sampled_from(sorted(subs)))
    rest = {m: subs[m] for m in subs if m != leaver}
    if not rest:
        return
    after = checked_assign(
        "sticky", rest, ppt, owned={m: before[m] for m in rest}, generations={m: 1 for m in rest}
    )
    for m in rest:
        assert set(before[m]) <= set(after[m]), f"{m} lost partitions although only {leaver} left"
    moved = {tp for m in rest for tp in set(after[m]) - set(before[m])}
    assert moved == set(before[leaver])


@SETTINGS
@given(groups(equal=True, max_members=5))
def test_sticky_join_moves_only_what_the_joiner_needs(group):
    subs, ppt, owned, gens = group
    before = checked_assign("sticky", subs, ppt, owned=owned, generations=gens)
    joiner = "zz-new"
    subs2 = {**subs, joiner: next(iter(subs.values()))}
    after = checked_assign("sticky", subs2, ppt, owned=before, generations={m: 1 for m in subs})
    for m in subs:
        assert set(after[m]) <= set(before[m]), f"{m} gained partitions although a member joined"
    lost = sum(len(before[m]) - len(after[m]) for m in subs)
    assert lost == len(after[joiner])


@SETTINGS
@given(groups(equal=True))
def test_constrained_members_never_both_gain_and_lose(group):
    subs, ppt, owned, _gens = group
    # Ownership without conflicts (what a previous round would have produced): the first claim wins.
    seen: set[tuple[str, int]] = set()
    clean: dict[str, list[tuple[str, int]]] = {}
    for m in sorted(owned):
        clean[m] = [tp for tp in owned[m] if tp not in seen and tp[1] < ppt[tp[0]]]
        seen.update(clean[m])
    result = checked_assign("sticky", subs, ppt, owned=clean, generations={m: 1 for m in subs})
    for m in subs:
        mine = {tp for tp in clean[m] if tp[0] in subs[m]}
        gained, lost = set(result[m]) - mine, mine - set(result[m])
        assert not (gained and lost), f"{m} gained {gained} and lost {lost}"


@SETTINGS
@given(groups(), st.data())
def test_churn_then_cooperative_rounds_converge(group, data):
    """Random membership/subscription churn after a settled assignment: cooperative rounds (each member revokes,
    then owns what it was given) never give a partition to two members and end complete and balanced."""
    subs, ppt, _owned, _gens = group
    owned = checked_assign("sticky", subs, ppt)
    new_members = data.draw(
        st.lists(st.sampled_from([f"m{i}" for i in range(9)]), min_size=1, max_size=6, unique=True)
    )
    subs2 = {m: subs.get(m) or data.draw(st.lists(st.sampled_from(TOPICS), unique=True)) for m in new_members}
    owned_now = {m: owned.get(m, []) for m in subs2}
    for generation in range(1, 6):
        result = checked_assign(
            "cooperative-sticky", subs2, ppt, owned=owned_now, generations={m: generation for m in subs2}
        )
        if result == owned_now:
            check_assignment(result, subs2, ppt, balance="movable")
            assert result == assign("sticky", subs2, ppt, owned=owned_now, generations={m: 9 for m in subs2})
            return
        owned_now = result
    raise AssertionError(f"cooperative rounds did not converge: {owned_now}")
