"""One pure coordinator for the online-migration tests (classic <-> consumer protocol, KIP-848): state, topic "t"
(6 partitions), clock, timers and every record written, driven by classic and consumer-protocol requests."""

from __future__ import annotations

from zkcoord.group import consumer_classic as cc
from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest as Hb
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatResponse
from zkcoord.group.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    LeaveGroupMember,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
)
from zkcoord.group.model import CoordinatorState
from zkcoord.records.offsets import decode_record, encode_record

from .consumer_world import Clocked

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


class World(Clocked):
    """One coordinator: state, topic "t" (6 partitions), clock, timers, every record written."""

    def __init__(self, **config: object) -> None:
        cfg = {"group_initial_rebalance_delay_ms": 0, "group_consumer_session_timeout_ms": SESSION}
        cfg.update(config)  # type: ignore[arg-type]
        super().__init__(CoordinatorState(GroupConfig(**cfg)))  # type: ignore[arg-type]
        self.topics = {"t": (TID, PARTS)}
        self.uuids = 0

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
