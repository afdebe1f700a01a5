"""The consumer-protocol (KIP-848) core as its unit tests drive it: one coordinator's state, its topics, its clock,
its timers and every record it wrote (for replay checks)."""

from __future__ import annotations

from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer import handle_consumer_heartbeat
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest as Hb
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatResponse
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import Result, Schedule, TimerKey
from zkcoord.records.offsets import Record, decode_record, encode_record

T1 = "11" * 16
T2 = "22" * 16
SESSION = 45_000


class Clocked:
    """What every pure-core world of these tests keeps: the state, its clock, its timers, every record written
    and every answer by token. `take` applies a handler's result; `advance` fires due timers in deadline order."""

    def __init__(self, st: CoordinatorState) -> None:
        self.st = st
        self.now = 1_000
        self.token = 0
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

    def advance(self, ms: int) -> None:
        self.now += ms
        for key, deadline in sorted(
            self.timers.items(), key=lambda kv: (kv[1], kv[0].kind.value, kv[0].member_id)
        ):
            if deadline <= self.now and self.timers.get(key) == deadline:
                del self.timers[key]
                self.take(h.on_timer(self.st, key, self.now))


class World(Clocked):
    """One coordinator's state, its topics, its clock and every record it wrote (for replay checks)."""

    def __init__(self, **config: object) -> None:
        super().__init__(CoordinatorState(GroupConfig(**config)))  # type: ignore[arg-type]
        self.topics: dict[str, tuple[str, int]] = {"t1": (T1, 4), "t2": (T2, 2)}

    def hb(
        self, member: str, epoch: int, owned: dict[str, set[int]] | None = None, **kw: object
    ) -> ConsumerGroupHeartbeatResponse:
        join = epoch == 0
        req = Hb(
            api_version=1,
            group_id=str(kw.pop("group", "g")),
            member_id=member,
            member_epoch=epoch,
            rebalance_timeout_ms=int(kw.pop("rebalance", SESSION)) if join else -1,  # type: ignore[call-overload]
            subscribed_topic_names=_names(kw.pop("topics", ("t1",))) if join else kw.pop("topics", None),  # type: ignore[arg-type]
            topic_partitions=() if join and owned is None else _tp(owned),
            client_id="c",
            client_host="h",
            **kw,  # type: ignore[arg-type]
        )
        self.token += 1
        result = handle_consumer_heartbeat(
            self.st, req, self.now, self.token, self.topics.get, "server-id", lambda: tuple(self.topics)
        )
        self.take(result)
        ((token, resp),) = result.responses
        assert token == self.token
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        return resp

    def replayed(self) -> CoordinatorState:
        fresh = CoordinatorState(self.st.config)
        h.load(fresh, [decode_record(*encode_record(r)) for r in self.records], self.now)
        return fresh


def _names(topics: object) -> tuple[str, ...] | None:
    return None if topics is None else tuple(topics)  # type: ignore[call-overload]


def _tp(owned: dict[str, set[int]] | None) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    if owned is None:
        return None
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(owned.items()) if ps)


def _as_sets(assignment: tuple[tuple[str, tuple[int, ...]], ...] | None) -> dict[str, set[int]]:
    return {t: set(ps) for t, ps in assignment or ()}
