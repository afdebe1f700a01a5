"""The consumer rebalance protocol's core (KIP-848): group epochs, server-side assignors, the revocation dance,
fencing, timers, commit checks; and a stateful property test of random joins, leaves, heartbeats, partition
increases and clock advances: no partition ever held by two members, replay of the records == live state."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from zkcoord.errors import ErrorCode as E
from zkcoord.group import handlers as h
from zkcoord.group import messages as gm
from zkcoord.group.consumer import (
    commit_error,
    describe_consumer_group,
    handle_consumer_heartbeat,
)
from zkcoord.group.consumer_assignors import assign
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest as Hb
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatResponse
from zkcoord.group.consumer_model import MemberState
from zkcoord.group.model import ClassicGroup, CoordinatorState
from zkcoord.group.results import TimerKey, TimerKind
from zkcoord.records.offsets import decode_record, encode_record

from .consumer_world import SESSION, T1, T2, World, _as_sets

# -------------------------------------------------------------------------------------------------- scenarios


def test_a_first_member_gets_every_partition_at_epoch_one() -> None:
    w = World()
    r = w.hb("a", 0)
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "a", 1, 5000)
    assert _as_sets(r.assignment) == {T1: {0, 1, 2, 3}}
    assert w.timers[TimerKey(TimerKind.CONSUMER_SESSION, "g", "a")] == w.now + SESSION
    g = w.st.consumer_groups["g"]
    assert (g.group_epoch, g.assignment_epoch, g.state_name()) == (1, 1, "Stable")


def test_a_partition_reaches_a_new_owner_only_after_the_old_one_released_it() -> None:
    w = World()
    a = w.hb("a", 0)
    b = w.hb("b", 0)
    # b is at the new epoch but its partitions are still a's: it gets nothing yet (UNRELEASED_PARTITIONS).
    assert b.member_epoch == 2 and _as_sets(b.assignment) == {}
    g = w.st.consumer_groups["g"]
    assert g.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    target_b = g.target["b"][T1]
    # a is told to give them up and keeps its epoch while it has not (UNREVOKED_PARTITIONS).
    a = w.hb("a", 1, {T1: {0, 1, 2, 3}})
    assert a.member_epoch == 1 and _as_sets(a.assignment) == {T1: {0, 1, 2, 3} - target_b}
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert w.timers[TimerKey(TimerKind.CONSUMER_REBALANCE, "g", "a")] == w.now + SESSION
    # b asks again: still nothing, a has not confirmed.
    assert _as_sets(w.hb("b", 2, {}).assignment) == {}
    a = w.hb("a", 1, {T1: {0, 1, 2, 3} - target_b})
    assert a.member_epoch == 2 and g.members["a"].state is MemberState.STABLE
    assert TimerKey(TimerKind.CONSUMER_REBALANCE, "g", "a") not in w.timers
    b = w.hb("b", 2, {})
    assert _as_sets(b.assignment) == {T1: target_b} and len(target_b) == 2
    assert g.state_name() == "Stable"


def test_a_member_asked_to_revoke_more_gets_a_whole_rebalance_timeout_again() -> None:
    """Kafka's maybeReconcile reschedules the rebalance timeout whenever the member's assignment changes while it
    has partitions to give up. Found by the state machine below: a member that revoked in time and was asked in the
    same answer for one more partition was fenced on its first deadline, and its partitions went to another member
    while it still held what it had just been told to keep."""
    w = World()
    w.hb("a", 0, topics=("t1", "t2"))
    w.hb("b", 0, topics=("t1",))
    g = w.st.consumer_groups["g"]
    a = w.hb("a", 1, {T1: {0, 1, 2, 3}, T2: {0, 1}})
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    first_deadline = w.now + SESSION
    assert w.timers[TimerKey(TimerKind.CONSUMER_REBALANCE, "g", "a")] == first_deadline
    w.advance(SESSION - 1000)
    w.hb("c", 0, topics=("t1", "t2"))  # a third member: a must also give up part of t2
    kept = _as_sets(a.assignment)
    a = w.hb("a", 1, kept)  # a revoked what it was told, and is told to give up more
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS and a.error_code == 0
    assert w.timers[TimerKey(TimerKind.CONSUMER_REBALANCE, "g", "a")] == w.now + SESSION > first_deadline
    w.advance(1000)  # past the first deadline
    assert "a" in g.members


def test_epochs_are_fenced_as_kafka_does() -> None:
    w = World()
    w.hb("a", 0)
    assert w.hb("a", 5, {}).error_code == E.FENCED_MEMBER_EPOCH
    w.hb("b", 0)
    w.hb("a", 1, {T1: {0, 1, 2, 3}})  # now unrevoked at epoch 1
    owned_after = _as_sets(w.hb("a", 1, {T1: {0, 1}}).assignment) or {T1: {0, 1}}
    assert w.st.consumer_groups["g"].members["a"].member_epoch == 2
    # A lost response: the previous epoch with owned partitions all still assigned is accepted...
    assert w.hb("a", 1, owned_after).error_code == 0
    # ...not with a partition it no longer has, nor without saying what it owns.
    assert w.hb("a", 1, {T1: {0, 1, 2, 3}}).error_code == E.FENCED_MEMBER_EPOCH
    assert w.hb("a", 1, None).error_code == E.FENCED_MEMBER_EPOCH
    assert w.hb("zz", 1, {}).error_code == E.UNKNOWN_MEMBER_ID


def test_a_member_rejoining_with_epoch_zero_releases_what_it_held_at_once() -> None:
    w = World()
    w.hb("a", 0)
    w.hb("b", 0)
    w.hb("a", 1, {T1: {0, 1, 2, 3}})  # a must revoke: its rebalance timer runs
    assert TimerKey(TimerKind.CONSUMER_REBALANCE, "g", "a") in w.timers
    r = w.hb("a", 0)  # fenced client-side, it dropped everything and rejoins under its id
    assert r.error_code == 0 and TimerKey(TimerKind.CONSUMER_REBALANCE, "g", "a") not in w.timers
    b = w.hb("b", 2, {})
    assert len(_as_sets(b.assignment).get(T1, ())) == 2  # b did not wait for a's revocation
    assert w.replayed().consumer_groups == w.st.consumer_groups


def test_leave_session_expiry_and_rebalance_timeout_remove_members() -> None:
    w = World()
    w.hb("a", 0)
    w.hb("b", 0)
    left = w.hb("b", -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    g = w.st.consumer_groups["g"]
    assert set(g.members) == {"a"} and g.group_epoch == 3
    assert w.hb("b", -1).error_code == E.UNKNOWN_MEMBER_ID
    # a session expiry
    w.hb("c", 0)
    w.advance(SESSION - 1)
    w.hb("a", 1, {T1: {0, 1, 2, 3}})  # a heartbeats (and is told to revoke), c does not
    w.advance(1)
    assert set(g.members) == {"a"}
    # a never confirms its revocation: fenced at the rebalance timeout, even though its session is alive
    w.hb("d", 0, rebalance=10_000)
    w.hb(
        "a",
        g.members["a"].member_epoch,
        _as_sets(((T1, tuple(sorted(g.members["a"].assigned.get(T1, ())))),)),
    )
    w.advance(SESSION - 10)
    assert "a" in g.members or g.members  # still within the session
    w.advance(10)
    assert "a" not in g.members


def test_a_partition_increase_bumps_the_epoch_and_spreads_the_new_partitions() -> None:
    w = World()
    w.hb("a", 0)
    w.hb("b", 0)
    w.hb("a", 1, {T1: {0, 1, 2, 3}})
    w.hb("a", 1, {T1: {0, 1}})
    w.hb("b", 2, {})
    epoch = w.st.consumer_groups["g"].group_epoch
    w.topics["t1"] = (T1, 6)
    r = w.hb("a", 2, {T1: {0, 1}})
    g = w.st.consumer_groups["g"]
    assert g.group_epoch == epoch + 1 and g.topics["t1"].partitions == 6
    assert sum(len(t.get(T1, ())) for t in g.target.values()) == 6
    assert r.member_epoch == epoch + 1


def test_invalid_requests_get_kafkas_messages() -> None:
    w = World()
    r = w.hb("a", 0, rebalance=-1)
    assert (r.error_code, r.error_message) == (
        E.INVALID_REQUEST,
        "RebalanceTimeoutMs must be provided in first request.",
    )
    assert w.hb("a", 0, group="").error_message == "GroupId can't be empty."
    assert w.hb("a", 0, {T1: {1}}).error_message == "TopicPartitions must be empty when (re-)joining."
    assert w.hb("", 3, {}).error_message == "MemberId can't be empty."
    assert w.hb("a", -3, {}).error_code == E.INVALID_REQUEST
    assert w.hb("a", 0, server_assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR
    assert w.records == []  # nothing written for a refused request


def test_a_v0_member_gets_the_coordinators_id_and_assignors_can_be_chosen() -> None:
    w = World(group_consumer_assignors=("uniform", "range"))
    req = Hb(
        0,
        "g",
        "",
        0,
        rebalance_timeout_ms=1000,
        subscribed_topic_names=("t1", "t2"),
        topic_partitions=(),
        server_assignor="range",
    )
    result = handle_consumer_heartbeat(w.st, req, w.now, 1, w.topics.get, "uuid-1")
    resp = result.responses[0][1]
    assert isinstance(resp, ConsumerGroupHeartbeatResponse) and resp.member_id == "uuid-1"
    described = describe_consumer_group(w.st, "g")
    assert described.assignor_name == "range" and described.members[0].subscribed_topic_names == ("t1", "t2")
    assert {tp.topic_name for tp in described.members[0].assignment} == {"t1", "t2"}


def test_offset_commits_are_checked_against_member_epochs() -> None:
    w = World()
    w.hb("a", 0)
    assert commit_error(w.st, "g", "a", 1, 9) is None
    assert commit_error(w.st, "g", "a", 0, 9) == E.STALE_MEMBER_EPOCH
    assert commit_error(w.st, "g", "a", 1, 8) == E.UNSUPPORTED_VERSION
    assert commit_error(w.st, "g", "x", 1, 9) == E.UNKNOWN_MEMBER_ID
    assert commit_error(w.st, "g", "", -1, 9) == E.UNKNOWN_MEMBER_ID  # an admin commit into a live group
    assert commit_error(w.st, "other", "", -1, 2) is None  # not a consumer group: the classic rules apply


def test_list_describe_and_delete_know_the_group_type() -> None:
    w = World()
    w.hb("a", 0)
    w.st.groups["old"] = ClassicGroup("old", 0)

    def ask(req: object) -> object:
        handler = {
            gm.ListGroupsRequest: h.handle_list,
            gm.DescribeGroupsRequest: h.handle_describe,
            gm.DeleteGroupsRequest: h.handle_delete,
        }[type(req)]
        result = handler(w.st, req, w.now, 1)  # type: ignore[operator]
        w.records.extend(result.records)
        return result.responses[0][1]

    listed = ask(gm.ListGroupsRequest(5))
    assert {(g.group_id, g.group_type, g.group_state) for g in listed.groups} == {  # type: ignore[attr-defined]
        ("g", "consumer", "Stable"),
        ("old", "classic", "Empty"),
    }
    only = ask(gm.ListGroupsRequest(5, (), ("Consumer",)))
    assert [g.group_id for g in only.groups] == ["g"]  # type: ignore[attr-defined]
    described = ask(gm.DescribeGroupsRequest(5, ("g",)))
    # Kafka 4's DescribeGroups below v6: a consumer group is not a classic group, so it is Dead, with no error
    assert (described.groups[0].error_code, described.groups[0].group_state) == (0, "Dead")  # type: ignore[attr-defined]
    assert ask(gm.DeleteGroupsRequest(2, ("g",))).results[0].error_code == E.NON_EMPTY_GROUP  # type: ignore[attr-defined]
    w.hb("a", -1)
    assert ask(gm.DeleteGroupsRequest(2, ("g",))).results[0].error_code == 0  # type: ignore[attr-defined]
    assert "g" not in w.st.consumer_groups
    assert w.replayed().consumer_groups == {}


def test_a_log_compacted_as_kafka_does_replays_to_the_same_groups() -> None:
    """A member's metadata rewritten after its assignment (a resubscription while it still has to revoke): Kafka's
    compaction then puts the assignment record before the metadata record. Replay must not lose the member's
    partitions (it did: an assignment for a member not yet known was dropped)."""
    w = World()
    w.hb("a", 0)
    w.hb("b", 0)
    w.hb("a", 1, {T1: {0, 1, 2, 3}})  # a now UNREVOKED_PARTITIONS
    w.hb("a", 1, {T1: {0, 1, 2, 3}}, topics=("t1", "t2"))  # still holding: only its metadata changes
    encoded = [encode_record(r) for r in w.records]
    last = {k: i for i, (k, _) in enumerate(encoded)}
    compacted = [decode_record(k, v) for i, (k, v) in enumerate(encoded) if last[k] == i and v is not None]
    fresh = CoordinatorState(w.st.config)
    h.load(fresh, compacted, w.now)
    assert fresh.consumer_groups == w.st.consumer_groups


def test_unload_forgets_consumer_groups_the_node_no_longer_coordinates() -> None:
    w = World()
    w.hb("a", 0)
    w.hb("b", 0, group="kept")
    result = h.unload_groups(w.st, lambda gid: gid == "kept", w.now)
    assert set(w.st.consumer_groups) == {"kept"} and result.records == ()
    assert TimerKey(TimerKind.CONSUMER_SESSION, "g", "a") in {op.key for op in result.timers}


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_assignors_cover_every_partition_once_and_balance(name: str) -> None:
    subs = {f"m{i}": frozenset({T1, T2}) for i in range(3)}
    out = assign(name, subs, {T1: 4, T2: 2}, {})
    owned = sorted((t, p) for a in out.values() for t, ps in a.items() for p in ps)
    assert owned == sorted([(T1, p) for p in range(4)] + [(T2, p) for p in range(2)])
    counts = sorted(sum(len(ps) for ps in a.values()) for a in out.values())
    assert counts == [2, 2, 2] if name == "uniform" else sum(counts) == 6


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(("uniform", "range")),
    subs=st.dictionaries(
        st.sampled_from([f"m{i}" for i in range(8)]),
        st.frozensets(st.sampled_from(("x", "y", "z")), min_size=1),
        min_size=1,
    ),
    counts=st.fixed_dictionaries({"x": st.integers(0, 9), "y": st.integers(0, 9), "z": st.integers(0, 9)}),
    churn=st.sets(st.sampled_from([f"m{i}" for i in range(8)])),
)
def test_assignors_give_each_subscribed_partition_to_one_subscriber(
    name: str, subs: dict[str, frozenset[str]], counts: dict[str, int], churn: set[str]
) -> None:
    previous = assign(name, {m: s for m, s in subs.items() if m not in churn} or subs, counts, {})
    out = assign(name, subs, counts, previous)
    assert out == assign(name, dict(reversed(list(subs.items()))), counts, previous)  # deterministic
    given_to = [(t, p, m) for m, a in out.items() for t, ps in a.items() for p in ps]
    assert all(t in subs[m] for t, _, m in given_to)
    wanted = sorted((t, p) for t in counts if any(t in s for s in subs.values()) for p in range(counts[t]))
    assert sorted((t, p) for t, p, _ in given_to) == wanted
    if name == "uniform" and len(set(subs.values())) == 1:
        loads = [sum(len(ps) for ps in out.get(m, {}).values()) for m in subs]
        assert max(loads) - min(loads) <= 1


def test_uniform_is_sticky() -> None:
    subs = {"a": frozenset({T1}), "b": frozenset({T1})}
    before = assign("uniform", subs, {T1: 6}, {})
    after = assign("uniform", {**subs, "c": frozenset({T1})}, {T1: 6}, before)
    for m in ("a", "b"):
        assert after[m][T1] <= before[m][T1]  # nothing moves between a and b, each gives one to c
    assert len(after["c"][T1]) == 2


# ------------------------------------------------------------------------------------------- stateful property


@dataclass
class Client:
    """A well-behaved consumer: holds what it was given until its next heartbeat, where it reports what it keeps."""

    epoch: int = 0
    holding: dict[str, set[int]] = field(default_factory=dict)  # may still hold revoked partitions
    kept: dict[str, set[int]] = field(default_factory=dict)  # the last assignment it was sent
    last_ok: int = 0
    joined: bool = False


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.w = World(group_consumer_session_timeout_ms=SESSION)
        self.clients = {m: Client() for m in ("m0", "m1", "m2", "m3")}

    def _answer(self, m: str, r: ConsumerGroupHeartbeatResponse) -> None:
        c = self.clients[m]
        if r.error_code in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.clients[m] = Client()  # the client gives up everything and rejoins later
            return
        assert r.error_code == 0, r
        c.epoch, c.last_ok, c.joined = r.member_epoch, self.w.now, True
        if r.assignment is not None:
            new = _as_sets(r.assignment)
            for t, ps in new.items():
                c.holding.setdefault(t, set()).update(ps)
            c.kept = new

    @rule(
        m=st.sampled_from(("m0", "m1", "m2", "m3")), topics=st.sampled_from((("t1",), ("t1", "t2"), ("t2",)))
    )
    def join(self, m: str, topics: tuple[str, ...]) -> None:
        if self.clients[m].joined:
            return
        self.clients[m] = Client()
        self._answer(m, self.w.hb(m, 0, topics=topics))

    @rule(m=st.sampled_from(("m0", "m1", "m2", "m3")))
    def heartbeat(self, m: str) -> None:
        c = self.clients[m]
        if not c.joined:
            return
        c.holding = {t: set(ps) for t, ps in c.kept.items()}  # revocation done before the next heartbeat
        self._answer(m, self.w.hb(m, c.epoch, c.kept))

    @rule(m=st.sampled_from(("m0", "m1", "m2", "m3")), topics=st.sampled_from((("t1",), ("t1", "t2"))))
    def resubscribe(self, m: str, topics: tuple[str, ...]) -> None:
        c = self.clients[m]
        if c.joined:
            c.holding = {t: set(ps) for t, ps in c.kept.items()}
            self._answer(m, self.w.hb(m, c.epoch, c.kept, topics=topics))

    @rule(m=st.sampled_from(("m0", "m1", "m2", "m3")))
    def leave(self, m: str) -> None:
        if self.clients[m].joined:
            self.clients[m] = Client()  # stops consuming, then says so
            r = self.w.hb(m, -1)
            assert r.error_code in (0, E.UNKNOWN_MEMBER_ID)

    @rule(ms=st.sampled_from((1_000, 5_000, 20_000, SESSION)))
    def advance(self, ms: int) -> None:
        self.w.now += ms
        for m, c in self.clients.items():
            if c.joined and self.w.now - c.last_ok >= SESSION:
                self.clients[m] = Client()  # a client whose session lapsed treats its partitions as lost
        self.w.now -= ms
        self.w.advance(ms)

    @rule(extra=st.integers(1, 3))
    def grow(self, extra: int) -> None:
        tid, count = self.w.topics["t2"]
        self.w.topics["t2"] = (tid, min(count + extra, 12))

    @invariant()
    def no_partition_is_held_twice(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for m, c in sorted(self.clients.items()):
            for t, ps in c.holding.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} held by {seen[(t, p)]} and {m}"
                    seen[(t, p)] = m
        g = self.w.st.consumer_groups.get("g")
        if g is not None:
            owned: dict[tuple[str, int], str] = {}
            for mid, member in sorted(g.members.items()):
                for a in (member.assigned, member.pending_revocation):
                    for t, ps in a.items():
                        for p in ps:
                            assert (t, p) not in owned
                            owned[(t, p)] = mid
            assert owned == g.owners

    @invariant()
    def replay_equals_live_state(self) -> None:
        assert self.w.replayed().consumer_groups == self.w.st.consumer_groups

    @invariant()
    def a_compacted_log_replays_to_the_live_state(self) -> None:
        """Kafka's compaction keeps each key's last record at its own position and drops tombstones; zkcoord's
        ZooKeeper store keeps it where the key first appeared. Both replay to the live groups."""
        encoded = [encode_record(r) for r in self.w.records]
        last = {k: i for i, (k, _) in enumerate(encoded)}
        kafka_order = [(k, v) for i, (k, v) in enumerate(encoded) if last[k] == i and v is not None]
        latest: dict[bytes, bytes | None] = {}
        for k, v in encoded:
            latest[k] = v
        first_order = [(k, v) for k, v in latest.items() if v is not None]
        for log in (kafka_order, first_order):
            fresh = CoordinatorState(self.w.st.config)
            h.load(fresh, [decode_record(k, v) for k, v in log], self.w.now)
            assert fresh.consumer_groups == self.w.st.consumer_groups


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestConsumerGroupMachine = ConsumerGroupMachine.TestCase


@settings(max_examples=300, deadline=None)
@given(seeds=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=12))
def test_any_sequence_of_fuzzed_heartbeats_is_answered_and_replays(seeds: list[int]) -> None:
    """The wire fuzzer's heartbeats (edge values everywhere), in sequence into one coordinator: every one is
    answered without an exception, a refused one writes nothing, and replay still equals the live groups."""
    import random

    from zkcoord.testing.wire_fuzz import _consumer_group_request

    w = World()
    w.topics["fuzz-t"] = ("ab" * 16, 3)
    for seed in seeds:
        req = _consumer_group_request(random.Random(seed), 68, seed % 2)
        req = replace(req, group_id=req.group_id[:1] or "g", member_id=req.member_id[:1])  # collide often
        if seed % 3:  # two in three made acceptable in the fields the validation refuses most, to get further
            req = replace(req, subscribed_topic_regex=None, server_assignor=None, rebalance_timeout_ms=30_000,
                          topic_partitions=() if req.member_epoch == 0 else req.topic_partitions)  # fmt: skip
        before = len(w.records)
        w.token += 1
        result = handle_consumer_heartbeat(w.st, req, w.now, w.token, w.topics.get, f"id-{seed}")
        w.take(result)
        ((_, resp),) = result.responses
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        if resp.error_code:
            assert len(w.records) == before
        w.advance(seed % 50_000)
    assert w.replayed().consumer_groups == w.st.consumer_groups
