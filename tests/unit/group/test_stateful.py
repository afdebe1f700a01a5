"""Random joins, leaves, syncs, heartbeats, commits and clock advances, with invariants checked after every step."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.messages import (
    DeleteGroupsRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    OffsetCommitResponse,
)
from zkcoord.group.model import CoordinatorState, replay_all
from zkcoord.group.results import TimerKey, TimerKind
from zkcoord.group.state import GroupState
from zkcoord.records.offsets import GroupMetadataKey, decode_record, encode_record

from .driver import Driver

PROTOCOL_CHOICES = (
    (("range", b"r"),),
    (("roundrobin", b"x"), ("range", b"y")),
    (("range", b"z"), ("sticky", b"s")),
)


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.d = Driver(GroupConfig(group_initial_rebalance_delay_ms=0))
        self.known: list[str] = []  # member ids ever handed out
        self.instances = ("i0", "i1")
        self.max_generation: dict[str, int] = {}
        self.parked: set[int] = set()

    # ----------------------------------------------------------------------------------------- rules

    def _join(self, member_id: str, *, instance: str | None = None, version: int = 5, proto: int = 0) -> None:
        t = self.d.join(
            "g",
            member_id,
            instance=instance,
            version=version,
            protocols=PROTOCOL_CHOICES[proto],
            rebalance=20_000,
        )
        r = self.d.responses.get(t)
        if r is None:
            self.parked.add(t)
        elif isinstance(r, JoinGroupResponse) and r.member_id and r.member_id not in self.known:
            self.known.append(r.member_id)

    @initialize(n=st.integers(1, 3))
    def start_group(self, n: int) -> None:
        for _ in range(n):
            self._join("", version=3)
        self.d.advance(0)

    @rule(version=st.sampled_from([3, 5, 9]), proto=st.integers(0, 2))
    def join_new(self, version: int, proto: int) -> None:
        self._join("", version=version, proto=proto)

    @rule(i=st.integers(0, 1), proto=st.integers(0, 2))
    def join_static(self, i: int, proto: int) -> None:
        self._join("", instance=self.instances[i], proto=proto)

    @rule(data=st.data(), proto=st.integers(0, 2))
    def rejoin(self, data: st.DataObject, proto: int) -> None:
        if self.known:
            self._join(data.draw(st.sampled_from(self.known)), proto=proto)

    def _generation(self, data: st.DataObject) -> int:
        g = self.d.st.groups.get("g")
        current = g.generation if g else 0
        return int(data.draw(st.sampled_from([current, current - 1, current + 1])))

    @rule(data=st.data())
    def sync(self, data: st.DataObject) -> None:
        if not self.known:
            return
        member = data.draw(st.sampled_from(self.known))
        g = self.d.st.groups.get("g")
        assignments = tuple((m, m.encode()) for m in (g.members if g else ()))
        t = self.d.sync(member, self._generation(data), assignments=assignments)
        if t not in self.d.responses:
            self.parked.add(t)

    @rule()
    def leader_syncs(self) -> None:
        g = self.d.st.groups.get("g")
        if g is not None and g.leader_id is not None:
            assignments = tuple((m, m.encode()) for m in g.members)
            t = self.d.sync(g.leader_id, g.generation, assignments=assignments)
            if g.state is GroupState.COMPLETING_REBALANCE:
                assert t in self.d.responses
            if t not in self.d.responses:
                self.parked.add(t)

    @rule()
    def everyone_rejoins(self) -> None:
        g = self.d.st.groups.get("g")
        if g is not None:
            for member_id, member in list(g.members.items()):
                if member_id in g.members:
                    self._join(member_id, instance=member.group_instance_id)

    @rule()
    def rebalance_to_stable(self) -> None:
        self.everyone_rejoins()
        self.d.advance(0)
        g = self.d.st.groups.get("g")
        if g is not None and g.state is GroupState.COMPLETING_REBALANCE:
            for member_id in list(g.members):
                if member_id != g.leader_id:
                    self.d.sync(member_id, g.generation)
            self.leader_syncs()
            assert g.state is GroupState.STABLE

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        if self.known:
            self.d.heartbeat(data.draw(st.sampled_from(self.known)), self._generation(data))

    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        if self.known:
            self.d.leave(LeaveGroupMember(data.draw(st.sampled_from(self.known))))

    @rule(data=st.data(), offset=st.integers(0, 1000))
    def commit(self, data: st.DataObject, offset: int) -> None:
        if not self.known:
            return
        member = data.draw(st.sampled_from(self.known))
        gen = self._generation(data)
        g = self.d.st.groups.get("g")
        before = g.generation if g else None
        before_state = g.state if g else None
        was_member = g is not None and member in g.members
        t = self.d.commit({("t", offset % 3): offset}, generation=gen, member_id=member)
        r = self.d.r(t)
        assert isinstance(r, OffsetCommitResponse)
        if r.topics[0].partitions[0].error_code == 0:
            if gen < 0:
                # Generation -1 is only for groups without live members (admin tools, manual assignment).
                assert before_state in (None, GroupState.EMPTY)
            else:
                # No commit from a stale (or future) generation, or from a non-member, is ever accepted.
                assert before == gen and was_member

    @rule(offset=st.integers(0, 1000))
    def simple_commit(self, offset: int) -> None:
        self.d.commit({("s", 0): offset}, group="simple")

    @rule()
    def delete(self) -> None:
        t = self.d.next_token()
        self.d.apply(h.handle_delete(self.d.st, DeleteGroupsRequest(2, ("g", "simple")), self.d.now, t))
        for gid in ("g", "simple"):
            if gid not in self.d.st.groups:
                self.max_generation.pop(gid, None)

    @rule()
    def external_rebalance(self) -> None:
        # A legacy member of a mixed group joined or left: the classic side rebalances, and no record is written.
        g = self.d.st.groups.get("g")
        before = g.state if g else None
        self.d.apply(h.handle_external_rebalance(self.d.st, "g", self.d.now))
        if before in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert g is not None and g.state in (
                GroupState.PREPARING_REBALANCE,
                GroupState.COMPLETING_REBALANCE,
            )

    @rule(ms=st.sampled_from([0, 1, 500, 1000, 3000, 9000, 20_000]))
    def advance(self, ms: int) -> None:
        self.d.advance(ms)

    # ------------------------------------------------------------------------------------ invariants

    @invariant()
    def groups_are_consistent(self) -> None:
        d = self.d
        for gid, g in d.st.groups.items():
            assert g.state is not GroupState.DEAD
            if g.members:
                assert g.leader_id in g.members
            else:
                assert g.leader_id is None
            assert g.num_awaiting_join == sum(1 for m in g.members.values() if m.join_token is not None)
            counts: dict[str, int] = {}
            for m in g.members.values():
                for name, _ in m.protocols:
                    counts[name] = counts.get(name, 0) + 1
            assert counts == g.supported_protocols
            assert all(g.members[mid].group_instance_id == inst for inst, mid in g.static_members.items())
            assert g.generation >= self.max_generation.get(gid, 0)
            self.max_generation[gid] = g.generation
            if g.state is GroupState.PREPARING_REBALANCE:
                assert TimerKey(TimerKind.JOIN, gid) in d.timers  # a rebalance always ends
            if g.state is not GroupState.PREPARING_REBALANCE:
                assert g.num_awaiting_join == 0
            if g.state is not GroupState.COMPLETING_REBALANCE:
                assert all(m.sync_token is None for m in g.members.values())
            for m in g.members.values():
                if not (m.awaiting_join or m.awaiting_sync):
                    assert (
                        TimerKey(TimerKind.HEARTBEAT, gid, m.member_id) in d.timers
                    )  # every member can expire

    @invariant()
    def persisted_view_is_the_replay_of_the_records(self) -> None:
        d = self.d
        decoded = [decode_record(*encode_record(r)) for r in d.records]
        assert decoded == d.records
        assert replay_all(decoded).snapshot() == d.st.view.snapshot()
        for gid, g in d.st.groups.items():
            stored = d.st.view.groups.get(gid)
            if g.state is GroupState.STABLE:
                assert stored is not None
                assert (stored.generation, stored.protocol, stored.leader) == (
                    g.generation,
                    g.protocol_name,
                    g.leader_id,
                )
                assert [(m.member_id, m.assignment) for m in stored.members] == [
                    (m.member_id, m.assignment) for m in g.members.values()
                ]
            elif g.state is GroupState.EMPTY and g.generation > 0:
                assert stored is not None and stored.generation == g.generation and stored.members == ()
        for key, value in d.records:
            if isinstance(key, GroupMetadataKey) and value is not None:
                assert value.leader is None or value.leader in {m.member_id for m in value.members}

    @invariant()
    def a_restart_from_the_records_rebuilds_the_persisted_groups(self) -> None:
        d = self.d
        fresh = CoordinatorState(d.config)
        h.load(fresh, [decode_record(*encode_record(r)) for r in d.records], d.now)
        for gid, g in d.st.groups.items():
            loaded = fresh.groups.get(gid)
            if g.state is GroupState.STABLE:
                assert loaded is not None and loaded.state is GroupState.STABLE
                assert (loaded.generation, loaded.protocol_name, loaded.leader_id) == (
                    g.generation,
                    g.protocol_name,
                    g.leader_id,
                )
                assert [
                    (m.member_id, m.group_instance_id, m.assignment) for m in loaded.members.values()
                ] == [(m.member_id, m.group_instance_id, m.assignment) for m in g.members.values()]
            elif g.state is GroupState.EMPTY and (g.generation > 0 or gid in d.st.view.offsets):
                assert loaded is not None and loaded.state is GroupState.EMPTY
                assert loaded.generation == g.generation
        assert set(fresh.groups) <= set(d.st.groups)

    @invariant()
    def parked_requests_answered_once(self) -> None:
        assert self.d.answered_twice == []
        self.parked -= set(self.d.responses)


CoordinatorMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoordinatorMachine = CoordinatorMachine.TestCase
