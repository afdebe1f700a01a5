"""OffsetCommit/OffsetFetch generation rules, retention, DescribeGroups/ListGroups/DeleteGroups, status checks, load."""

from __future__ import annotations

from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode as E
from zkcoord.group.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupMember,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    SyncGroupRequest,
)
from zkcoord.group.model import CoordinatorState, replay_all
from zkcoord.group.state import GroupState
from zkcoord.records.offsets import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue

from .consumer_world import World
from .driver import Driver, consumer_subscription


def commit_codes(d: Driver, token: int) -> list[int]:
    r = d.r(token)
    assert isinstance(r, OffsetCommitResponse)
    return [p.error_code for t in r.topics for p in t.partitions]


def fetched(d: Driver, token: int) -> dict[tuple[str, int], tuple[int, int, str, int]]:
    r = d.r(token)
    assert isinstance(r, OffsetFetchResponse)
    return {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in r.topics
        for p in t.partitions
    }


def test_simple_consumer_commit_creates_empty_group_and_fetches_back() -> None:
    d = Driver()
    assert commit_codes(d, d.commit({("t", 0): 5, ("t", 1): 7, ("u", 0): 1}, metadata="m")) == [0, 0, 0]
    g = d.st.groups["g"]
    assert g.state is GroupState.EMPTY and g.protocol_type is None
    assert fetched(d, d.fetch()) == {
        ("t", 0): (5, -1, "m", 0),
        ("t", 1): (7, -1, "m", 0),
        ("u", 0): (1, -1, "m", 0),
    }
    some = d.fetch(topics=(OffsetFetchRequestTopic("t", (1, 9)),))
    assert fetched(d, some) == {("t", 1): (7, -1, "m", 0), ("t", 9): (-1, -1, "", 0)}
    assert fetched(d, d.fetch(group="unknown", topics=(OffsetFetchRequestTopic("t", (0,)),))) == {
        ("t", 0): (-1, -1, "", 0)
    }
    assert fetched(d, d.fetch(group="unknown")) == {}
    key, value = d.records[0]
    assert key == OffsetCommitKey("g", "t", 0)
    assert value == OffsetCommitValue(5, -1, "m", d.now, -1)


def test_commit_generation_rules() -> None:
    d = Driver()
    assert commit_codes(d, d.commit({("t", 0): 1}, group="new", generation=3, member_id="m")) == [
        E.ILLEGAL_GENERATION
    ]
    assert "new" not in d.st.groups
    leader, follower = d.stable_group(2)
    assert commit_codes(d, d.commit({("t", 0): 1})) == [E.UNKNOWN_MEMBER_ID]  # gen -1 into a live group
    assert commit_codes(d, d.commit({("t", 0): 1}, generation=1, member_id="ghost")) == [E.UNKNOWN_MEMBER_ID]
    assert commit_codes(d, d.commit({("t", 0): 1}, generation=0, member_id=leader)) == [E.ILLEGAL_GENERATION]
    assert commit_codes(d, d.commit({("t", 0): 1}, generation=1, member_id=leader, instance="i")) == [
        E.UNKNOWN_MEMBER_ID
    ]
    assert commit_codes(d, d.commit({("t", 0): 1}, generation=1, member_id=leader)) == [0]
    d.join_new(client_id="c")  # PreparingRebalance: the previous generation may still commit
    assert commit_codes(d, d.commit({("t", 0): 2}, generation=1, member_id=follower)) == [0]
    d.join(member_id=leader)
    d.join(member_id=follower)
    assert d.st.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert commit_codes(d, d.commit({("t", 0): 3}, generation=2, member_id=leader)) == [
        E.REBALANCE_IN_PROGRESS
    ]
    assert commit_codes(d, d.commit({("t", 0): 3}, generation=1, member_id=leader)) == [E.ILLEGAL_GENERATION]


def test_commit_metadata_too_large_is_per_partition() -> None:
    d = Driver(GroupConfig(offset_metadata_max_bytes=3))
    t = d.next_token()
    from zkcoord.group.messages import OffsetCommitRequestPartition as P
    from zkcoord.group.messages import OffsetCommitRequestTopic as T

    req = OffsetCommitRequest(
        7, "g", -1, "", (T("t", (P(0, 1, -1, "abc"), P(1, 1, -1, "abcd"), P(2, 9, 4, None))),)
    )
    d.apply(h.handle_offset_commit(d.st, req, d.now, t))
    assert commit_codes(d, t) == [0, E.OFFSET_METADATA_TOO_LARGE, 0]
    assert sorted(d.st.view.offsets["g"]) == [("t", 0), ("t", 2)]
    assert d.st.view.offsets["g"][("t", 2)].leader_epoch == 4


def test_retention_time_writes_expiring_value_and_expires_on_time() -> None:
    d = Driver()
    d.commit({("t", 0): 1}, retention=60_000)
    assert d.records[-1][1] == OffsetCommitValue(1, -1, "", d.now, d.now + 60_000)
    assert h.expire_offsets(d.st, d.now + 59_999).records == ()
    res = d.apply(h.expire_offsets(d.st, d.now + 60_000))
    assert res.records == ((OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None))
    assert "g" not in d.st.groups


def test_retention_of_empty_group_counts_from_when_it_became_empty() -> None:
    cfg = GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1)
    d = Driver(cfg)
    (m,) = d.stable_group(1, session=300_000)
    d.commit({("t", 0): 1}, generation=1, member_id=m)
    d.advance(50_000)
    d.heartbeat(m, 1)
    d.leave(LeaveGroupMember(m))
    empty_since = d.now
    assert h.expire_offsets(d.st, empty_since + 59_999).records == ()
    res = d.apply(h.expire_offsets(d.st, empty_since + 60_000))
    assert [k for k, _ in res.records] == [OffsetCommitKey("g", "t", 0), GroupMetadataKey("g")]


def test_retention_of_stable_consumer_group_only_unsubscribed_topics() -> None:
    cfg = GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1)
    d = Driver(cfg)
    (m,) = d.stable_group(1, protocols=(("range", consumer_subscription("t")),), session=300_000)
    assert d.st.groups["g"].subscribed_topics == frozenset({"t"})
    d.commit({("t", 0): 1, ("old", 0): 2}, generation=1, member_id=m)
    res = d.apply(h.expire_offsets(d.st, d.now + 60_000))
    assert [k for k, _ in res.records] == [OffsetCommitKey("g", "old", 0)]
    assert d.st.groups["g"].state is GroupState.STABLE


def test_retention_timer_reschedules_itself() -> None:
    d = Driver(GroupConfig(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000))
    d.apply(h.load(d.st, [], d.now))
    d.commit({("t", 0): 1})
    d.advance(61_000)
    assert "g" not in d.st.groups and any(k.kind.value == "retention" for k in d.timers)


def test_describe_list_delete() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    d.commit({("x", 0): 1}, group="simple")
    t = d.next_token()
    d.apply(h.handle_describe(d.st, DescribeGroupsRequest(5, ("g", "simple", "nope")), d.now, t))
    r = d.r(t)
    assert isinstance(r, DescribeGroupsResponse)
    g, simple, nope = r.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.member_metadata, m.member_assignment) for m in g.members] == [
        (a, b"meta", f"a-{a}".encode()),
        (b, b"meta", f"a-{b}".encode()),
    ]
    assert (simple.group_state, simple.protocol_type, simple.members) == ("Empty", "", ())
    assert (nope.error_code, nope.group_state) == (0, "Dead")

    t = d.next_token()
    d.apply(h.handle_list(d.st, ListGroupsRequest(4, ("stable",)), d.now, t))
    lr = d.r(t)
    assert isinstance(lr, ListGroupsResponse) and [x.group_id for x in lr.groups] == ["g"]
    t = d.next_token()
    # v5 TypesFilter names group types (KIP-848: classic, consumer), not protocol types, case-insensitive.
    d.apply(h.handle_list(d.st, ListGroupsRequest(5, (), ("CLASSIC",)), d.now, t))
    lr = d.r(t)
    assert isinstance(lr, ListGroupsResponse) and [x.group_id for x in lr.groups] == ["g", "simple"]
    assert {x.group_type for x in lr.groups} == {"classic"}
    t = d.next_token()
    d.apply(h.handle_list(d.st, ListGroupsRequest(5, (), ("consumer",)), d.now, t))
    lr = d.r(t)
    assert isinstance(lr, ListGroupsResponse) and lr.groups == ()

    t = d.next_token()
    d.apply(h.handle_delete(d.st, DeleteGroupsRequest(2, ("g", "simple", "nope", "")), d.now, t))
    dr = d.r(t)
    assert isinstance(dr, DeleteGroupsResponse)
    assert [(x.group_id, x.error_code) for x in dr.results] == [
        ("g", E.NON_EMPTY_GROUP),
        ("simple", 0),
        ("nope", E.GROUP_ID_NOT_FOUND),
        ("", E.GROUP_ID_NOT_FOUND),
    ]
    assert "simple" not in d.st.groups and "simple" not in d.st.view.offsets
    assert d.records[-2:] == [(OffsetCommitKey("simple", "x", 0), None), (GroupMetadataKey("simple"), None)]


def test_status_checks_and_per_api_mapping() -> None:
    assert h.group_status_error("", h.JOIN_GROUP) is E.INVALID_GROUP_ID
    assert h.group_status_error(None, h.OFFSET_COMMIT) is E.INVALID_GROUP_ID
    for api in (h.OFFSET_COMMIT, h.OFFSET_FETCH, h.DESCRIBE_GROUPS, h.DELETE_GROUPS):
        assert h.group_status_error("", api) is None
    assert h.group_status_error("g", h.HEARTBEAT, active=False, loading=True) is E.COORDINATOR_NOT_AVAILABLE
    assert (
        h.group_status_error("g", h.HEARTBEAT, loading=True, coordinator=False)
        is E.COORDINATOR_LOAD_IN_PROGRESS
    )
    assert h.group_status_error("g", h.HEARTBEAT, coordinator=False) is E.NOT_COORDINATOR
    loading = E.COORDINATOR_LOAD_IN_PROGRESS
    sync = h.error_response(SyncGroupRequest(3, "g", 1, "m", None, None, None, ()), loading)
    assert sync.error_code == E.REBALANCE_IN_PROGRESS  # type: ignore[union-attr]
    beat = h.error_response(HeartbeatRequest(3, "g", 1, "m"), loading)
    assert beat.error_code == 0  # type: ignore[union-attr]
    join = h.error_response(JoinGroupRequest(7, "g", 1, 1, "m", None, "consumer", ()), E.NOT_COORDINATOR)
    assert (join.error_code, join.member_id, join.generation_id) == (16, "m", -1)  # type: ignore[union-attr]


def test_load_rebuilds_stable_group_and_offsets_then_members_expire() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    d.commit({("t", 0): 11}, generation=1, member_id=a)
    d.commit({("s", 0): 3}, group="simple")
    fresh = Driver()
    fresh.now = d.now + 5
    fresh.apply(h.load(fresh.st, list(d.records), fresh.now))
    g = fresh.st.groups["g"]
    assert (g.state, g.generation, g.protocol_name, g.leader_id) == (GroupState.STABLE, 1, "range", a)
    assert [(m.member_id, m.assignment) for m in g.members.values()] == [
        (a, f"a-{a}".encode()),
        (b, f"a-{b}".encode()),
    ]
    assert fresh.st.groups["simple"].state is GroupState.EMPTY
    assert fresh.st.view.snapshot() == d.st.view.snapshot()
    assert fetched(fresh, fresh.fetch()) == {("t", 0): (11, -1, "", 0)}
    assert fresh.r(fresh.heartbeat(a, 1)) is not None
    fresh.advance(10_000)
    assert b not in g.members


def test_replay_all_equals_incremental_view() -> None:
    d = Driver()
    d.stable_group(3)
    d.commit({("t", 0): 1})
    d.commit({("t", 0): 2}, group="x")
    d.apply(h.handle_delete(d.st, DeleteGroupsRequest(2, ("x",)), d.now, d.next_token()))
    assert replay_all(d.records).snapshot() == d.st.view.snapshot()
    assert isinstance(CoordinatorState(d.config).view.snapshot(), tuple)


def test_unload_answers_parked_requests_and_forgets_the_group() -> None:
    d = Driver()
    leader, follower = d.stable_group(2)
    d.commit({("t", 0): 1}, generation=1, member_id=leader)
    d.commit({("s", 0): 1}, group="kept")
    t = d.join(member_id=leader)  # parked: rebalance in progress
    n_records = len(d.records)
    res = d.apply(h.unload_groups(d.st, lambda g: g == "kept", d.now))
    assert res.records == () and len(d.records) == n_records
    assert d.jr(t).error_code == E.NOT_COORDINATOR
    assert "g" not in d.st.groups and "g" not in d.st.view.offsets and "g" not in d.st.view.groups
    assert "kept" in d.st.groups and not any(k.group_id == "g" for k in d.timers)
    assert d.r(d.heartbeat(follower, 1)).error_code == E.UNKNOWN_MEMBER_ID  # type: ignore[attr-defined]


def test_generation_minus_one_into_empty_group_skips_member_checks() -> None:
    d = Driver()
    assert commit_codes(d, d.commit({("t", 0): 1}, member_id="whoever", instance="i")) == [0]
    (m,) = d.stable_group(1, group="h")
    assert commit_codes(d, d.commit({("t", 0): 1}, group="h", member_id=m)) == [E.ILLEGAL_GENERATION]


def test_offset_fetch_error_response_is_kafkas_per_version() -> None:
    """Kafka 2.8 OffsetFetchRequest.getErrorResponse: before v2 the error is in every asked partition (offset -1,
    no metadata); from v2 it is the top-level error alone, with no partitions."""
    topics = (OffsetFetchRequestTopic("t", (0, 1)), OffsetFetchRequestTopic("u", (3,)))
    for code in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE):
        for version in (0, 1):
            old = h.error_response(OffsetFetchRequest(version, "g", topics), code)
            assert isinstance(old, OffsetFetchResponse)
            assert [(t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
                    for t in old.topics for p in t.partitions] == [
                ("t", 0, -1, "", code), ("t", 1, -1, "", code), ("u", 3, -1, "", code)
            ]  # fmt: skip
        for version in (2, 3, 5, 7):
            for asked in (topics, None):  # named partitions, and the fetch-all form
                new = h.error_response(OffsetFetchRequest(version, "g", asked), code)
                assert new == OffsetFetchResponse(int(code), ())


def test_deleted_partitions_lose_their_offsets_in_every_group_and_only_those() -> None:
    """Kafka's handleDeletedPartitions: every group's offsets of the deleted partitions are tombstoned; a
    simple (Empty) group left without offsets ends; a Stable group keeps its other offsets and its state."""
    cfg = GroupConfig(group_initial_rebalance_delay_ms=0)
    d = Driver(cfg)
    (m,) = d.stable_group(1, session=300_000)
    d.commit({("gone", 0): 5, ("gone", 1): 6, ("kept", 0): 7}, generation=1, member_id=m)
    d.commit({("gone", 0): 3}, group="simple")
    res = d.apply(h.delete_partition_offsets(d.st, [("gone", 0), ("gone", 1), ("never", 0)], d.now))
    assert list(res.records) == [
        (OffsetCommitKey("g", "gone", 0), None),
        (OffsetCommitKey("g", "gone", 1), None),
        (OffsetCommitKey("simple", "gone", 0), None),
        (GroupMetadataKey("simple"), None),
    ]
    assert sorted(d.st.view.offsets["g"]) == [("kept", 0)]
    assert d.st.groups["g"].state is GroupState.STABLE
    assert "simple" not in d.st.groups
    assert h.delete_partition_offsets(d.st, [("gone", 0)], d.now).records == ()  # nothing left to drop
    # replaying the log gives the same view: the tombstones are the only mutation
    assert replay_all(d.records).offsets == d.st.view.offsets


def test_deleted_partitions_lose_their_offsets_in_consumer_groups_too() -> None:
    """A consumer-protocol (KIP-848) group's offsets of a deleted topic go as a classic group's do; otherwise a
    topic created again under the name is read from the deleted one's positions."""
    w = World()
    w.hb("a", 0)
    part = OffsetCommitRequestPartition(0, 3, -1, "")
    req = OffsetCommitRequest(9, "g", 1, "a", (OffsetCommitRequestTopic("t1", (part,)),))
    w.take(h.handle_consumer_group_commit(w.st, req, w.now, 1))
    assert ("t1", 0) in w.st.view.offsets["g"] and "g" not in w.st.groups  # a consumer group's offset
    res = h.delete_partition_offsets(w.st, [("t1", 0)], w.now)
    assert list(res.records) == [(OffsetCommitKey("g", "t1", 0), None)]
    assert not w.st.view.offsets.get("g") and "g" in w.st.consumer_groups  # the group itself stays
