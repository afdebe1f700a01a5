"""Online migration between the classic and the consumer protocol (KIP-848), in the pure core: the upgrade of a
classic group by its first consumer-protocol member, classic members hosted in a consumer group, the downgrade
when the last consumer-protocol member leaves, the policy; and a stateful property test mixing classic (eager) and
consumer-protocol members: no partition in two members' hands or current assignments at once, replay == live."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from zkcoord.errors import ErrorCode as E
from zkcoord.group import consumer_classic as cc
from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest as Hb
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatResponse
from zkcoord.group.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import Result, Schedule, TimerKey, TimerKind
from zkcoord.group.state import GroupState
from zkcoord.records.consumer_groups import ConsumerGroupKey, ConsumerMemberKey
from zkcoord.records.offsets import GroupMetadataKey, Record, decode_record, encode_record

TID = "ab" * 16
PARTS = 6
SESSION = 10_000
REBALANCE = 30_000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0, as kafka-python sends it (no owned partitions)."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


PROTOCOLS = (("range", subscription("t")),)


class World:
    """One coordinator: state, topic "t" (6 partitions), clock, timers, every record written."""

    def __init__(self, **config: object) -> None:
        cfg = {"group_initial_rebalance_delay_ms": 0, "group_consumer_session_timeout_ms": SESSION}
        cfg.update(config)  # type: ignore[arg-type]
        self.st = CoordinatorState(GroupConfig(**cfg))  # type: ignore[arg-type]
        self.topics = {"t": (TID, PARTS)}
        self.now = 1_000
        self.token = 0
        self.uuids = 0
        self.records: list[Record] = []
        self.timers: dict[TimerKey, int] = {}
        self.answers: dict[int, object] = {}

    def take(self, result: Result) -> None:
        self.records.extend(result.records)
        for token, resp in result.responses:
            self.answers[token] = resp
        for op in result.timers:
            if isinstance(op, Schedule):
                self.timers[op.key] = op.deadline_ms
            else:
                self.timers.pop(op.key, None)

    def _next(self) -> int:
        self.token += 1
        return self.token

    # classic requests, dispatched as the service does (a consumer group's id goes to consumer_classic)
    def join(
        self,
        member: str,
        protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
        ptype: str = "consumer",
        instance: str | None = None,
    ) -> int:
        t = self._next()
        self.uuids += 1
        req = JoinGroupRequest(5, "g", SESSION, REBALANCE, member, instance, ptype, protocols)
        uuid = f"c{self.uuids}"
        if "g" in self.st.consumer_groups:
            self.take(cc.handle_join(self.st, req, self.now, t, uuid, self.topics.get))
        else:
            self.take(h.handle_join(self.st, req, self.now, t, uuid))
        return t

    def sync(
        self, member: str, gen: int, assignments: tuple[tuple[str, bytes], ...] = (), name: str | None = None
    ) -> int:
        t = self._next()
        req = SyncGroupRequest(5, "g", gen, member, None, "consumer", name, assignments)
        self.take(h.handle_sync(self.st, req, self.now, t))
        return t

    def heartbeat(self, member: str, gen: int) -> HeartbeatResponse:
        t = self._next()
        self.take(h.handle_heartbeat(self.st, HeartbeatRequest(4, "g", gen, member), self.now, t))
        r = self.answers[t]
        assert isinstance(r, HeartbeatResponse)
        return r

    def leave(self, member: str) -> int:
        t = self._next()
        self.take(
            h.handle_leave(self.st, LeaveGroupRequest(3, "g", (LeaveGroupMember(member),)), self.now, t)
        )
        return t

    def hb(
        self, member: str, epoch: int, owned: dict[str, set[int]] | None = None
    ) -> ConsumerGroupHeartbeatResponse:
        join = epoch == 0
        req = Hb(
            api_version=1,
            group_id="g",
            member_id=member,
            member_epoch=epoch,
            rebalance_timeout_ms=REBALANCE if join else -1,
            subscribed_topic_names=("t",) if join else None,
            topic_partitions=()
            if join
            else tuple((t, tuple(sorted(ps))) for t, ps in sorted((owned or {}).items()) if ps),
        )
        t = self._next()
        self.take(cc.handle_consumer_heartbeat(self.st, req, self.now, t, self.topics.get, "x"))
        r = self.answers[t]
        assert isinstance(r, ConsumerGroupHeartbeatResponse)
        return r

    def advance(self, ms: int) -> None:
        self.now += ms
        for key, deadline in sorted(
            self.timers.items(), key=lambda kv: (kv[1], kv[0].kind.value, kv[0].member_id)
        ):
            if deadline <= self.now and self.timers.get(key) == deadline:
                del self.timers[key]
                self.take(h.on_timer(self.st, key, self.now))

    def list_type(self) -> str:
        t = self._next()
        self.take(h.handle_list(self.st, ListGroupsRequest(5), self.now, t))
        r = self.answers[t]
        assert isinstance(r, ListGroupsResponse)
        (g,) = [g for g in r.groups if g.group_id == "g"]
        return g.group_type  # type: ignore[no-any-return]

    def check_replay(self) -> None:
        fresh = CoordinatorState(self.st.config)
        h.load(fresh, [decode_record(*encode_record(r)) for r in self.records], self.now)
        assert fresh.consumer_groups == self.st.consumer_groups
        assert fresh.view.snapshot() == self.st.view.snapshot()
        assert not set(fresh.view.groups) & set(fresh.consumer_groups)  # one kind of group per id, stored
        assert set(fresh.groups) & set(fresh.consumer_groups) == set()


def owned_once(w: World) -> None:
    """No partition in two members' current assignments (assigned or pending revocation)."""
    g = w.st.consumer_groups.get("g")
    if g is None:
        return
    seen: dict[tuple[str, int], str] = {}
    for mid, m in sorted(g.members.items()):
        for a in (m.assigned, m.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {mid}"
                    seen[(t, p)] = mid


def classic_group(w: World, n: int) -> dict[str, int]:
    """n kafka-python-like members (eager, range over topic "t") in a Stable classic group: member -> generation;
    the leader gives member i partitions i, i+n, ..."""
    ids = []
    for _ in range(n):
        r = w.answers[w.join("")]
        assert isinstance(r, JoinGroupResponse) and r.error_code == E.MEMBER_ID_REQUIRED
        ids.append(r.member_id)
        w.join(r.member_id)
    for _ in range(5):  # the initial delay (0 here, re-armed once per new member) completes the join
        w.advance(0)
    gen = w.st.groups["g"].generation
    assignments = tuple(
        (mid, cc.encode_assignment(0, {"t": tuple(range(i, PARTS, n))})) for i, mid in enumerate(ids)
    )
    leader = w.st.groups["g"].leader_id
    for mid in ids:
        w.sync(mid, gen, assignments if mid == leader else ())
    assert w.st.groups["g"].state is GroupState.STABLE
    return dict.fromkeys(ids, gen)


# --------------------------------------------------------------------------------------------------- upgrade


def test_a_consumer_member_upgrades_a_classic_group_keeping_every_assignment() -> None:
    w = World()
    gens = classic_group(w, 2)
    a, b = gens
    before = len(w.records)
    r = w.hb("c", 0)
    assert (r.error_code, r.member_epoch) == (0, 2)  # group epoch = generation 1, bumped by the new member
    assert r.assignment == ()  # everything is still owned by the classic members: nothing moves yet
    assert "g" not in w.st.groups and w.list_type() == "consumer"
    written = w.records[before:]
    assert written[0] == (GroupMetadataKey("g"), None)  # Kafka: the classic group's tombstone first
    kinds = [
        (type(k).__name__, k.version)
        for k, _ in written[1:]
        if isinstance(k, (ConsumerGroupKey, ConsumerMemberKey))
    ]
    assert kinds[:3] == [("ConsumerMemberKey", 5), ("ConsumerMemberKey", 5), ("ConsumerGroupKey", 3)]
    g = w.st.consumer_groups["g"]
    for i, mid in enumerate((a, b)):
        m = g.members[mid]
        assert m.metadata.classic is not None and m.metadata.classic.session_timeout_ms == SESSION
        assert m.member_epoch == 1 and m.assigned == {TID: frozenset(range(i, PARTS, 2))}
        assert w.timers[TimerKey(TimerKind.CONSUMER_SESSION, "g", mid)] == w.now + SESSION
    owned_once(w)
    w.check_replay()


def test_hosted_classic_members_release_before_the_consumer_member_gets_anything() -> None:
    w = World()
    gens = classic_group(w, 2)
    w.hb("c", 0)
    holdings: dict[str, set[int]] = {mid: set(range(i, PARTS, 2)) for i, mid in enumerate(gens)}
    holdings["c"] = set()
    c_epoch = 2
    for _round in range(6):
        for mid in list(gens):
            if w.heartbeat(mid, gens[mid]).error_code == E.REBALANCE_IN_PROGRESS:
                holdings[mid] = set()  # eager: revokes everything, then rejoins
                jr = w.answers[w.join(mid)]
                assert isinstance(jr, JoinGroupResponse) and jr.error_code == 0, jr
                assert (jr.leader, jr.members, jr.protocol_name) == ("", (), "range")
                gens[mid] = jr.generation_id
                sr = w.answers[w.sync(mid, jr.generation_id, name="range")]
                assert isinstance(sr, SyncGroupResponse) and sr.error_code == 0, sr
                holdings[mid] = set(cc.parse_assignment(sr.assignment).get("t", ()))
            _disjoint(holdings)
        r = w.hb("c", c_epoch, {TID: holdings["c"]})
        assert r.error_code == 0
        c_epoch = r.member_epoch
        if r.assignment is not None:
            holdings["c"] = set(dict(r.assignment).get(TID, ()))
        _disjoint(holdings)
        owned_once(w)
    assert sorted(len(v) for v in holdings.values()) == [2, 2, 2]  # balanced, every partition owned once
    assert w.st.consumer_groups["g"].state_name() == "Stable"
    w.check_replay()


def _disjoint(holdings: dict[str, set[int]]) -> None:
    seen: dict[int, str] = {}
    for mid, ps in holdings.items():
        for p in ps:
            assert p not in seen, f"partition {p} held by {seen[p]} and {mid}"
            seen[p] = mid


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_a_policy_without_upgrade_refuses_the_consumer_member(policy: str) -> None:
    w = World(group_consumer_migration_policy=policy)
    classic_group(w, 1)
    before = len(w.records)
    r = w.hb("c", 0)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
    assert (
        len(w.records) == before
        and w.st.groups["g"].state is GroupState.STABLE
        and w.list_type() == "classic"
    )


def test_a_classic_group_of_another_protocol_type_is_not_upgraded() -> None:
    w = World()
    w.join("", ptype="connect")
    r = w.answers[1]
    assert isinstance(r, JoinGroupResponse)
    w.join(r.member_id, ptype="connect")
    assert w.hb("c", 0).error_code == E.GROUP_ID_NOT_FOUND
    assert "g" in w.st.groups and "g" not in w.st.consumer_groups


def test_a_parked_join_is_told_to_rejoin_when_the_group_is_upgraded() -> None:
    w = World()
    gens = classic_group(w, 2)
    a, _b = gens
    w.join(a)  # a rebalance starts: a parked, waiting for b
    parked = w.token
    assert parked not in w.answers
    w.hb("c", 0)
    r = w.answers[parked]
    assert isinstance(r, JoinGroupResponse) and r.error_code == E.REBALANCE_IN_PROGRESS
    owned_once(w)
    w.check_replay()


def test_an_empty_classic_group_gives_way_with_its_metadata_tombstoned_and_its_offsets_kept() -> None:
    """Kafka's maybeDeleteEmptyClassicGroup: a replay must not find a classic and a consumer group under one id."""
    from zkcoord.group.model import replay
    from zkcoord.records.offsets import OffsetCommitKey, OffsetCommitValue

    w = World()
    gens = classic_group(w, 1)
    (a,) = gens
    commit = (OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, -1, "", 1))
    w.records.append(commit)
    replay(w.st.view, commit)
    w.leave(a)
    assert w.st.groups["g"].state is GroupState.EMPTY and "g" in w.st.view.groups
    before = len(w.records)
    assert w.hb("c", 0).error_code == 0
    assert w.records[before] == (GroupMetadataKey("g"), None)
    assert "g" not in w.st.groups and "g" not in w.st.view.groups and w.list_type() == "consumer"
    assert w.st.view.offsets["g"][("t", 0)].offset == 5
    w.check_replay()


# ------------------------------------------------------------------------------------- hosted classic members


def test_hosted_classic_requests_are_checked_as_kafka_does() -> None:
    w = World()
    gens = classic_group(w, 1)
    (a,) = gens
    w.hb("c", 0)
    assert w.heartbeat(a, 7).error_code == E.ILLEGAL_GENERATION
    assert w.heartbeat("nobody", 1).error_code == E.UNKNOWN_MEMBER_ID
    assert w.heartbeat("c", 2).error_code == E.UNKNOWN_MEMBER_ID  # a consumer-protocol member
    assert w.heartbeat(a, 1).error_code == E.REBALANCE_IN_PROGRESS  # the group epoch moved on
    assert TimerKey(TimerKind.CLASSIC_JOIN, "g", a) in w.timers
    sr = w.answers[w.sync(a, 1, name="roundrobin")]
    assert isinstance(sr, SyncGroupResponse) and sr.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    sr = w.answers[w.sync(a, 1, name="range")]
    assert isinstance(sr, SyncGroupResponse) and sr.error_code == E.REBALANCE_IN_PROGRESS
    jr = w.answers[w.join("", protocols=(("roundrobin", subscription("t")),))]
    assert isinstance(jr, JoinGroupResponse) and jr.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    jr = w.answers[w.join("", ptype="connect")]
    assert isinstance(jr, JoinGroupResponse) and jr.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    jr = w.answers[w.join("", protocols=(("range", b"\x00"),))]  # MEMBER_ID_REQUIRED comes first
    assert isinstance(jr, JoinGroupResponse) and jr.error_code == E.MEMBER_ID_REQUIRED
    jr = w.answers[w.join(jr.member_id, protocols=(("range", b"\x00"),))]
    assert isinstance(jr, JoinGroupResponse) and jr.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    w.check_replay()


def test_a_classic_member_that_never_rejoins_is_fenced_after_its_rebalance_timeout() -> None:
    w = World()
    gens = classic_group(w, 1)
    (a,) = gens
    w.hb("c", 0)
    assert w.heartbeat(a, 1).error_code == E.REBALANCE_IN_PROGRESS
    for _ in range(3):  # it heartbeats on but does not rejoin: the deadline does not move
        w.now += REBALANCE // 4
        assert w.heartbeat(a, 1).error_code == E.REBALANCE_IN_PROGRESS
        w.hb("c", w.st.consumer_groups["g"].members["c"].member_epoch, {})
    w.advance(REBALANCE // 4)
    assert a not in w.st.consumer_groups["g"].members
    w.check_replay()


def test_a_classic_member_leaving_a_consumer_group_bumps_the_epoch() -> None:
    w = World()
    gens = classic_group(w, 2)
    a, _b = gens
    w.hb("c", 0)
    epoch = w.st.consumer_groups["g"].group_epoch
    t = w.leave(a)
    assert w.answers[t].members[0].error_code == 0  # type: ignore[attr-defined]
    t = w.leave("c")  # a consumer-protocol member cannot leave with LeaveGroup
    assert w.answers[t].members[0].error_code == E.UNKNOWN_MEMBER_ID  # type: ignore[attr-defined]
    g = w.st.consumer_groups["g"]
    assert a not in g.members and g.group_epoch == epoch + 1
    w.check_replay()


# ------------------------------------------------------------------------------------------------- downgrade


def test_the_last_consumer_member_leaving_downgrades_the_group_which_rebalances() -> None:
    w = World()
    gens = classic_group(w, 2)
    a, b = gens
    w.hb("c", 0)
    epoch = w.st.consumer_groups["g"].group_epoch
    before = len(w.records)
    r = w.hb("c", -1)
    assert (r.error_code, r.member_epoch) == (0, -1)
    assert "g" not in w.st.consumer_groups and w.list_type() == "classic"
    classic = w.st.groups["g"]
    assert classic.generation == epoch and classic.state is GroupState.PREPARING_REBALANCE
    assert sorted(classic.members) == sorted((a, b))
    written = w.records[before:]
    assert isinstance(written[-1][0], GroupMetadataKey) and written[-1][1] is not None  # after the tombstones
    assert all(v is None for _k, v in written[:-1])
    assert w.heartbeat(a, epoch).error_code == E.REBALANCE_IN_PROGRESS
    for mid in (a, b):
        w.join(mid)
    jr = w.answers[w.token]
    assert isinstance(jr, JoinGroupResponse) and jr.error_code == 0 and jr.generation_id == epoch + 1
    w.check_replay()


def test_with_the_upgrade_policy_the_consumer_member_just_leaves() -> None:
    w = World(group_consumer_migration_policy="upgrade")
    classic_group(w, 2)
    w.hb("c", 0)
    w.hb("c", -1)
    assert (
        "g" in w.st.consumer_groups
        and "g" not in w.st.groups
        and "c" not in w.st.consumer_groups["g"].members
    )
    w.check_replay()


def test_the_consumer_members_session_timeout_downgrades_too() -> None:
    w = World()
    gens = classic_group(w, 1)
    (a,) = gens
    w.hb("c", 0)
    for _ in range(4):
        w.advance(SESSION // 3)
        w.heartbeat(a, 1)  # keeps its own session
    assert "g" in w.st.groups and "g" not in w.st.consumer_groups
    w.check_replay()


# ------------------------------------------------------------------------------------------ stateful property


CLASSIC = ("k0", "k1", "k2")
CONSUMER = ("n0", "n1")


@dataclass
class Client:
    member_id: str = ""
    gen: int = -1  # classic generation / consumer epoch
    holding: set[int] = field(default_factory=set)
    joined: bool = False


class MixedGroupMachine(RuleBasedStateMachine):
    """Eager classic members (kafka-python's behaviour) and consumer-protocol members sharing group "g",
    through upgrades and downgrades; the clients' holdings are what the coordinator's answers gave them."""

    def __init__(self) -> None:
        super().__init__()
        self.w = World()
        self.clients = {m: Client() for m in CLASSIC + CONSUMER}

    def _drop(self, m: str) -> None:
        self.clients[m] = Client()

    @rule(m=st.sampled_from(CLASSIC))
    def classic_join(self, m: str) -> None:
        c = self.clients[m]
        c.holding = set()  # eager: everything revoked before JoinGroup
        r = self.w.answers.get(self.w.join(c.member_id))
        if not isinstance(r, JoinGroupResponse):
            c.joined = True  # parked in a classic rebalance; its answer comes later
            c.gen = -1
            return
        self._joined(m, r)

    def _joined(self, m: str, r: JoinGroupResponse) -> None:
        c = self.clients[m]
        if r.error_code == E.MEMBER_ID_REQUIRED:
            c.member_id = r.member_id
        elif r.error_code == 0:
            c.member_id, c.gen, c.joined = r.member_id, r.generation_id, True
            if r.leader == r.member_id and r.members:  # classic leader: eager round robin over the members
                ids = [x.member_id for x in r.members]
                assignments = tuple(
                    (mid, cc.encode_assignment(0, {"t": tuple(range(i, PARTS, len(ids)))}))
                    for i, mid in enumerate(ids)
                )
                self._sync(m, assignments)
        elif r.error_code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self._drop(m)

    def _sync(self, m: str, assignments: tuple[tuple[str, bytes], ...] = ()) -> None:
        c = self.clients[m]
        t = self.w.sync(c.member_id, c.gen, assignments)
        r = self.w.answers.get(t)
        if isinstance(r, SyncGroupResponse):
            self._synced(m, r)

    def _synced(self, m: str, r: SyncGroupResponse) -> None:
        c = self.clients[m]
        if r.error_code == 0:
            c.holding = set(cc.parse_assignment(r.assignment).get("t", ()))
        elif r.error_code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self._drop(m)
        else:
            c.holding = set()

    def _deliver_parked(self) -> None:
        """Answers to parked classic requests (a join or sync completed by another member's request)."""
        for m in CLASSIC:
            c = self.clients[m]
            if c.joined and c.gen == -1 and c.member_id:
                for t in sorted(self.w.answers, reverse=True):
                    r = self.w.answers[t]
                    if isinstance(r, JoinGroupResponse) and r.member_id == c.member_id:
                        self._joined(m, r)
                        break

    @rule(m=st.sampled_from(CLASSIC))
    def classic_sync(self, m: str) -> None:
        c = self.clients[m]
        if c.joined and c.gen >= 0:
            self._sync(m)

    @rule(m=st.sampled_from(CLASSIC))
    def classic_heartbeat(self, m: str) -> None:
        c = self.clients[m]
        if not (c.joined and c.gen >= 0):
            return
        r = self.w.heartbeat(c.member_id, c.gen)
        if r.error_code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self._drop(m)
        elif r.error_code == E.REBALANCE_IN_PROGRESS:
            self.classic_join(m)

    @rule(m=st.sampled_from(CLASSIC))
    def classic_leave(self, m: str) -> None:
        c = self.clients[m]
        if c.member_id:
            self._drop(m)
            self.w.leave(c.member_id)

    @rule(m=st.sampled_from(CONSUMER))
    def consumer_heartbeat(self, m: str) -> None:
        c = self.clients[m]
        r = self.w.hb(m, c.gen if c.joined else 0, {TID: c.holding} if c.joined else None)
        if r.error_code != 0:
            self._drop(m)
            return
        c.joined, c.gen = True, r.member_epoch
        if r.assignment is not None:
            c.holding = set(dict(r.assignment).get(TID, ()))

    @rule(m=st.sampled_from(CONSUMER))
    def consumer_leave(self, m: str) -> None:
        if self.clients[m].joined:
            self._drop(m)
            self.w.hb(m, -1)

    @rule(ms=st.sampled_from((0, 1_000, 3_000)))
    def advance(self, ms: int) -> None:
        self.w.advance(ms)
        self._deliver_parked()
        self._forget_fenced()

    def _forget_fenced(self) -> None:
        """A member the coordinator removed finds out at its next request; until then it still holds what it
        has, which the coordinator must not have given to anyone else: it does not, as long as the member's
        session has not run out, so a removed member's client is treated as having stopped."""
        for m in CONSUMER:
            g = self.w.st.consumer_groups.get("g")
            if self.clients[m].joined and (g is None or m not in g.members):
                self._drop(m)
        for m in CLASSIC:
            c = self.clients[m]
            if not c.member_id:
                continue
            g = self.w.st.consumer_groups.get("g")
            k = self.w.st.groups.get("g")
            gone = (g is None or c.member_id not in g.members) and (k is None or c.member_id not in k.members)
            if gone and c.joined:
                self._drop(m)

    @invariant()
    def no_partition_is_held_or_owned_twice(self) -> None:
        self._deliver_parked()
        seen: dict[int, str] = {}
        for m, c in sorted(self.clients.items()):
            for p in c.holding:
                assert p not in seen, f"partition {p} held by {seen[p]} and {m}"
                seen[p] = m
        owned_once(self.w)

    @invariant()
    def replay_equals_live_state(self) -> None:
        self.w.check_replay()


MixedGroupMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestMixedGroupMachine = MixedGroupMachine.TestCase


def test_hosted_classic_members_commit_with_their_generation() -> None:
    from zkcoord.group.consumer import commit_error

    w = World()
    gens = classic_group(w, 1)
    (a,) = gens
    w.hb("c", 0)
    assert commit_error(w.st, "g", a, 1, 2) is None  # any version, generation = member epoch
    assert commit_error(w.st, "g", a, 7, 8) == E.ILLEGAL_GENERATION
    assert commit_error(w.st, "g", "c", 2, 8) == E.UNSUPPORTED_VERSION  # a consumer-protocol member needs v9
