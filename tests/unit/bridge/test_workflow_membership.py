"""The membership phase of the migrate workflow, pure: the phase members show, when a group is settled, which
member moves next (forward and back, one at a time), the marker's optional phase, and the point of no return."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from migration.workflow.states import (
    POINT_OF_NO_RETURN,
    IllegalPhase,
    Marker,
    MembershipPhase,
    MigrationState,
    Step,
    describe_members,
    finalize_blockers,
    next_move,
    observe_phase,
    phase_transition,
    settle_problems,
)

P = MembershipPhase


@dataclass(frozen=True)
class M:
    consumer_id: str
    protocol: str
    owned: tuple[tuple[str, int], ...] = ()


A = M("g_a", "legacy", (("t", 0), ("t", 1)))
B = M("g_b", "legacy", (("t", 2), ("t", 3)))
C = M("c1", "classic", (("t", 0), ("t", 1)))
OWNERS = {("t", 0): "c1-0", ("t", 1): "c1-0", ("t", 2): "g_b-0", ("t", 3): "g_b-0"}


def test_phase_follows_the_members() -> None:
    assert observe_phase([]) is None
    assert observe_phase([A, B]) is P.LEGACY_ONLY
    assert observe_phase([C, B]) is P.MIXED
    assert observe_phase([C]) is P.BROKER_ONLY


def test_a_finalized_broker_only_group_cannot_go_back() -> None:
    assert phase_transition("g", MigrationState.VERIFIED, P.MIXED, P.BROKER_ONLY) is P.BROKER_ONLY
    # The offsets-only path: finalized while legacy-only, the member walk may still start.
    assert phase_transition("g", MigrationState.FINALIZED, P.LEGACY_ONLY, P.MIXED) is P.MIXED
    with pytest.raises(
        IllegalPhase, match=r"illegal membership phase broker-only -> mixed: .*point of no return"
    ):
        phase_transition("g", MigrationState.FINALIZED, P.BROKER_ONLY, P.MIXED)
    # Rollback leaves FINALIZED: walking back is allowed again.
    assert phase_transition("g", MigrationState.ROLLED_BACK, P.BROKER_ONLY, P.MIXED) is P.MIXED
    assert "finalize" in POINT_OF_NO_RETURN and "--bridge-zk-groups" in POINT_OF_NO_RETURN


def test_settled_means_one_registered_owner_per_partition() -> None:
    assert settle_problems([C, B], OWNERS, {"t": 4}) == []
    gone = settle_problems([C], OWNERS, {"t": 4})
    assert gone == [
        "t-2 is held by g_b-0, whose consumer g_b is not registered",
        "t-3 is held by g_b-0, whose consumer g_b is not registered",
    ]
    missing = dict(OWNERS)
    del missing[("t", 3)]
    assert settle_problems([C, B], missing, {"t": 5}) == ["2 partition(s) have no owner: t-3, t-4"]
    assert settle_problems([], {}, {"t": 4}) == []  # an empty group has nothing to settle


def test_walk_moves_one_member_at_a_time_and_waits_for_a_settled_group() -> None:
    forward = next_move([B, A], [], back=False)
    assert forward.member == "g_a" and not forward.done
    assert "2 member(s) left; next, 1 of 2" in forward.lines[0]
    assert "stop ZooKeeper member g_a (owns t-0, t-1)" in forward.lines[1]
    wait = next_move([C, B], ["t-2 is held by x-0"], back=False)
    assert wait.member is None and "wait, the group is not settled" in wait.lines[0]
    assert wait.lines[1] == "  t-2 is held by x-0"
    back = next_move([C, B], [], back=True)
    assert back.member == "c1" and "stop broker-protocol member c1 (classic; owns t-0, t-1)" in back.lines[1]
    assert next_move([A, B], [], back=True).done
    assert next_move([C], [], back=False).done


def test_members_are_shown_by_protocol_and_blockers_named() -> None:
    assert describe_members([C, B, A]) == [
        "ZooKeeper (legacy) members: 2",
        "  g_a owns t-0, t-1",
        "  g_b owns t-2, t-3",
        "broker-protocol (classic) members: 1",
        "  c1 owns t-0, t-1",
    ]
    assert describe_members([]) == ["no member registered"]
    assert finalize_blockers([C, B, A]) == ["g_a", "g_b"]


def test_marker_phase_is_optional_and_round_trips() -> None:
    marker = Marker("g", MigrationState.VERIFIED, Step.VERIFY, 5, phase=P.MIXED)
    assert b'"membership":"mixed"' in marker.encode()
    assert Marker.decode("/m", marker.encode()) == marker
    old = Marker("g", MigrationState.PLANNED, Step.PLAN, 5)
    assert b"membership" not in old.encode() and Marker.decode("/m", old.encode()).phase is None
