"""A pure test harness for the coordinator core: fake clock, a timer table, responses collected by token."""

from __future__ import annotations

from dataclasses import dataclass, field

from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.messages import (
    GroupResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import Cancel, Result, TimerKey
from zkcoord.records.offsets import Record

PROTOCOLS = (("range", b"meta"),)


def consumer_subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


@dataclass
class Driver:
    config: GroupConfig = field(default_factory=lambda: GroupConfig(group_initial_rebalance_delay_ms=0))
    now: int = 1_000_000
    st: CoordinatorState = field(init=False)
    timers: dict[TimerKey, int] = field(default_factory=dict)
    responses: dict[int, GroupResponse] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    token: int = 0
    uuids: int = 0
    answered_twice: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.st = CoordinatorState(self.config)

    def apply(self, result: Result) -> Result:
        self.records.extend(result.records)
        for token, response in result.responses:
            if token in self.responses:
                self.answered_twice.append(token)
            self.responses[token] = response
        for op in result.timers:
            if isinstance(op, Cancel):
                self.timers.pop(op.key, None)
            else:
                self.timers[op.key] = op.deadline_ms
        return result

    def next_token(self) -> int:
        self.token += 1
        return self.token

    # ------------------------------------------------------------------------------------------ requests

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        version: int = 5,
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
        protocol_type: str = "consumer",
        session: int = 10_000,
        rebalance: int = 30_000,
        client_id: str = "c",
        in_place: h.RejoinInPlace | None = None,
    ) -> int:
        t = self.next_token()
        self.uuids += 1
        req = JoinGroupRequest(
            version,
            group,
            session,
            rebalance,
            member_id,
            instance,
            protocol_type,
            protocols,
            client_id=client_id,
        )
        self.apply(h.handle_join(self.st, req, self.now, t, f"u{self.uuids}", in_place))
        return t

    def join_new(self, group: str = "g", **kw: object) -> int:
        """JoinGroup as a v4+ client does it: the MEMBER_ID_REQUIRED round trip, then the real join."""
        t = self.join(group, **kw)  # type: ignore[arg-type]
        r = self.responses[t]
        assert isinstance(r, JoinGroupResponse)
        if r.error_code == 79:
            return self.join(group, r.member_id, **kw)  # type: ignore[arg-type]
        return t

    def sync(
        self,
        member_id: str,
        generation: int,
        group: str = "g",
        assignments: tuple[tuple[str, bytes], ...] = (),
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> int:
        t = self.next_token()
        req = SyncGroupRequest(
            5, group, generation, member_id, instance, protocol_type, protocol_name, assignments
        )
        self.apply(h.handle_sync(self.st, req, self.now, t))
        return t

    def heartbeat(
        self, member_id: str, generation: int, group: str = "g", instance: str | None = None
    ) -> int:
        t = self.next_token()
        self.apply(
            h.handle_heartbeat(
                self.st, HeartbeatRequest(4, group, generation, member_id, instance), self.now, t
            )
        )
        return t

    def leave(self, *members: LeaveGroupMember, group: str = "g", version: int = 3) -> int:
        t = self.next_token()
        self.apply(h.handle_leave(self.st, LeaveGroupRequest(version, group, members), self.now, t))
        return t

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        group: str = "g",
        generation: int = -1,
        member_id: str = "",
        *,
        instance: str | None = None,
        metadata: str = "",
        retention: int = -1,
        version: int = 7,
    ) -> int:
        t = self.next_token()
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, p), off in offsets.items():
            topics.setdefault(topic, []).append(OffsetCommitRequestPartition(p, off, -1, metadata))
        req = OffsetCommitRequest(
            version,
            group,
            generation,
            member_id,
            tuple(OffsetCommitRequestTopic(n, tuple(ps)) for n, ps in topics.items()),
            instance,
            retention,
        )
        self.apply(h.handle_offset_commit(self.st, req, self.now, t))
        return t

    def fetch(self, group: str = "g", topics: object = None) -> int:
        t = self.next_token()
        self.apply(h.handle_offset_fetch(self.st, OffsetFetchRequest(7, group, topics), self.now, t))  # type: ignore[arg-type]
        return t

    # ------------------------------------------------------------------------------------------- time

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers in deadline order (including ones armed while firing)."""
        target = self.now + ms
        while True:
            due = [(d, k) for k, d in self.timers.items() if d <= target]
            if not due:
                break
            deadline, key = min(
                due, key=lambda dk: (dk[0], dk[1].kind.value, dk[1].group_id, dk[1].member_id)
            )
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.apply(h.on_timer(self.st, key, self.now))
        self.now = target

    # ------------------------------------------------------------------------------------------ helpers

    def r(self, token: int) -> GroupResponse:
        return self.responses[token]

    def jr(self, token: int) -> JoinGroupResponse:
        resp = self.responses[token]
        assert isinstance(resp, JoinGroupResponse), resp
        return resp

    def sr(self, token: int) -> SyncGroupResponse:
        resp = self.responses[token]
        assert isinstance(resp, SyncGroupResponse), resp
        return resp

    def stable_group(self, n: int, group: str = "g", **kw: object) -> list[str]:
        """n members join (v5), the join completes, the leader syncs: returns member ids (leader first)."""
        tokens = [self.join_new(group, client_id=f"c{i}", **kw) for i in range(n)]  # type: ignore[arg-type]
        self.advance(0)
        resps = [self.jr(t) for t in tokens]
        assert all(r.error_code == 0 for r in resps), resps
        leader = resps[0].leader
        gen = resps[0].generation_id
        ids = [r.member_id for r in resps]
        for mid in ids:
            if mid != leader:
                self.sync(mid, gen, group)
        self.sync(leader, gen, group, tuple((m, f"a-{m}".encode()) for m in ids))
        return [leader] + [m for m in ids if m != leader]
