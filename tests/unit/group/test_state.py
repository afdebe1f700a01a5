"""Every (from, to) pair of the group state table, legal and illegal."""

from __future__ import annotations

import itertools

import pytest

from zkcoord.group.errors import IllegalStateTransition
from zkcoord.group.state import CAN_REBALANCE, VALID_PREVIOUS, GroupState, check_transition, parse_state

S = GroupState
LEGAL = {
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.PREPARING_REBALANCE, S.EMPTY),
} | {(s, S.DEAD) for s in S}


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(S, S)), ids=lambda s: s.value)
def test_transition_table(src: GroupState, dst: GroupState) -> None:
    if (src, dst) in LEGAL:
        assert check_transition("g", src, dst) is dst
    else:
        with pytest.raises(IllegalStateTransition) as info:
            check_transition("g", src, dst)
        assert info.value.group_id == "g"
        assert (info.value.from_state, info.value.to_state) == (src, dst)
        assert src.value in str(info.value) and dst.value in str(info.value)


def test_table_matches_reference_exactly() -> None:
    assert {(p, t) for t, ps in VALID_PREVIOUS.items() for p in ps} == LEGAL
    assert frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}) == CAN_REBALANCE


def test_state_names_and_parse() -> None:
    assert [s.value for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
    assert parse_state("stable") is S.STABLE
    assert parse_state("PREPARINGREBALANCE") is S.PREPARING_REBALANCE
    assert parse_state("AwaitingSync") is None
