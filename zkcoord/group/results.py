"""What a coordinator handler returns: records to persist, responses to deliver, timers to arm or cancel."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from zkcoord.group.messages import GroupResponse
from zkcoord.records.offsets import Record


class TimerKind(Enum):
    HEARTBEAT = "heartbeat"  # a member's session deadline (lazily re-armed: see membership.on_member_timer)
    PENDING_MEMBER = "pending-member"  # KIP-394 member id handed out, JoinGroup not yet re-sent
    JOIN = "join"  # DelayedJoin / InitialDelayedJoin of a group
    SYNC = "sync"  # DelayedSync: members that must send SyncGroup after the join completed
    SYNC_HOLD = "sync-hold"  # the latest a held SyncGroup answer waits (membership.hold_sync_answers)
    RETENTION = "retention"  # the periodic offset-expiry pass (one for the coordinator)
    CONSUMER_SESSION = "consumer-session"  # a consumer-protocol member's session deadline (KIP-848)
    CONSUMER_REBALANCE = "consumer-rebalance"  # a consumer-protocol member's deadline to revoke partitions
    CLASSIC_JOIN = "classic-join"  # a classic member hosted in a consumer group, told to rejoin, must by then
    CLASSIC_SYNC = "classic-sync"  # ... and, once joined, must send SyncGroup by then


@dataclass(frozen=True, slots=True)
class TimerKey:
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class Schedule:
    """Arm `key` to fire at `deadline_ms`, replacing any earlier arming of the same key."""

    key: TimerKey
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class Cancel:
    key: TimerKey


TimerOp = Schedule | Cancel


@dataclass(frozen=True, slots=True)
class Result:
    """Deliver `responses` (token, response) only after `records` are durable; apply `timers` in order."""

    records: tuple[Record, ...] = ()
    responses: tuple[tuple[int, GroupResponse], ...] = ()
    timers: tuple[TimerOp, ...] = ()


EMPTY_RESULT = Result()
