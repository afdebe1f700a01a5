"""JoinGroup: member ids, KIP-394, initial delay, protocol selection, static membership, every error path."""

from __future__ import annotations

from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode as E
from zkcoord.group.messages import JoinGroupResponse, LeaveGroupMember
from zkcoord.group.state import GroupState
from zkcoord.records.offsets import GroupMetadataKey

from .driver import Driver


def test_member_id_required_from_v4_and_pending_member_joins() -> None:
    d = Driver()
    t = d.join(version=4, client_id="cli")
    r = d.jr(t)
    assert r.error_code == E.MEMBER_ID_REQUIRED
    assert r.member_id == "cli-u1" and r.generation_id == -1 and r.leader == "" and r.members == ()
    assert r.protocol_name == ""  # v4 < 7: "" rather than null
    g = d.st.groups["g"]
    assert "cli-u1" in g.pending_members and g.state is GroupState.EMPTY
    t2 = d.join(member_id="cli-u1", version=4)
    assert t2 not in d.responses  # parked during the (zero) initial delay
    d.advance(0)
    r2 = d.jr(t2)
    assert (r2.error_code, r2.generation_id, r2.member_id, r2.leader) == (0, 1, "cli-u1", "cli-u1")
    assert [m.member_id for m in r2.members] == ["cli-u1"]
    assert d.st.groups["g"].state is GroupState.COMPLETING_REBALANCE


def test_v3_joins_directly_and_v7_reports_null_protocol_on_error() -> None:
    d = Driver()
    t = d.join(version=3)
    d.advance(0)
    assert d.jr(t).error_code == 0 and d.jr(t).generation_id == 1
    t = d.join(group="h", member_id="nobody", version=7)
    assert d.jr(t).error_code == E.UNKNOWN_MEMBER_ID and d.jr(t).protocol_name is None


def test_pending_member_expires_after_session_timeout() -> None:
    d = Driver()
    t = d.join(session=7000)
    mid = d.jr(t).member_id
    d.advance(6999)
    assert mid in d.st.groups["g"].pending_members
    d.advance(1)
    assert mid not in d.st.groups["g"].pending_members
    t = d.join(member_id=mid)
    assert d.jr(t).error_code == E.UNKNOWN_MEMBER_ID


def test_invalid_session_timeout_bounds() -> None:
    d = Driver()
    for session in (5999, 1_800_001):
        assert d.jr(d.join(session=session)).error_code == E.INVALID_SESSION_TIMEOUT
    assert "g" not in d.st.groups  # checked before the group is created
    assert d.jr(d.join(session=6000)).error_code == E.MEMBER_ID_REQUIRED
    assert d.jr(d.join(session=1_800_000)).error_code == E.MEMBER_ID_REQUIRED


def test_inconsistent_group_protocol() -> None:
    d = Driver()
    assert d.jr(d.join(protocol_type="")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert d.jr(d.join(protocols=())).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    d.stable_group(1)
    assert d.jr(d.join(protocol_type="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    t = d.join(protocols=(("roundrobin", b""),))
    assert d.jr(t).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert d.jr(t).member_id == ""
    # Kafka's rule for a plain group, whatever a mixed group hosts: kafkajs's default name is refused here
    assert d.jr(d.join(protocols=(("RoundRobinAssigner", b""),))).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_initial_rebalance_delay_rearms_while_members_arrive() -> None:
    d = Driver(GroupConfig(group_initial_rebalance_delay_ms=3000))
    a = d.join_new(rebalance=10_000)
    d.advance(2000)
    b = d.join_new(rebalance=10_000)  # newMemberAdded: the delay is extended
    d.advance(1000)  # first delay expires at 3000: re-armed for min(3000, 7000)
    assert a not in d.responses and b not in d.responses
    d.advance(2999)
    assert a not in d.responses
    d.advance(1)
    assert d.jr(a).generation_id == 1 and d.jr(b).generation_id == 1
    assert d.jr(a).leader == d.jr(a).member_id and len(d.jr(a).members) == 2


def test_initial_delay_never_completes_early_even_if_all_joined() -> None:
    d = Driver(GroupConfig(group_initial_rebalance_delay_ms=3000))
    a = d.join_new()
    d.advance(2999)
    assert a not in d.responses
    d.advance(1)
    assert d.jr(a).error_code == 0


def test_initial_delay_bounded_by_rebalance_timeout() -> None:
    d = Driver(GroupConfig(group_initial_rebalance_delay_ms=3000))
    first = d.join_new(rebalance=7000)  # remaining = 4000
    for _ in range(10):
        d.advance(1000)
        d.join_new(rebalance=7000)
    assert d.jr(first).generation_id == 1
    assert d.now - 1_000_000 <= 10_000


def test_protocol_vote_and_deterministic_tie_break() -> None:
    d = Driver()
    a = d.join_new(protocols=(("roundrobin", b"a"), ("range", b"a")))
    d.join_new(protocols=(("range", b"b"), ("roundrobin", b"b")))
    d.advance(0)
    # One vote each: the tie goes to the leader's first preference.
    assert d.jr(a).protocol_name == "roundrobin" and d.jr(a).leader == d.jr(a).member_id
    assert [m.metadata for m in d.jr(a).members] == [b"a", b"b"]
    d2 = Driver()
    a = d2.join_new(protocols=(("roundrobin", b""), ("range", b"")))
    d2.join_new(protocols=(("range", b""), ("roundrobin", b"")))
    d2.join_new(protocols=(("range", b""), ("sticky", b"")))
    d2.advance(0)
    assert d2.jr(a).protocol_name == "range"  # only candidate supported by all three


def test_new_member_in_stable_triggers_rebalance_and_old_members_rejoin() -> None:
    d = Driver()
    leader, follower = d.stable_group(2)
    g = d.st.groups["g"]
    assert g.state is GroupState.STABLE and g.generation == 1
    c = d.join_new(client_id="new")
    assert g.state is GroupState.PREPARING_REBALANCE
    assert d.r(d.heartbeat(follower, 1)).error_code == E.REBALANCE_IN_PROGRESS  # type: ignore[attr-defined]
    tl = d.join(member_id=leader)
    tf = d.join(member_id=follower)  # last to rejoin completes the join at once
    assert {d.jr(t).generation_id for t in (c, tl, tf)} == {2}
    assert d.jr(tl).leader == leader and len(d.jr(tl).members) == 3 and d.jr(tf).members == ()


def test_join_completion_drops_dynamic_members_that_did_not_rejoin() -> None:
    d = Driver()
    leader, follower = d.stable_group(2, session=60_000)
    d.join_new(client_id="new", session=60_000)
    tf = d.join(member_id=follower, session=60_000)
    d.advance(30_000)  # rebalance timeout: the leader never rejoined (and its session has not expired)
    g = d.st.groups["g"]
    assert leader not in g.members and g.leader_id == follower
    assert d.jr(tf).leader == follower and g.generation == 2


def test_follower_unchanged_rejoin_in_stable_is_answered_immediately() -> None:
    d = Driver()
    _leader, follower = d.stable_group(2)
    r = d.jr(d.join(member_id=follower))
    assert (r.error_code, r.generation_id, r.members) == (0, 1, ())
    assert d.st.groups["g"].state is GroupState.STABLE
    t = d.join(member_id=follower, protocols=(("range", b"changed"),))
    assert t not in d.responses and d.st.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_leader_rejoin_in_stable_always_rebalances() -> None:
    d = Driver()
    leader, _ = d.stable_group(2)
    d.join(member_id=leader)
    assert d.st.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_rejoin_in_completing_rebalance_with_same_metadata_returns_current_generation() -> None:
    d = Driver()
    a = d.join_new()
    d.advance(0)
    mid = d.jr(a).member_id
    r = d.jr(d.join(member_id=mid))
    assert (r.generation_id, r.leader, len(r.members)) == (1, mid, 1)
    assert d.st.groups["g"].state is GroupState.COMPLETING_REBALANCE


def test_known_member_of_empty_group_is_unknown() -> None:
    d = Driver()
    (m,) = d.stable_group(1)
    d.commit({("t", 0): 1}, generation=1, member_id=m)
    d.leave(LeaveGroupMember(m))
    assert d.st.groups["g"].state is GroupState.EMPTY
    assert d.jr(d.join(member_id=m)).error_code == E.UNKNOWN_MEMBER_ID


def test_group_max_size_reached() -> None:
    d = Driver(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=2))
    d.stable_group(2)
    t = d.join_new(client_id="third")
    r = d.jr(t)
    assert (r.error_code, r.member_id) == (E.GROUP_MAX_SIZE_REACHED, "")
    assert len(d.st.groups["g"].members) == 2


def test_static_member_restart_in_stable_keeps_generation_and_fences_old_id() -> None:
    d = Driver()
    t1 = d.join(instance="i1", client_id="c1")
    t2 = d.join(instance="i2", client_id="c2")
    d.advance(0)
    old_leader = d.jr(t1).member_id
    assert old_leader.startswith("i1-")
    other = d.jr(t2).member_id
    d.sync(other, 1)
    d.sync(old_leader, 1, assignments=((old_leader, b"A"), (other, b"B")))
    n_records = len(d.records)
    t = d.join(instance="i1", version=5)  # restarted leader, unknown member id
    r = d.jr(t)
    g = d.st.groups["g"]
    assert g.state is GroupState.STABLE and r.generation_id == 1
    assert r.member_id != old_leader and g.leader_id == r.member_id
    assert r.leader == old_leader and r.members == () and not r.skip_assignment  # pre-v9: old leader id
    assert isinstance(d.records[-1][0], GroupMetadataKey) and len(d.records) == n_records + 1
    assert d.r(d.heartbeat(old_leader, 1, instance="i1")).error_code == E.FENCED_INSTANCE_ID  # type: ignore[attr-defined]
    assert d.sr(d.sync(r.member_id, 1, instance="i1")).assignment == b"A"


def test_static_leader_restart_v9_gets_skip_assignment() -> None:
    d = Driver()
    t1 = d.join(instance="i1", version=9)
    d.advance(0)
    mid = d.jr(t1).member_id
    d.sync(mid, 1, assignments=((mid, b"A"),))
    r = d.jr(d.join(instance="i1", version=9))
    assert r.skip_assignment and r.leader == r.member_id and len(r.members) == 1


def test_static_member_replaced_while_parked_gets_fenced_response() -> None:
    d = Driver(GroupConfig(group_initial_rebalance_delay_ms=5000))
    t1 = d.join(instance="i1")
    t2 = d.join(instance="i1")
    assert d.jr(t1).error_code == E.FENCED_INSTANCE_ID
    d.advance(5000)
    assert d.jr(t2).error_code == 0 and len(d.st.groups["g"].members) == 1


def test_static_member_is_not_dropped_at_join_completion() -> None:
    d = Driver()
    ts = d.join(instance="s", session=60_000)
    td = d.join_new(session=60_000)
    d.advance(0)
    static_id, dyn = d.jr(ts).member_id, d.jr(td).member_id
    assert d.jr(ts).leader == static_id
    d.sync(dyn, 1)
    d.sync(static_id, 1)
    tx = d.join_new(client_id="x", session=60_000)  # rebalance; the static leader does not rejoin
    d.join(member_id=dyn, session=60_000)
    d.advance(30_000)
    g = d.st.groups["g"]
    assert static_id in g.members and g.generation == 2
    assert g.leader_id == dyn  # a member that rejoined is elected instead
    assert d.jr(tx).leader == dyn


def test_fenced_and_unknown_static_member_on_join() -> None:
    d = Driver()
    t = d.join(instance="i1")
    d.advance(0)
    mid = d.jr(t).member_id
    assert d.jr(d.join(member_id="other", instance="i1")).error_code == E.FENCED_INSTANCE_ID
    assert d.jr(d.join(member_id=mid, instance="i2")).error_code == E.UNKNOWN_MEMBER_ID


def test_new_member_join_timeout_drops_parked_new_member() -> None:
    d = Driver(GroupConfig(group_initial_rebalance_delay_ms=0, new_member_join_timeout_ms=50_000))
    leader, _ = d.stable_group(2, rebalance=200_000, session=100_000)
    t = d.join_new(client_id="slow", rebalance=200_000)  # parked: old members never rejoin
    d.advance(50_000)
    r = d.jr(t)
    assert r.error_code == E.UNKNOWN_MEMBER_ID
    assert not any(m.startswith("slow") for m in d.st.groups["g"].members)
    assert leader in d.st.groups["g"].members


def test_no_token_answered_twice() -> None:
    d = Driver()
    d.stable_group(3)
    d.join_new(client_id="x")
    d.advance(60_000)
    assert d.answered_twice == []
    assert all(isinstance(r, JoinGroupResponse) or r is not None for r in d.responses.values())
