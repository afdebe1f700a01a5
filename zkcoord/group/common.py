"""What every handler module shares: effect collector, common status checks, member validation, timer keys.

Kafka's common checks come with their per-API error responses (`error_response`); a member's session deadline
moves through `touch`, which arms its heartbeat timer only when the armed one is later. This module imports no
handler module, so membership, offsets, admin and loading all build on it without a cycle.
"""

from __future__ import annotations

from zkcoord.api_keys import ApiKey
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.group.model import ClassicGroup, CoordinatorState, Member, replay, replay_many
from zkcoord.group.results import Cancel, Result, Schedule, TimerKey, TimerKind, TimerOp
from zkcoord.group.state import GroupState
from zkcoord.records.offsets import Record

E = ErrorCode
EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# API keys (zkcoord.api_keys), by the names the handlers pass to the common status checks.
OFFSET_COMMIT = ApiKey.OFFSET_COMMIT
OFFSET_FETCH = ApiKey.OFFSET_FETCH
JOIN_GROUP = ApiKey.JOIN_GROUP
HEARTBEAT = ApiKey.HEARTBEAT
LEAVE_GROUP = ApiKey.LEAVE_GROUP
SYNC_GROUP = ApiKey.SYNC_GROUP
DESCRIBE_GROUPS = ApiKey.DESCRIBE_GROUPS
LIST_GROUPS = ApiKey.LIST_GROUPS
DELETE_GROUPS = ApiKey.DELETE_GROUPS
_EMPTY_GROUP_ID_OK = frozenset({OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, DELETE_GROUPS})


class Effects:
    """Collects one handler's effects; records are replayed into the view as they are emitted."""

    __slots__ = ("records", "responses", "st", "timers")

    def __init__(self, st: CoordinatorState) -> None:
        self.st = st
        self.records: list[Record] = []
        self.responses: list[tuple[int, GroupResponse]] = []
        self.timers: list[TimerOp] = []

    def record(self, record: Record) -> None:
        self.records.append(record)
        replay(self.st.view, record)

    def records_batch(self, records: list[Record]) -> None:
        self.records.extend(records)
        replay_many(self.st.view, records)

    def respond(self, token: int, response: GroupResponse) -> None:
        self.responses.append((token, response))

    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        self.timers.append(Schedule(key, deadline_ms))

    def cancel(self, key: TimerKey) -> None:
        self.timers.append(Cancel(key))

    def result(self) -> Result:
        return Result(tuple(self.records), tuple(self.responses), tuple(self.timers))


# ---------------------------------------------------------------------------------------------- common checks


def group_status_error(
    group_id: str | None,
    api_key: int,
    *,
    active: bool = True,
    loading: bool = False,
    coordinator: bool = True,
) -> ErrorCode | None:
    """Kafka's `validateGroupStatus`: INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, ..._LOAD_IN_PROGRESS, NOT_COORDINATOR."""
    if group_id is None or (group_id == "" and api_key not in _EMPTY_GROUP_ID_OK):
        return E.INVALID_GROUP_ID
    if not active:
        return E.COORDINATOR_NOT_AVAILABLE
    if loading:
        return E.COORDINATOR_LOAD_IN_PROGRESS
    if not coordinator:
        return E.NOT_COORDINATOR
    return None


def join_error(version: int, member_id: str, code: ErrorCode) -> JoinGroupResponse:
    return JoinGroupResponse(int(code), -1, None, None if version >= 7 else "", "", False, member_id, ())


def commit_errors(req: OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        tuple(
            OffsetCommitResponseTopic(
                t.name,
                tuple(OffsetCommitResponsePartition(p.partition_index, int(code)) for p in t.partitions),
            )
            for t in req.topics
        )
    )


def error_response(req: GroupRequest, code: ErrorCode) -> GroupResponse:
    """The response Kafka sends when the common status checks fail with `code` (including its per-API mapping:
    SyncGroup turns LOAD_IN_PROGRESS into REBALANCE_IN_PROGRESS, Heartbeat answers NONE blindly)."""
    c = int(code)
    if isinstance(req, JoinGroupRequest):
        return join_error(req.api_version, req.member_id, code)
    if isinstance(req, SyncGroupRequest):
        if code is E.COORDINATOR_LOAD_IN_PROGRESS:
            c = int(E.REBALANCE_IN_PROGRESS)
        return SyncGroupResponse(c, None, None, b"")
    if isinstance(req, HeartbeatRequest):
        return HeartbeatResponse(0 if code is E.COORDINATOR_LOAD_IN_PROGRESS else c)
    if isinstance(req, LeaveGroupRequest):
        return LeaveGroupResponse(c, ())
    if isinstance(req, OffsetCommitRequest):
        return commit_errors(req, code)
    if isinstance(req, OffsetFetchRequest):
        if (
            req.api_version >= 2
        ):  # Kafka 2.8 OffsetFetchRequest.getErrorResponse: top-level error, no partitions
            return OffsetFetchResponse(c, ())
        topics = tuple(
            OffsetFetchResponseTopic(
                t.name, tuple(OffsetFetchResponsePartition(p, -1, -1, "", c) for p in t.partition_indexes)
            )
            for t in req.topics or ()
        )
        return OffsetFetchResponse(c, topics)
    if isinstance(req, DescribeGroupsRequest):
        return DescribeGroupsResponse(tuple(DescribedGroup(c, g, "", "", "", ()) for g in req.groups))
    if isinstance(req, ListGroupsRequest):
        return ListGroupsResponse(c, ())
    return DeleteGroupsResponse(tuple(DeletableGroupResult(g, c) for g in req.groups_names))


def sync_error(code: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(int(code), None, None, b"")


def validate_current_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode | None:
    """Is `member_id` a current member? A static one must be the id its instance holds now (FENCED_INSTANCE_ID)."""
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            return E.UNKNOWN_MEMBER_ID
        if current != member_id:
            return E.FENCED_INSTANCE_ID
        return None
    if member_id not in group.members:
        return E.UNKNOWN_MEMBER_ID
    return None


# --------------------------------------------------------------------------- session deadlines and timer keys


def heartbeat_key(group: ClassicGroup, member_id: str) -> TimerKey:
    return TimerKey(TimerKind.HEARTBEAT, group.group_id, member_id)


def touch(out: Effects, group: ClassicGroup, member: Member, now_ms: int, timeout_ms: int) -> None:
    """Kafka's completeAndScheduleNextHeartbeatExpiration: new deadline; arm only if the armed one is later."""
    deadline = now_ms + timeout_ms
    member.deadline_ms = deadline
    armed = member.armed_deadline_ms
    if armed is None or armed > deadline:
        member.armed_deadline_ms = deadline
        out.schedule(heartbeat_key(group, member.member_id), deadline)


def join_key(group: ClassicGroup) -> TimerKey:
    return TimerKey(TimerKind.JOIN, group.group_id)


def sync_key(group: ClassicGroup) -> TimerKey:
    return TimerKey(TimerKind.SYNC, group.group_id)
