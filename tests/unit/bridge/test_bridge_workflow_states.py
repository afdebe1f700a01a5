"""The migration state machine: every (step, state) pair checked against the table, marker encoding,
seed/rollback decisions never lower an offset, plan risks."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.workflow.states import (
    TARGET,
    VALID_FROM,
    VALID_PREVIOUS,
    GroupFacts,
    IllegalStep,
    IllegalTransition,
    MalformedMarker,
    Marker,
    MigrationState,
    Step,
    assess,
    check_step,
    rollback_zookeeper,
    seed_broker,
    transition,
)
from zkcoord.bridge import TopicPartition, max_merge

S = MigrationState
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.mark.parametrize(("step", "state"), list(itertools.product(Step, MigrationState)))
def test_every_step_in_every_state(step: Step, state: MigrationState) -> None:
    if state in VALID_FROM[step]:
        assert check_step("g", step, state) == (state is not TARGET[step])
        assert state in VALID_PREVIOUS[TARGET[step]]  # the step's own transition is in the table
    else:
        with pytest.raises(IllegalStep) as info:
            check_step("g", step, state)
        message = str(info.value)
        assert f"group 'g' is in state '{state.value}'" in message
        assert f"`migrate {step.value}` needs one of" in message
        assert "Next step for this group" in message


def test_happy_path_and_illegal_transitions() -> None:
    path = [S.NONE, S.PLANNED, S.DUAL_COMMIT, S.VERIFIED, S.FINALIZED, S.ROLLED_BACK, S.PLANNED]
    for old, new in itertools.pairwise(path):
        assert transition("g", old, new) is new
    assert transition("g", S.VERIFIED, S.DUAL_COMMIT) is S.DUAL_COMMIT  # a failed re-verify
    for bad in [
        (S.NONE, S.DUAL_COMMIT),
        (S.PLANNED, S.FINALIZED),
        (S.FINALIZED, S.DUAL_COMMIT),
        (S.ROLLED_BACK, S.VERIFIED),
    ]:
        with pytest.raises(IllegalTransition, match=f"{bad[0].value} -> {bad[1].value}"):
            transition("g", *bad)


def test_marker_round_trip_and_errors() -> None:
    marker = Marker("g", S.DUAL_COMMIT, Step.DUAL_COMMIT, 1700000000000)
    assert marker.encode() == (
        b'{"version":1,"group":"g","state":"dual-commit","step":"dual-commit","updated_ms":1700000000000,"tool":"zkcoord"}'
    )
    assert Marker.decode("/m", marker.encode()) == marker
    with pytest.raises(MalformedMarker, match="unknown marker version 2"):
        Marker.decode("/m", b'{"version":2}')
    with pytest.raises(MalformedMarker, match="/m: malformed migration marker"):
        Marker.decode("/m", b'{"version":1,"state":"flying"}')
    with pytest.raises(MalformedMarker):
        Marker.decode("/m", b"not json")


offsets = st.dictionaries(
    st.builds(TopicPartition, st.sampled_from("ab"), st.integers(0, 4)), st.integers(0, 100)
)


@given(offsets, offsets)
def test_seed_and_rollback_reach_the_max_without_lowering(
    zk: dict[TopicPartition, int], br: dict[TopicPartition, int]
) -> None:
    seeded = seed_broker(zk, br)
    assert all(br.get(tp, -1) < off for tp, off in seeded.items())
    new_br = {**br, **seeded}
    assert new_br == max_merge(zk, br)
    for tp, off in zk.items():
        assert new_br[tp] >= off
    rolled = rollback_zookeeper(zk, br)
    new_zk = {**zk, **rolled}
    assert new_zk == max_merge(zk, br)
    assert all(new_zk[tp] >= off for tp, off in zk.items())


def test_assess_lists_changes_and_risks() -> None:
    facts = GroupFacts(
        group="g",
        legacy_members=("c1",),
        owners=((T0, "g_c1-0"),),
        zookeeper={T0: 10, T1: 5},
        zookeeper_errors=("malformed znode /consumers/g/offsets/t/2: offset is not a decimal integer",),
        broker={T0: 12},
        broker_members=("m-1",),
        broker_state="Stable",
    )
    report = assess(facts)
    assert report.to_seed == {T1: 5}
    assert "copy 1 of 2 ZooKeeper offsets to the broker" in report.changes[0]
    text = "\n".join(report.risks)
    assert "1 malformed offset znode(s)" in text
    assert "1 legacy member(s) registered" in text
    assert "1 broker-protocol member(s) in group state 'Stable'" in text
    assert "ahead of ZooKeeper on 1 partition(s)" in text and "re-read up to 2 messages" in text
    assert "1 partition(s) with offsets have no owner znode" in text
    down = assess(GroupFacts("g", (), (), {}, broker_error="NoBrokersAvailable"))
    assert any("not reachable (NoBrokersAvailable)" in r for r in down.risks)
    assert any("no offsets in ZooKeeper" in r for r in down.risks)


def test_assess_names_the_coordinator_offset_bridge() -> None:
    base = GroupFacts("g", (), (), {T0: 10}, broker={T0: 10}, broker_members=("m-1",), broker_state="Stable")
    without = assess(base)
    assert any("no coordinator offset bridge is registered: ZooKeeper goes stale" in r for r in without.risks)
    assert not any("offset bridge is on" in c for c in without.changes)
    with_bridge = assess(replace(base, offset_bridges=("bridge-0000000000",)))
    assert not any("offset bridge" in r for r in with_bridge.risks)
    assert any("the coordinator offset bridge is on (1 node(s))" in c for c in with_bridge.changes)
