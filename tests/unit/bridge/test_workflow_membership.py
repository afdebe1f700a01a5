"""The membership phase of the migrate workflow, pure: the phase members show, when a group is settled, which
member moves next (forward and back, one at a time), the marker's optional phase, and the point of no return."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pytest

from migration.workflow.states import (
    POINT_OF_NO_RETURN,
    IllegalPhase,
    Invocation,
    Marker,
    MemberInfo,
    MembershipPhase,
    MigrationState,
    Step,
    describe_members,
    finalize_blockers,
    guide,
    next_move,
    observe_phase,
    phase_transition,
    settle_problems,
)
from zkcoord.zk.handoff import Phase

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
    assert back.member == "c1" and "stop broker-protocol member c1 (owns t-0, t-1)" in back.lines[1]
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


HOW = Invocation(zk="127.0.0.1:2181/c", bootstrap="127.0.0.1:9092", state_dir="st")


def commands(lines: list[str]) -> list[list[str]]:
    """The runnable commands of advice lines (after `$ `), split as a shell would."""
    return [shlex.split(line.split("$ ", 1)[1]) for line in lines if "$ " in line]


def test_the_guide_names_every_step_from_start_to_finish_with_runnable_commands() -> None:
    """plan → dual-commit → one member at a time → verify → finalize → the point of no return → the clean-up."""
    S = MigrationState
    a = MemberInfo("g_a", "legacy", (("t", 0), ("t", 1)))
    b = MemberInfo("g_b", "legacy", (("t", 2), ("t", 3)))
    c = MemberInfo("g_classic-1", "classic", (("t", 0), ("t", 1)), client_id="g-broker-1", member_id="m1")
    d = MemberInfo("g_classic-2", "classic", (("t", 2), ("t", 3)), client_id="g-broker-2", member_id="m2")

    def at(
        state: MigrationState, members: list[MemberInfo], bridge: bool = True, rec: P | None = None
    ) -> list[str]:
        return guide("g", state, members, [], bridge_on=bridge, recorded=rec, topics=["t"], how=HOW)

    base = ["zkcoord", "migrate"]
    conn = ["--zk", "127.0.0.1:2181/c", "--bootstrap", "127.0.0.1:9092", "--state-dir", "st", "--group", "g"]
    assert commands(at(S.NONE, [a, b])) == [[*base, "plan", *conn]]
    assert commands(at(S.PLANNED, [a, b])) == [[*base, "dual-commit", *conn]]
    move = at(S.DUAL_COMMIT, [a, b], rec=P.LEGACY_ONLY)
    assert "1. stop ZooKeeper member g_a (owns t-0, t-1)" in move[2] and "'consumer id g_a'" in move[2]
    assert commands(move) == [
        ["kcat", "-b", "127.0.0.1:9092", "-G", "g", "-X", "client.id=g-broker-1", "-X", "auto.offset.reset=earliest",
         "-X", "session.timeout.ms=10000", "-u", "t"],
        [*base, "status", *conn],
    ]  # fmt: skip
    assert "stop ZooKeeper member g_b" in at(S.DUAL_COMMIT, [c, b], rec=P.MIXED)[2]
    assert "client.id=g-broker-2" in at(S.DUAL_COMMIT, [c, b], rec=P.MIXED)[3]
    assert commands(at(S.DUAL_COMMIT, [c, d], rec=P.MIXED)) == [[*base, "verify", *conn]]
    assert commands(at(S.VERIFIED, [c, d], rec=P.BROKER_ONLY)) == [[*base, "finalize", *conn]]
    point = at(S.FINALIZED, [c, d], rec=P.BROKER_ONLY)
    assert (
        "point of no return" in point[0] and "without --bridge-zk-groups and --bridge-zk-offsets" in point[0]
    )
    assert commands(point) == [[*base, "finalize", *conn]]
    clean = at(S.FINALIZED, [c, d], bridge=False, rec=P.BROKER_ONLY)
    assert "clean up the bridge's znodes of 2 broker-protocol member(s)" in clean[0]
    assert commands(clean) == [[*base, "finalize", *conn]]
    assert at(S.FINALIZED, [], bridge=False, rec=P.BROKER_ONLY) == [
        "next: done, nothing left to do for this group"
    ]
    # Without a coordinator bridge the offsets-only path: restart members with properties that exist.
    offsets_only = at(S.DUAL_COMMIT, [a, b], bridge=False, rec=P.LEGACY_ONLY)
    assert "--property offsets.storage=kafka --property dual.commit.enabled=true" in offsets_only[0]
    back = at(S.ROLLED_BACK, [c, b], rec=P.MIXED)
    assert "stop broker-protocol member g-broker-1 (g_classic-1)" in back[2]
    assert commands(back)[0] == ["zkcoord", "legacy", "consume", "--zk", "127.0.0.1:2181/c", "--group", "g",
                                 "--topic", "t"]  # fmt: skip


def test_in_front_of_a_cluster_the_guide_ends_with_the_handoff_not_verify_and_finalize() -> None:
    """A group a running `zkcoord proxy` coordinates: once no ZooKeeper member is left the next step is `migrate
    handoff` (without the proxy's --bootstrap: it finds the cluster's brokers itself), then done; a hand-off stopped
    while releasing is resumed."""
    S = MigrationState
    b = MemberInfo("g_b", "legacy", (("t", 2), ("t", 3)))
    c = MemberInfo("g_classic-1", "classic", (("t", 0), ("t", 1)), client_id="g-broker-1", member_id="m1")
    d = MemberInfo("g_classic-2", "classic", (("t", 2), ("t", 3)), client_id="g-broker-2", member_id="m2")
    how = Invocation(zk="127.0.0.1:2181/c", bootstrap="127.0.0.1:9192", broker_flags=("--command-config", "f"),
                     state_dir="st")  # fmt: skip

    def at(state: MigrationState, members: list[MemberInfo], handoff: Phase | None = None) -> list[str]:
        return guide("g", state, members, [], bridge_on=True, recorded=P.MIXED, topics=["t"], how=how,
                     proxied=True, handoff=handoff)  # fmt: skip

    handoff = ["zkcoord", "migrate", "handoff", "--zk", "127.0.0.1:2181/c", "--command-config", "f",
               "--state-dir", "st", "--group", "g"]  # fmt: skip
    assert "stop ZooKeeper member g_b" in at(S.DUAL_COMMIT, [c, b])[2]  # the walk itself is unchanged
    for state in (S.DUAL_COMMIT, S.VERIFIED):
        last = at(state, [c, d])
        assert "hand the group to your cluster's own coordinator" in last[0]
        assert commands(last) == [handoff]
    resume = at(S.DUAL_COMMIT, [], handoff=Phase.RELEASING)
    assert commands(resume) == [handoff] and "delete /zkcoord/handoffs/g to go back" in resume[0]
    assert at(S.DUAL_COMMIT, [], handoff=Phase.FORWARDING)[0].startswith(
        "next: done, the cluster's own coordinator has the group"
    )
    assert at(S.NONE, [], handoff=Phase.FORWARDING)[0].startswith("next: done")
    # without a proxy coordinating the group, the serve path: verify
    serve_path = guide("g", S.DUAL_COMMIT, [c, d], [], bridge_on=True, recorded=P.MIXED, how=how)
    assert commands(serve_path)[0][2] == "verify"


def test_gone_members_are_shown_as_gone_and_never_moved() -> None:
    gone = MemberInfo("g_classic-1", "classic", (("t", 0),), client_id="c1", member_id="m1", gone=True)
    orphan = MemberInfo("g_x", "legacy", (("t", 1),), registered=False)
    live = MemberInfo("g_b", "legacy", (("t", 2),))
    assert describe_members([gone, orphan, live]) == [
        "ZooKeeper (legacy) members: 1 (+ 1 gone)",
        "  g_b owns t-2",
        "  GONE g_x: not registered, its owner znodes hold t-1",
        "broker-protocol (classic) members: 0 (+ 1 gone)",
        "  GONE c1 (g_classic-1): not in the coordinator's group any more; its znodes hold t-0",
    ]
    assert next_move([gone, orphan], [], back=True).done  # nobody left to walk back
    assert finalize_blockers([gone, orphan, live]) == ["g_b"]


def test_a_command_printed_without_a_known_broker_says_where_it_goes() -> None:
    """A step that needs the broker never comes out without --bootstrap (it would fail as printed); status and
    plan run without one."""
    how = Invocation(zk="c:2181")
    assert how.migrate("verify", "g") == "zkcoord migrate verify --zk c:2181 --bootstrap HOST:PORT --group g"
    assert how.migrate("status", "g") == "zkcoord migrate status --zk c:2181 --group g"
    assert how.migrate("repair", "g") == "zkcoord migrate repair --zk c:2181 --group g"
    secure = Invocation(
        zk="c", bootstrap="b:9093", zk_flags=("--zk-set-acl",), broker_flags=("--command-config", "/x")
    )
    assert how.zookeeper_member("g", "t") == "zkcoord legacy consume --zk c:2181 --group g --topic t"
    assert secure.migrate("verify", "g") == (
        "zkcoord migrate verify --zk c --zk-set-acl --bootstrap b:9093 --command-config /x --group g"
    )
