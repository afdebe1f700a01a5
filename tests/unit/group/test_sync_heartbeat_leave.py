"""SyncGroup, Heartbeat and LeaveGroup: parking, assignment propagation, session expiry, every error path."""

from __future__ import annotations

import logging

import pytest

from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode as E
from zkcoord.group.messages import HeartbeatResponse, LeaveGroupMember, LeaveGroupResponse
from zkcoord.group.state import GroupState
from zkcoord.records.offsets import GroupMetadataKey, GroupMetadataValue

from .driver import Driver


def hb(d: Driver, token: int) -> int:
    r = d.r(token)
    assert isinstance(r, HeartbeatResponse)
    return r.error_code


def lv(d: Driver, token: int) -> LeaveGroupResponse:
    r = d.r(token)
    assert isinstance(r, LeaveGroupResponse)
    return r


def two_joined(d: Driver) -> tuple[str, str]:
    a, b = d.join_new(client_id="a"), d.join_new(client_id="b")
    d.advance(0)
    return d.jr(a).member_id, d.jr(b).member_id


def test_followers_wait_for_leader_assignment_which_is_persisted() -> None:
    d = Driver()
    leader, follower = two_joined(d)
    tf = d.sync(follower, 1)
    assert tf not in d.responses
    tl = d.sync(leader, 1, assignments=((leader, b"L"), ("stranger", b"X")))  # follower omitted => b""
    assert d.sr(tl).assignment == b"L" and d.sr(tf).assignment == b""
    assert d.sr(tf).protocol_name == "range" and d.sr(tf).protocol_type == "consumer"
    g = d.st.groups["g"]
    assert g.state is GroupState.STABLE
    key, value = d.records[-1]
    assert key == GroupMetadataKey("g") and isinstance(value, GroupMetadataValue)
    assert (value.generation, value.protocol, value.leader) == (1, "range", leader)
    assert [(m.member_id, m.assignment) for m in value.members] == [(leader, b"L"), (follower, b"")]
    assert d.sr(d.sync(follower, 1)).assignment == b""  # Stable: answered from the stored assignment


def test_sync_errors() -> None:
    d = Driver()
    assert d.sr(d.sync("x", 1, group="nope")).error_code == E.UNKNOWN_MEMBER_ID
    leader, follower = two_joined(d)
    assert d.sr(d.sync("stranger", 1)).error_code == E.UNKNOWN_MEMBER_ID
    assert d.sr(d.sync(leader, 0)).error_code == E.ILLEGAL_GENERATION
    assert d.sr(d.sync(leader, 1, protocol_type="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert d.sr(d.sync(leader, 1, protocol_name="roundrobin")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    d.join_new(client_id="c")  # -> PreparingRebalance
    assert d.sr(d.sync(leader, 1)).error_code == E.REBALANCE_IN_PROGRESS
    assert d.sr(d.sync(follower, 1, instance="i9")).error_code == E.UNKNOWN_MEMBER_ID


def test_rebalance_during_completing_answers_parked_syncs_with_rebalance_in_progress() -> None:
    d = Driver()
    _leader, follower = two_joined(d)
    tf = d.sync(follower, 1)
    d.join_new(client_id="c")
    assert d.sr(tf).error_code == E.REBALANCE_IN_PROGRESS and d.sr(tf).assignment == b""


def test_sync_timeout_removes_members_that_never_synced() -> None:
    d = Driver()
    leader, follower = two_joined(d)
    d.sync(leader, 1, assignments=((leader, b"L"), (follower, b"F")))
    d.heartbeat(leader, 1)
    d.advance(9000)
    d.heartbeat(leader, 1)
    d.advance(9000)
    assert follower not in d.st.groups["g"].members  # its session expired first (no SyncGroup, no heartbeat)
    d2 = Driver()
    leader, follower = two_joined(d2)
    d2.sync(leader, 1, assignments=())
    for _ in range(4):  # heartbeats keep the follower alive; the missing SyncGroup still removes it
        d2.advance(8000)
        d2.heartbeat(leader, 1)
        d2.heartbeat(follower, 1)
    g = d2.st.groups["g"]
    assert follower not in g.members and g.state is GroupState.PREPARING_REBALANCE


def test_heartbeat_paths() -> None:
    d = Driver()
    assert hb(d, d.heartbeat("m", 1, group="nope")) == E.UNKNOWN_MEMBER_ID
    leader, follower = two_joined(d)
    assert hb(d, d.heartbeat(leader, 1)) == E.NONE  # CompletingRebalance
    assert hb(d, d.heartbeat("stranger", 1)) == E.UNKNOWN_MEMBER_ID
    assert hb(d, d.heartbeat(leader, 2)) == E.ILLEGAL_GENERATION
    d.sync(leader, 1, assignments=())
    d.sync(follower, 1)
    assert hb(d, d.heartbeat(leader, 1)) == E.NONE  # Stable
    d.join_new(client_id="c")
    assert hb(d, d.heartbeat(follower, 1)) == E.REBALANCE_IN_PROGRESS


def test_heartbeat_static_member_checks() -> None:
    d = Driver()
    t = d.join(instance="i1")
    d.advance(0)
    mid = d.jr(t).member_id
    assert hb(d, d.heartbeat(mid, 1, instance="i1")) == E.NONE
    assert hb(d, d.heartbeat("old", 1, instance="i1")) == E.FENCED_INSTANCE_ID
    assert hb(d, d.heartbeat(mid, 1, instance="i2")) == E.UNKNOWN_MEMBER_ID


def test_heartbeat_on_empty_group_is_unknown_member() -> None:
    d = Driver()
    d.commit({("t", 0): 5})
    assert hb(d, d.heartbeat("", 0)) == E.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_member_and_heartbeats_keep_it() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    for _ in range(2):
        d.advance(9000)
        d.heartbeat(a, 1)
    g = d.st.groups["g"]
    assert a in g.members and b not in g.members
    assert g.state is GroupState.PREPARING_REBALANCE
    assert not any(k.member_id == b for k in d.timers)


def test_rebalances_and_departures_are_logged_with_their_reason(caplog: pytest.LogCaptureFixture) -> None:
    """What an operator reads when a group does not settle: who left, why the group rebalanced, the new
    generation (Kafka's GroupCoordinator logs the same events at INFO)."""
    d = Driver()
    with caplog.at_level(logging.INFO, logger="zkcoord.group.membership"):
        a, b = d.stable_group(2)
        for _ in range(2):
            d.advance(9000)
            d.heartbeat(a, 1)
        d.join(member_id=a)
        d.advance(0)
        lv(d, d.leave(LeaveGroupMember(a)))
    lines = [r.getMessage() for r in caplog.records]
    assert f"group=g gen=1 member={b} removed: session timeout expired" in lines
    assert (
        f"group=g gen=1 preparing to rebalance in state Stable (reason: removing member {b}: session timeout expired)"
        in lines
    )
    assert f"group=g gen=2 stabilized: members=1 leader={a} protocol=range" in lines
    assert f"group=g gen=2 member={a} removed: LeaveGroup" in lines


def test_parked_member_survives_its_session_deadline() -> None:
    d = Driver()
    a, b = d.stable_group(2, rebalance=60_000)
    d.heartbeat(b, 1)
    ta = d.join(member_id=a, rebalance=60_000)  # a parked in JoinGroup; b never rejoins nor heartbeats
    d.advance(15_000)
    g = d.st.groups["g"]
    assert a in g.members and b not in g.members
    assert d.jr(ta).generation_id == 2  # b's expiry completed the join


def test_last_member_leaving_stable_group_empties_it_and_writes_empty_metadata() -> None:
    d = Driver()
    (m,) = d.stable_group(1)
    r = lv(d, d.leave(LeaveGroupMember(m)))
    assert (r.error_code, [x.error_code for x in r.members]) == (0, [0])
    g = d.st.groups["g"]
    assert g.state is GroupState.EMPTY and g.generation == 2
    key, value = d.records[-1]
    assert key == GroupMetadataKey("g") and isinstance(value, GroupMetadataValue)
    assert (value.generation, value.protocol, value.leader, value.members) == (2, None, None, ())


def test_leave_batch_admin_and_errors() -> None:
    d = Driver()
    t1 = d.join(instance="i1")
    t2 = d.join_new()
    d.advance(0)
    dyn = d.jr(t2).member_id
    pending = d.jr(d.join(client_id="p")).member_id  # MEMBER_ID_REQUIRED: pending
    r = lv(
        d,
        d.leave(
            LeaveGroupMember("", "i1"),  # admin removal by instance id
            LeaveGroupMember("", "i9"),
            LeaveGroupMember(pending),
            LeaveGroupMember(dyn, "i1"),  # instance no longer mapped
            LeaveGroupMember("ghost"),
        ),
    )
    assert [m.error_code for m in r.members] == [
        0,
        E.UNKNOWN_MEMBER_ID,
        0,
        E.UNKNOWN_MEMBER_ID,
        E.UNKNOWN_MEMBER_ID,
    ]
    g = d.st.groups["g"]
    assert d.jr(t1).member_id not in g.members and pending not in g.pending_members
    assert lv(d, d.leave(LeaveGroupMember(dyn, "i2"))).members[0].error_code == E.UNKNOWN_MEMBER_ID
    t3 = d.join(instance="i3")
    d.advance(0)
    assert lv(d, d.leave(LeaveGroupMember("old-id", "i3"))).members[0].error_code == E.FENCED_INSTANCE_ID
    assert t3 not in d.responses  # still parked: dyn has not rejoined


def test_leave_unknown_group_and_v0_top_level_error() -> None:
    d = Driver()
    r = lv(d, d.leave(LeaveGroupMember("a"), LeaveGroupMember("b"), group="nope"))
    assert r.error_code == 0 and [m.error_code for m in r.members] == [E.UNKNOWN_MEMBER_ID] * 2
    r = lv(d, d.leave(LeaveGroupMember("a"), group="nope", version=1))
    assert r.error_code == E.UNKNOWN_MEMBER_ID


def test_leaving_parked_member_gets_unknown_member_on_its_join() -> None:
    d = Driver(GroupConfig(group_initial_rebalance_delay_ms=5000))
    t = d.join_new()
    mid = d.jr(t).member_id if t in d.responses else d.st.groups["g"].leader_id
    assert mid is not None
    d.leave(LeaveGroupMember(mid))
    assert d.jr(t).error_code == E.UNKNOWN_MEMBER_ID
