"""The classic group coordinator's one entry: a handler per request or timer, returning records, responses, timers.

Follows Kafka's classic coordinator (`GroupCoordinator.scala` / `GroupMetadataManager.java`), check for check and
in the same order. How the pieces fit:

1. The edge gives every request a *token* and calls the handler with `now_ms` (and, for JoinGroup, a fresh uuid
   for the member id). The handler changes the live groups in place and returns a `Result`.
2. `Result.records` are `__consumer_offsets` records; they have already been applied to the persisted view through
   `replay` (the view's only mutator) and must be appended to the durable log before any response is delivered.
3. `Result.responses` answer tokens: usually the request's own token, but a delayed JoinGroup/SyncGroup stays
   parked and is answered by the Result of whichever later event completes it (last member joined, join timer,
   leader's SyncGroup, member removed, ...).
4. `Result.timers` arm or cancel `TimerKey`s; when one fires the edge calls `on_timer`. A heartbeat moves the
   member's deadline in memory and the heartbeat timer re-arms itself lazily when it fires early, so a heartbeat
   emits a timer operation only when none is armed or the armed one is later than the new deadline.

Determinism: the only inputs are state, request, now_ms, token and uuid; no clock, randomness or set iteration.

The handlers live by concern, as Kafka splits them; callers import only this module:

| module | owns |
|---|---|
| `membership` | JoinGroup, SyncGroup, Heartbeat, LeaveGroup; session, pending-member, join and sync timers |
| `offsets` | OffsetCommit, OffsetFetch; offset retention and expiry; the offsets of deleted partitions |
| `admin` | DescribeGroups, ListGroups, DeleteGroups |
| `loading` | partition load (rebuild groups from the log) and unload |
| `consumer` | the consumer protocol (KIP-848): ConsumerGroupHeartbeat/Describe, its timers and commit checks |
| `consumer_classic` | online migration: the classic <-> consumer conversions, classic members in a consumer group |
| `common` | the effect collector, the common status checks and their error responses, session deadlines |

None of them imports this module; `on_timer` here only routes a fired timer to the module that armed it.
"""

from __future__ import annotations

from zkcoord.group import consumer_classic, membership
from zkcoord.group.admin import StatusCheck, handle_delete, handle_describe, handle_list
from zkcoord.group.common import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
    error_response,
    group_status_error,
)
from zkcoord.group.loading import load, load_raw, unload_groups
from zkcoord.group.membership import (
    RejoinInPlace,
    handle_external_rebalance,
    handle_join,
    hold_sync_answers,
    on_member_timer,
    release_sync_answer,
    sync_held,
)
from zkcoord.group.messages import HeartbeatRequest, LeaveGroupRequest, SyncGroupRequest
from zkcoord.group.model import CoordinatorState
from zkcoord.group.offsets import (
    delete_partition_offsets,
    expire_offsets,
    handle_consumer_group_commit,
    handle_legacy_member_commit,
    handle_offset_commit,
    handle_offset_fetch,
    on_retention_timer,
)
from zkcoord.group.results import Result, TimerKey, TimerKind

__all__ = [
    "DELETE_GROUPS",
    "DESCRIBE_GROUPS",
    "HEARTBEAT",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "LIST_GROUPS",
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "SYNC_GROUP",
    "RejoinInPlace",
    "Result",
    "StatusCheck",
    "TimerKey",
    "TimerKind",
    "delete_partition_offsets",
    "error_response",
    "expire_offsets",
    "group_status_error",
    "handle_consumer_group_commit",
    "handle_delete",
    "handle_describe",
    "handle_external_rebalance",
    "handle_heartbeat",
    "handle_join",
    "handle_leave",
    "handle_legacy_member_commit",
    "handle_list",
    "handle_offset_commit",
    "handle_offset_fetch",
    "handle_sync",
    "hold_sync_answers",
    "load",
    "load_raw",
    "on_timer",
    "release_sync_answer",
    "sync_held",
    "unload_groups",
]


def handle_sync(st: CoordinatorState, req: SyncGroupRequest, now_ms: int, token: int) -> Result:
    """SyncGroup: answered by the consumer group when the id is one (a classic member hosted in it)."""
    if req.group_id in st.consumer_groups:
        return consumer_classic.handle_sync(st, req, now_ms, token)
    return membership.handle_sync(st, req, now_ms, token)


def handle_heartbeat(st: CoordinatorState, req: HeartbeatRequest, now_ms: int, token: int) -> Result:
    if req.group_id in st.consumer_groups:
        return consumer_classic.handle_heartbeat(st, req, now_ms, token)
    return membership.handle_heartbeat(st, req, now_ms, token)


def handle_leave(st: CoordinatorState, req: LeaveGroupRequest, now_ms: int, token: int) -> Result:
    if req.group_id in st.consumer_groups:
        return consumer_classic.handle_leave(st, req, now_ms, token)
    return membership.handle_leave(st, req, now_ms, token)


_CONSUMER_TIMERS = frozenset(
    {TimerKind.CONSUMER_SESSION, TimerKind.CONSUMER_REBALANCE, TimerKind.CLASSIC_JOIN, TimerKind.CLASSIC_SYNC}
)


def on_timer(st: CoordinatorState, key: TimerKey, now_ms: int) -> Result:
    """A timer the edge armed has fired at `now_ms`. Stale firings (the thing it guarded moved on) do nothing."""
    if key.kind is TimerKind.RETENTION:
        return on_retention_timer(st, key, now_ms)
    if key.kind in _CONSUMER_TIMERS:
        return consumer_classic.on_timer(st, key, now_ms)
    return on_member_timer(st, key, now_ms)
