"""The hand-off znode's record: round trip, and any other bytes refused as MalformedZnode (never another error)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.errors import MalformedZnode
from zkcoord.zk.handoff import Handoff, Phase, handoff_path

PATH = "/zkcoord/handoffs/g"


@given(st.text(), st.sampled_from(Phase), st.integers(0, 2**63 - 1), st.integers(0, 10_000))
def test_round_trip(group: str, phase: Phase, updated: int, members: int) -> None:
    handoff = Handoff(group, phase, updated, members)
    assert Handoff.decode(PATH, handoff.encode()) == handoff


@given(st.binary(max_size=300))
def test_random_bytes_are_refused_precisely(data: bytes) -> None:
    try:
        Handoff.decode(PATH, data)
    except MalformedZnode as exc:
        assert PATH in str(exc)


@pytest.mark.parametrize(
    "obj",
    [
        {"version": 2, "group": "g", "phase": "releasing", "updated_ms": 1, "members": 1},
        {"version": 1, "group": "g", "phase": "gone", "updated_ms": 1, "members": 1},
        {"version": 1, "group": 7, "phase": "releasing", "updated_ms": 1, "members": 1},
        {"version": 1, "group": "g", "phase": "releasing", "updated_ms": 1, "members": -1},
        {"version": 1, "group": "g", "phase": "releasing", "updated_ms": 1},
        ["g"],
    ],
)
def test_records_not_ours_are_refused(obj: object) -> None:
    with pytest.raises(MalformedZnode, match="not a hand-off record"):
        Handoff.decode(PATH, json.dumps(obj).encode())


def test_an_oversized_znode_is_refused_before_parsing() -> None:
    with pytest.raises(MalformedZnode, match="more than a hand-off znode holds"):
        Handoff.decode(PATH, b" " * (64 * 1024 + 1))


def test_a_group_id_with_a_slash_is_one_znode_name() -> None:
    assert handoff_path("a/b c") == "/zkcoord/handoffs/a%2Fb%20c"
