"""The classic group coordinator's decisions: one handler per request or timer, returning records, responses, timers.

Follows Kafka's classic coordinator (`GroupCoordinator.scala` / `GroupMetadataManager.java`), check for check and
in the same order. How the pieces fit:

1. The edge gives every request a *token* and calls the handler with `now_ms` (and, for JoinGroup, a fresh uuid
   for the member id). The handler changes the live groups in place and returns a `Result`.
2. `Result.records` are `__consumer_offsets` records; they have already been applied to the persisted view through
   `replay` (the view's only mutator) and must be appended to the durable log before any response is delivered.
3. `Result.responses` answer tokens: usually the request's own token, but a delayed JoinGroup/SyncGroup stays
   parked and is answered by the Result of whichever later event completes it (last member joined, join timer,
   leader's SyncGroup, member removed, ...).
4. `Result.timers` arm or cancel `TimerKey`s; when one fires the edge calls `on_timer`. Heartbeats never emit timer
   operations: a member's deadline moves in memory and the heartbeat timer re-arms itself lazily when it fires
   early, so a heartbeat costs a dict lookup and two assignments.

Determinism: the only inputs are state, request, now_ms, token and uuid; no clock, randomness or set iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
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
from zkcoord.group.model import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    CoordinatorState,
    Member,
    group_record,
    replay,
)
from zkcoord.group.results import Cancel, Result, Schedule, TimerKey, TimerKind, TimerOp
from zkcoord.group.state import CAN_REBALANCE, GroupState, parse_state
from zkcoord.records.offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

E = ErrorCode
EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# API keys, for the per-API parts of the common status checks.
OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 15, 16, 42
_EMPTY_GROUP_ID_OK = frozenset({OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, DELETE_GROUPS})

_HEARTBEAT_RESPONSES = {code: HeartbeatResponse(int(code)) for code in ErrorCode}


class _Out:
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
        view = self.st.view
        for record in records:
            replay(view, record)

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


def _join_error(version: int, member_id: str, code: ErrorCode) -> JoinGroupResponse:
    return JoinGroupResponse(int(code), -1, None, None if version >= 7 else "", "", False, member_id, ())


def _protocol_name(version: int, name: str | None) -> str | None:
    return "" if name is None and version < 7 else name


def _commit_errors(req: OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse:
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
        return _join_error(req.api_version, req.member_id, code)
    if isinstance(req, SyncGroupRequest):
        if code is E.COORDINATOR_LOAD_IN_PROGRESS:
            c = int(E.REBALANCE_IN_PROGRESS)
        return SyncGroupResponse(c, None, None, b"")
    if isinstance(req, HeartbeatRequest):
        return HeartbeatResponse(0 if code is E.COORDINATOR_LOAD_IN_PROGRESS else c)
    if isinstance(req, LeaveGroupRequest):
        return LeaveGroupResponse(c, ())
    if isinstance(req, OffsetCommitRequest):
        return _commit_errors(req, code)
    if isinstance(req, OffsetFetchRequest):
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


def _validate_current_member(
    group: ClassicGroup, member_id: str, instance_id: str | None
) -> ErrorCode | None:
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


# ------------------------------------------------------------------------------------------- shared mechanics


def _hb_key(group: ClassicGroup, member_id: str) -> TimerKey:
    return TimerKey(TimerKind.HEARTBEAT, group.group_id, member_id)


def _touch(out: _Out, group: ClassicGroup, member: Member, now_ms: int, timeout_ms: int) -> None:
    """Kafka's completeAndScheduleNextHeartbeatExpiration: new deadline; arm only if the armed one is later."""
    deadline = now_ms + timeout_ms
    member.deadline_ms = deadline
    armed = member.armed_deadline_ms
    if armed is None or armed > deadline:
        member.armed_deadline_ms = deadline
        out.schedule(_hb_key(group, member.member_id), deadline)


def _sync_error(code: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(int(code), None, None, b"")


def _join_key(group: ClassicGroup) -> TimerKey:
    return TimerKey(TimerKind.JOIN, group.group_id)


def _sync_key(group: ClassicGroup) -> TimerKey:
    return TimerKey(TimerKind.SYNC, group.group_id)


def _maybe_prepare_rebalance(out: _Out, group: ClassicGroup, now_ms: int) -> None:
    if group.state in CAN_REBALANCE:
        _prepare_rebalance(out, group, now_ms)


def _prepare_rebalance(out: _Out, group: ClassicGroup, now_ms: int) -> None:
    if group.state is COMPLETING:
        _reset_and_propagate_assignment_error(out, group, E.REBALANCE_IN_PROGRESS, now_ms)
    out.cancel(_sync_key(group))
    cfg = out.st.config
    if group.state is EMPTY:
        delay = cfg.group_initial_rebalance_delay_ms
        group.initial_join = (delay, max(group.rebalance_timeout_ms() - delay, 0))
        group.new_member_added = False
        out.schedule(_join_key(group), now_ms + delay)
        group.transition(PREPARING, now_ms)
    else:
        group.initial_join = None
        out.schedule(_join_key(group), now_ms + group.rebalance_timeout_ms())
        group.transition(PREPARING, now_ms)
        _try_complete_join(out, group, now_ms)


def _reset_and_propagate_assignment_error(
    out: _Out, group: ClassicGroup, code: ErrorCode, now_ms: int
) -> None:
    response = _sync_error(code)
    for member in group.members.values():
        member.assignment = b""
        if member.sync_token is not None:
            out.respond(member.sync_token, response)
            member.sync_token = None
            _touch(out, group, member, now_ms, member.session_timeout_ms)


def _try_complete_join(out: _Out, group: ClassicGroup, now_ms: int) -> None:
    if group.state is PREPARING and group.initial_join is None and group.has_all_members_joined():
        out.cancel(_join_key(group))
        _on_complete_join(out, group, now_ms)


def _drop_member(out: _Out, group: ClassicGroup, member: Member) -> None:
    """Remove without rebalancing; any parked request of the member is answered UNKNOWN_MEMBER_ID."""
    if member.join_token is not None:
        out.respond(
            member.join_token, _join_error(member.join_version, member.member_id, E.UNKNOWN_MEMBER_ID)
        )
        group.set_join_token(member, None)
    if member.sync_token is not None:
        out.respond(member.sync_token, _sync_error(E.UNKNOWN_MEMBER_ID))
        member.sync_token = None
    group.remove(member.member_id)
    if member.armed_deadline_ms is not None:
        member.armed_deadline_ms = None
        out.cancel(_hb_key(group, member.member_id))


def _remove_member_and_update_group(out: _Out, group: ClassicGroup, member: Member, now_ms: int) -> None:
    _drop_member(out, group, member)
    if group.state in (STABLE, COMPLETING):
        _maybe_prepare_rebalance(out, group, now_ms)
    elif group.state is PREPARING:
        _try_complete_join(out, group, now_ms)


def _remove_pending_member(out: _Out, group: ClassicGroup, member_id: str, now_ms: int) -> None:
    group.remove(member_id)
    out.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
    if group.state is PREPARING:
        _try_complete_join(out, group, now_ms)


def _on_complete_join(out: _Out, group: ClassicGroup, now_ms: int) -> None:
    for member in [m for m in group.members.values() if m.join_token is None and m.group_instance_id is None]:
        _drop_member(out, group, member)
    if group.state is DEAD:
        return
    if not _maybe_elect_new_joined_leader(group) and group.members:
        # Only static members that have not rejoined remain: wait another round for them (or their expiry).
        out.schedule(_join_key(group), now_ms + group.rebalance_timeout_ms())
        return
    _init_next_generation(group, now_ms)
    if group.state is EMPTY:
        out.record(group_record(group, now_ms))
        return
    protocol = group.protocol_name
    assert protocol is not None
    version_members: dict[int, tuple[JoinGroupMember, ...]] = {}

    def leader_members(version: int) -> tuple[JoinGroupMember, ...]:
        cached = version_members.get(version)
        if cached is None:
            cached = tuple(
                JoinGroupMember(
                    m.member_id, m.group_instance_id if version >= 5 else None, m.metadata(protocol)
                )
                for m in group.members.values()
            )
            version_members[version] = cached
        return cached

    leader = group.leader_id or ""
    for member in group.members.values():
        if member.join_token is not None:
            version = member.join_version
            out.respond(
                member.join_token,
                JoinGroupResponse(
                    0,
                    group.generation,
                    group.protocol_type,
                    protocol,
                    leader,
                    False,
                    member.member_id,
                    leader_members(version) if member.member_id == leader else (),
                ),
            )
            group.set_join_token(member, None)
        _touch(out, group, member, now_ms, member.session_timeout_ms)
        member.is_new = False
        group.pending_sync[member.member_id] = None
    out.schedule(_sync_key(group), now_ms + group.rebalance_timeout_ms())


def _maybe_elect_new_joined_leader(group: ClassicGroup) -> bool:
    if group.leader_id is None:
        return False
    leader = group.members.get(group.leader_id)
    if leader is not None and leader.awaiting_join:
        return True
    for member_id, member in group.members.items():
        if member.awaiting_join:
            group.leader_id = member_id
            return True
    return False


def _init_next_generation(group: ClassicGroup, now_ms: int) -> None:
    group.generation += 1
    if group.members:
        group.protocol_name = group.select_protocol()
        group.transition(COMPLETING, now_ms)
    else:
        group.protocol_name = None
        group.transition(EMPTY, now_ms)
    group.subscribed_topics = group.compute_subscribed_topics()
    group.pending_sync.clear()
    group.new_member_added = False


# ---------------------------------------------------------------------------------------------------- JoinGroup


def handle_join(
    st: CoordinatorState, req: JoinGroupRequest, now_ms: int, token: int, member_uuid: str
) -> Result:
    """JoinGroup (after the common status checks). `member_uuid` is the edge's fresh UUID for a new member id."""
    out = _Out(st)
    v = req.api_version
    cfg = st.config
    if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        out.respond(token, _join_error(v, req.member_id, E.INVALID_SESSION_TIMEOUT))
        return out.result()
    is_unknown = req.member_id == ""
    group = st.groups.get(req.group_id)
    if group is None:
        if not is_unknown:
            out.respond(token, _join_error(v, req.member_id, E.UNKNOWN_MEMBER_ID))
            return out.result()
        group = st.groups[req.group_id] = ClassicGroup(req.group_id, now_ms)
    if not _accept_joining_member(group, req.member_id, cfg):
        member = group.members.get(req.member_id)
        if member is not None:
            _drop_member(out, group, member)
        else:
            group.remove(req.member_id)
        out.respond(token, _join_error(v, "", E.GROUP_MAX_SIZE_REACHED))
    elif is_unknown:
        _join_new_member(out, group, req, now_ms, token, member_uuid)
    else:
        _join_current_member(out, group, req, now_ms, token)
    if group.state is PREPARING:
        _try_complete_join(out, group, now_ms)
    return out.result()


def _accept_joining_member(group: ClassicGroup, member_id: str, cfg: GroupConfig) -> bool:
    if group.state in (EMPTY, DEAD):
        return True
    if group.state is PREPARING:
        member = group.members.get(member_id)
        return (member is not None and member.awaiting_join) or group.num_awaiting_join < cfg.group_max_size
    return member_id in group.members or len(group.members) < cfg.group_max_size


def _rebalance_timeout(req: JoinGroupRequest) -> int:
    return req.session_timeout_ms if req.rebalance_timeout_ms < 0 else req.rebalance_timeout_ms


def _join_new_member(
    out: _Out, group: ClassicGroup, req: JoinGroupRequest, now_ms: int, token: int, member_uuid: str
) -> None:
    v = req.api_version
    if group.state is DEAD:
        out.respond(token, _join_error(v, "", E.COORDINATOR_NOT_AVAILABLE))
        return
    if not group.supports_protocols(req.protocol_type, req.protocols):
        out.respond(token, _join_error(v, "", E.INCONSISTENT_GROUP_PROTOCOL))
        return
    instance = req.group_instance_id
    new_id = f"{instance if instance is not None else req.client_id}-{member_uuid}"
    if instance is not None:
        old_id = group.static_members.get(instance)
        if old_id is not None:
            _update_static_member_and_rebalance(out, group, req, old_id, new_id, now_ms, token)
        else:
            _add_member_and_rebalance(out, group, req, new_id, now_ms, token)
    elif v >= 4:
        # KIP-394: hand out the id first so a client that times out here does not leave a ghost member behind.
        group.pending_members[new_id] = now_ms + req.session_timeout_ms
        out.schedule(
            TimerKey(TimerKind.PENDING_MEMBER, group.group_id, new_id), now_ms + req.session_timeout_ms
        )
        out.respond(token, _join_error(v, new_id, E.MEMBER_ID_REQUIRED))
    else:
        _add_member_and_rebalance(out, group, req, new_id, now_ms, token)


def _join_current_member(
    out: _Out, group: ClassicGroup, req: JoinGroupRequest, now_ms: int, token: int
) -> None:
    v = req.api_version
    member_id = req.member_id
    if group.state is DEAD:
        out.respond(token, _join_error(v, member_id, E.COORDINATOR_NOT_AVAILABLE))
        return
    if not group.supports_protocols(req.protocol_type, req.protocols):
        out.respond(token, _join_error(v, member_id, E.INCONSISTENT_GROUP_PROTOCOL))
        return
    if member_id in group.pending_members:
        if req.group_instance_id is not None:
            # Kafka raises IllegalStateException here (a pending id is never static), which reaches the client
            # as UNKNOWN_SERVER_ERROR.
            out.respond(token, _join_error(v, member_id, E.UNKNOWN_SERVER_ERROR))
            return
        out.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
        _add_member_and_rebalance(out, group, req, member_id, now_ms, token)
        return
    instance = req.group_instance_id
    current_static = group.static_members.get(instance) if instance is not None else None
    if current_static is not None and current_static != member_id:
        out.respond(token, _join_error(v, member_id, E.FENCED_INSTANCE_ID))
        return
    member = group.members.get(member_id)
    if member is None or (instance is not None and current_static is None):
        out.respond(token, _join_error(v, member_id, E.UNKNOWN_MEMBER_ID))
        return
    state = group.state
    if state is PREPARING:
        _update_member_and_rebalance(out, group, member, req, now_ms, token)
    elif state is COMPLETING:
        if member.matches(req.protocols):
            # The member probably lost the JoinGroup response: give it the current generation again.
            out.respond(token, _current_generation_response(group, member, v, with_members=True))
        else:
            _update_member_and_rebalance(out, group, member, req, now_ms, token)
    elif state is STABLE:
        if group.is_leader(member_id) or not member.matches(req.protocols):
            _update_member_and_rebalance(out, group, member, req, now_ms, token)
        else:
            out.respond(token, _current_generation_response(group, member, v, with_members=False))
    else:
        out.respond(token, _join_error(v, member_id, E.UNKNOWN_MEMBER_ID))


def _current_generation_response(
    group: ClassicGroup, member: Member, version: int, *, with_members: bool, leader: str | None = None
) -> JoinGroupResponse:
    protocol = group.protocol_name
    members: tuple[JoinGroupMember, ...] = ()
    if with_members and group.is_leader(member.member_id) and protocol is not None:
        members = tuple(
            JoinGroupMember(m.member_id, m.group_instance_id if version >= 5 else None, m.metadata(protocol))
            for m in group.members.values()
        )
    return JoinGroupResponse(
        0,
        group.generation,
        group.protocol_type,
        _protocol_name(version, protocol),
        (group.leader_id or "") if leader is None else leader,
        False,
        member.member_id,
        members,
    )


def _set_join(out: _Out, group: ClassicGroup, member: Member, token: int, version: int) -> None:
    if member.join_token is not None and member.join_token != token:
        # A retried JoinGroup supersedes the parked one; answer the old request instead of leaking it.
        out.respond(
            member.join_token, _join_error(member.join_version, member.member_id, E.REBALANCE_IN_PROGRESS)
        )
    group.set_join_token(member, token, version)


def _update_member_and_rebalance(
    out: _Out, group: ClassicGroup, member: Member, req: JoinGroupRequest, now_ms: int, token: int
) -> None:
    if member.protocols != req.protocols:
        group.update_protocols(member, req.protocols)
    member.rebalance_timeout_ms = _rebalance_timeout(req)
    member.session_timeout_ms = req.session_timeout_ms
    _set_join(out, group, member, token, req.api_version)
    _maybe_prepare_rebalance(out, group, now_ms)


def _add_member_and_rebalance(
    out: _Out, group: ClassicGroup, req: JoinGroupRequest, member_id: str, now_ms: int, token: int
) -> None:
    member = Member(
        member_id,
        req.group_instance_id,
        req.client_id,
        req.client_host,
        _rebalance_timeout(req),
        req.session_timeout_ms,
        req.protocol_type,
        req.protocols,
    )
    member.is_new = True
    if group.state is PREPARING and group.generation == 0:
        group.new_member_added = True
    group.add(member, token, req.api_version)
    # New members cannot heartbeat while parked, and a dropped connection is invisible meanwhile: bound the wait.
    _touch(out, group, member, now_ms, out.st.config.new_member_join_timeout_ms)
    _maybe_prepare_rebalance(out, group, now_ms)


def _update_static_member_and_rebalance(
    out: _Out,
    group: ClassicGroup,
    req: JoinGroupRequest,
    old_id: str,
    new_id: str,
    now_ms: int,
    token: int,
) -> None:
    v = req.api_version
    old_leader = group.leader_id or ""
    member = _replace_static_member(out, group, old_id, new_id)
    _touch(out, group, member, now_ms, member.session_timeout_ms)
    if member.protocols != req.protocols:
        group.update_protocols(member, req.protocols)
    member.rebalance_timeout_ms = _rebalance_timeout(req)
    member.session_timeout_ms = req.session_timeout_ms
    group.set_join_token(member, token, v)
    state = group.state
    if state is STABLE:
        if group.protocol_name == group.select_protocol():
            # Persist the new member id; no rebalance. The reply is the current generation.
            out.record(group_record(group, now_ms))
            group.set_join_token(member, None)
            if v >= 9:
                is_leader = group.is_leader(new_id)
                response = _current_generation_response(group, member, v, with_members=is_leader)
                if is_leader:
                    response = _replace_skip(response)
            else:
                # Pre-v9: report the old leader id so a restarted leader does not think it must reassign.
                response = _current_generation_response(
                    group, member, v, with_members=False, leader=old_leader
                )
            out.respond(token, response)
        else:
            _maybe_prepare_rebalance(out, group, now_ms)
    elif state is COMPLETING:
        # Assignments computed for the old id would not reach the new one: start over.
        _prepare_rebalance(out, group, now_ms)
    # PreparingRebalance: stay parked until the join completes.


def _replace_skip(response: JoinGroupResponse) -> JoinGroupResponse:
    return JoinGroupResponse(
        response.error_code,
        response.generation_id,
        response.protocol_type,
        response.protocol_name,
        response.leader,
        True,
        response.member_id,
        response.members,
    )


def _replace_static_member(out: _Out, group: ClassicGroup, old_id: str, new_id: str) -> Member:
    member = group.members.pop(old_id)
    if member.join_token is not None:
        out.respond(member.join_token, _join_error(member.join_version, old_id, E.FENCED_INSTANCE_ID))
        group.set_join_token(member, None)
    if member.sync_token is not None:
        out.respond(member.sync_token, _sync_error(E.FENCED_INSTANCE_ID))
        member.sync_token = None
    if member.armed_deadline_ms is not None:
        out.cancel(_hb_key(group, old_id))
        member.armed_deadline_ms = None
    member.member_id = new_id
    group.members[new_id] = member
    if group.leader_id == old_id:
        group.leader_id = new_id
    if group.pending_sync.pop(old_id, 0) is None:
        group.pending_sync[new_id] = None
    assert member.group_instance_id is not None
    group.static_members[member.group_instance_id] = new_id
    return member


# ---------------------------------------------------------------------------------------------------- SyncGroup


def handle_sync(st: CoordinatorState, req: SyncGroupRequest, now_ms: int, token: int) -> Result:
    out = _Out(st)
    group = st.groups.get(req.group_id)
    if group is None:
        out.respond(token, _sync_error(E.UNKNOWN_MEMBER_ID))
        return out.result()
    if group.state is DEAD:
        out.respond(token, _sync_error(E.COORDINATOR_NOT_AVAILABLE))
        return out.result()
    err = _validate_current_member(group, req.member_id, req.group_instance_id)
    if err is None and req.generation_id != group.generation:
        err = E.ILLEGAL_GENERATION
    if err is None and (
        (req.protocol_type is not None and req.protocol_type != group.protocol_type)
        or (req.protocol_name is not None and req.protocol_name != group.protocol_name)
    ):
        err = E.INCONSISTENT_GROUP_PROTOCOL
    if err is None and group.state is EMPTY:
        err = E.UNKNOWN_MEMBER_ID
    if err is None and group.state is PREPARING:
        err = E.REBALANCE_IN_PROGRESS
    if err is not None:
        out.respond(token, _sync_error(err))
        return out.result()
    member = group.members[req.member_id]
    if group.state is COMPLETING:
        if member.sync_token is not None:
            out.respond(member.sync_token, _sync_error(E.REBALANCE_IN_PROGRESS))
        member.sync_token = token
        _remove_pending_sync(out, group, req.member_id)
        if group.is_leader(req.member_id):
            assignment = dict(req.assignments)
            for m in group.members.values():
                m.assignment = assignment.get(m.member_id, b"")
            out.record(group_record(group, now_ms))
            for m in group.members.values():
                if m.sync_token is not None:
                    out.respond(
                        m.sync_token,
                        SyncGroupResponse(0, group.protocol_type, group.protocol_name, m.assignment),
                    )
                    m.sync_token = None
                    _touch(out, group, m, now_ms, m.session_timeout_ms)
            group.transition(STABLE, now_ms)
    else:  # Stable
        _remove_pending_sync(out, group, req.member_id)
        out.respond(token, SyncGroupResponse(0, group.protocol_type, group.protocol_name, member.assignment))
        _touch(out, group, member, now_ms, member.session_timeout_ms)
    return out.result()


def _remove_pending_sync(out: _Out, group: ClassicGroup, member_id: str) -> None:
    if group.pending_sync.pop(member_id, 0) is None and not group.pending_sync:
        out.cancel(_sync_key(group))


# ---------------------------------------------------------------------------------------------------- Heartbeat


def handle_heartbeat(st: CoordinatorState, req: HeartbeatRequest, now_ms: int, token: int) -> Result:
    group = st.groups.get(req.group_id)
    if group is None:
        code = E.UNKNOWN_MEMBER_ID
    elif group.state is DEAD:
        code = E.COORDINATOR_NOT_AVAILABLE
    else:
        err = _validate_current_member(group, req.member_id, req.group_instance_id)
        if err is not None:
            code = err
        elif req.generation_id != group.generation:
            code = E.ILLEGAL_GENERATION
        elif group.state is EMPTY:
            code = E.UNKNOWN_MEMBER_ID
        else:
            member = group.members[req.member_id]
            member.deadline_ms = deadline = now_ms + member.session_timeout_ms
            code = E.REBALANCE_IN_PROGRESS if group.state is PREPARING else E.NONE
            armed = member.armed_deadline_ms
            if armed is None or armed > deadline:
                member.armed_deadline_ms = deadline
                return Result(
                    responses=((token, _HEARTBEAT_RESPONSES[code]),),
                    timers=(Schedule(_hb_key(group, member.member_id), deadline),),
                )
    return Result(responses=((token, _HEARTBEAT_RESPONSES[code]),))


# --------------------------------------------------------------------------------------------------- LeaveGroup


def handle_leave(st: CoordinatorState, req: LeaveGroupRequest, now_ms: int, token: int) -> Result:
    out = _Out(st)
    group = st.groups.get(req.group_id)
    if group is None:
        members = tuple(
            LeaveGroupMemberResponse(m.member_id, m.group_instance_id, int(E.UNKNOWN_MEMBER_ID))
            for m in req.members
        )
        out.respond(token, _leave_response(req, 0, members))
        return out.result()
    if group.state is DEAD:
        out.respond(token, LeaveGroupResponse(int(E.COORDINATOR_NOT_AVAILABLE), ()))
        return out.result()
    results = []
    for leaving in req.members:
        code = E.NONE
        if leaving.member_id == "":
            current = (
                group.static_members.get(leaving.group_instance_id)
                if leaving.group_instance_id is not None
                else None
            )
            if current is None:
                code = E.UNKNOWN_MEMBER_ID
            else:
                _remove_member_and_update_group(out, group, group.members[current], now_ms)
        elif leaving.member_id in group.pending_members:
            _remove_pending_member(out, group, leaving.member_id, now_ms)
        else:
            err = _validate_current_member(group, leaving.member_id, leaving.group_instance_id)
            if err is not None:
                code = err
            else:
                _remove_member_and_update_group(out, group, group.members[leaving.member_id], now_ms)
        results.append(LeaveGroupMemberResponse(leaving.member_id, leaving.group_instance_id, int(code)))
    out.respond(token, _leave_response(req, 0, tuple(results)))
    return out.result()


def _leave_response(
    req: LeaveGroupRequest, code: int, members: tuple[LeaveGroupMemberResponse, ...]
) -> LeaveGroupResponse:
    if req.api_version < 3:
        # v0-2 have no per-member errors: the single member's error is the response's error.
        first = next((m.error_code for m in members if m.error_code != 0), 0)
        return LeaveGroupResponse(code or first, members)
    return LeaveGroupResponse(code, members)


# ------------------------------------------------------------------------------------------------- OffsetCommit


def handle_offset_commit(st: CoordinatorState, req: OffsetCommitRequest, now_ms: int, token: int) -> Result:
    out = _Out(st)
    group = st.groups.get(req.group_id)
    if group is None:
        if req.generation_id < 0:
            # Not using group management: an Empty "simple" group holds the offsets.
            group = st.groups[req.group_id] = ClassicGroup(req.group_id, now_ms)
        else:
            out.respond(token, _commit_errors(req, E.ILLEGAL_GENERATION))
            return out.result()
    err = _validate_offset_commit(group, req)
    if err is None and group.state is COMPLETING:
        err = E.REBALANCE_IN_PROGRESS
    if err is not None:
        out.respond(token, _commit_errors(req, err))
        return out.result()
    if group.state is not EMPTY:
        member = group.members[req.member_id]
        _touch(out, group, member, now_ms, member.session_timeout_ms)
    max_meta = st.config.offset_metadata_max_bytes
    expire = now_ms + req.retention_time_ms if req.retention_time_ms != -1 else -1
    gid = req.group_id
    records: list[Record] = []
    topics = []
    for t in req.topics:
        parts = []
        name = t.name
        for p in t.partitions:
            meta = p.committed_metadata if p.committed_metadata is not None else ""
            if len(meta) > max_meta:
                parts.append(
                    OffsetCommitResponsePartition(p.partition_index, int(E.OFFSET_METADATA_TOO_LARGE))
                )
                continue
            records.append(
                (
                    OffsetCommitKey(gid, name, p.partition_index),
                    OffsetCommitValue(
                        p.committed_offset,
                        p.committed_leader_epoch,
                        meta,
                        p.commit_timestamp if p.commit_timestamp != -1 else now_ms,
                        expire,
                    ),
                )
            )
            parts.append(_ok_partition(p.partition_index))
        topics.append(OffsetCommitResponseTopic(name, tuple(parts)))
    out.records_batch(records)
    out.respond(token, OffsetCommitResponse(tuple(topics)))
    return out.result()


_OK_PARTITIONS: dict[int, OffsetCommitResponsePartition] = {}


def _ok_partition(index: int) -> OffsetCommitResponsePartition:
    # Responses are immutable, so one "partition N: NONE" object can answer every commit.
    cached = _OK_PARTITIONS.get(index)
    if cached is None:
        cached = OffsetCommitResponsePartition(index, 0)
        if len(_OK_PARTITIONS) < 65536:
            _OK_PARTITIONS[index] = cached
    return cached


def _validate_offset_commit(group: ClassicGroup, req: OffsetCommitRequest) -> ErrorCode | None:
    if group.state is DEAD:
        return E.COORDINATOR_NOT_AVAILABLE
    if req.generation_id < 0 and group.state is EMPTY:
        # Admin tools and manually assigned consumers: member id and instance id are not checked.
        return None
    if req.generation_id >= 0 or req.member_id != "" or req.group_instance_id is not None:
        err = _validate_current_member(group, req.member_id, req.group_instance_id)
        if err is not None:
            return err
        if req.generation_id != group.generation:
            return E.ILLEGAL_GENERATION
        return None
    if group.state is not EMPTY:
        # A non-empty group takes commits only from its members.
        return E.UNKNOWN_MEMBER_ID
    return None


# -------------------------------------------------------------------------------------------------- OffsetFetch


def handle_offset_fetch(st: CoordinatorState, req: OffsetFetchRequest, now_ms: int, token: int) -> Result:
    group = st.groups.get(req.group_id)
    stored = st.view.offsets.get(req.group_id) if group is not None and group.state is not DEAD else None
    topics: list[OffsetFetchResponseTopic] = []
    if req.topics is None:
        by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
        for (topic, partition), found in sorted((stored or {}).items()):
            by_topic.setdefault(topic, []).append(
                OffsetFetchResponsePartition(partition, found.offset, found.leader_epoch, found.metadata, 0)
            )
        topics = [OffsetFetchResponseTopic(t, tuple(ps)) for t, ps in by_topic.items()]
    else:
        for t in req.topics:
            parts = []
            for p in t.partition_indexes:
                value = stored.get((t.name, p)) if stored else None
                if value is None:
                    parts.append(OffsetFetchResponsePartition(p, -1, -1, "", 0))
                else:
                    parts.append(
                        OffsetFetchResponsePartition(p, value.offset, value.leader_epoch, value.metadata, 0)
                    )
            topics.append(OffsetFetchResponseTopic(t.name, tuple(parts)))
    return Result(responses=((token, OffsetFetchResponse(0, tuple(topics))),))


# ------------------------------------------------------------------------------ DescribeGroups / List / Delete

StatusCheck = Callable[[str], "ErrorCode | None"]


def _no_status_error(group_id: str) -> ErrorCode | None:
    return None


def handle_describe(
    st: CoordinatorState,
    req: DescribeGroupsRequest,
    now_ms: int,
    token: int,
    status: StatusCheck = _no_status_error,
) -> Result:
    """`status(group_id)` is the edge's per-group common check (coordinator active / loading / owner)."""
    described = []
    for gid in req.groups:
        err = group_status_error(gid, DESCRIBE_GROUPS) or status(gid)
        if err is not None:
            described.append(DescribedGroup(int(err), gid, "", "", "", ()))
            continue
        group = st.groups.get(gid)
        if group is None or group.state is DEAD:
            described.append(DescribedGroup(0, gid, "Dead", "", "", ()))
            continue
        stable = group.state is STABLE
        protocol = group.protocol_name if stable else None
        members = tuple(
            DescribedGroupMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if protocol is not None else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        described.append(
            DescribedGroup(0, gid, group.state.value, group.protocol_type or "", protocol or "", members)
        )
    return Result(responses=((token, DescribeGroupsResponse(tuple(described))),))


def handle_list(
    st: CoordinatorState, req: ListGroupsRequest, now_ms: int, token: int, error_code: int = 0
) -> Result:
    """`error_code` is LOAD_IN_PROGRESS while some partition loads: Kafka still returns the list then."""
    states = {parse_state(s) for s in req.states_filter}
    types = {t.lower() for t in req.types_filter}
    listed = tuple(
        ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
        for g in st.groups.values()
        if g.state is not DEAD
        and (not states or g.state in states)
        and (not types or (g.protocol_type or "").lower() in types)
    )
    return Result(responses=((token, ListGroupsResponse(error_code, listed)),))


def handle_delete(
    st: CoordinatorState,
    req: DeleteGroupsRequest,
    now_ms: int,
    token: int,
    status: StatusCheck = _no_status_error,
) -> Result:
    out = _Out(st)
    results = []
    for gid in req.groups_names:
        err = group_status_error(gid, DELETE_GROUPS) or status(gid)
        if err is None:
            group = st.groups.get(gid)
            if group is None or group.state is DEAD:
                err = E.GROUP_ID_NOT_FOUND
            elif group.state is EMPTY:
                group.transition(DEAD, now_ms)
                _tombstone_group(out, gid, everything=True)
            else:
                err = E.NON_EMPTY_GROUP
        results.append(DeletableGroupResult(gid, int(err or 0)))
    out.respond(token, DeleteGroupsResponse(tuple(results)))
    return out.result()


def _tombstone_group(out: _Out, gid: str, *, everything: bool) -> None:
    if everything:
        for topic, partition in sorted(out.st.view.offsets.get(gid, {})):
            out.record((OffsetCommitKey(gid, topic, partition), None))
    out.record((GroupMetadataKey(gid), None))
    out.st.groups.pop(gid, None)


# ----------------------------------------------------------------------------------------------- offset expiry


def expire_offsets(st: CoordinatorState, now_ms: int) -> Result:
    """Kafka's `cleanupGroupMetadata(removeExpiredOffsets)`: tombstone expired offsets; an Empty group left with
    no offsets becomes Dead and is tombstoned too."""
    out = _Out(st)
    retention = st.config.offsets_retention_ms
    for gid, group in list(st.groups.items()):
        stored = st.view.offsets.get(gid, {})
        expired = [tp for tp, value in stored.items() if _is_expired(group, tp[0], value, now_ms, retention)]
        for topic, partition in sorted(expired):
            out.record((OffsetCommitKey(gid, topic, partition), None))
        if group.state is EMPTY and not st.view.offsets.get(gid):
            group.transition(DEAD, now_ms)
            _tombstone_group(out, gid, everything=False)
    return out.result()


def _is_expired(
    group: ClassicGroup, topic: str, value: OffsetCommitValue, now_ms: int, retention: int
) -> bool:
    ptype = group.protocol_type
    if ptype is not None and group.state is EMPTY:
        base = group.state_timestamp if group.state_timestamp is not None else value.commit_timestamp
    elif ptype == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None and group.state is STABLE:
        if topic in group.subscribed_topics:
            return False
        base = value.commit_timestamp
    elif ptype is None:
        base = value.commit_timestamp
    else:
        return False
    if value.expire_timestamp >= 0:
        return now_ms >= value.expire_timestamp
    return now_ms - base >= retention


# ------------------------------------------------------------------------------------------------------ timers


def on_timer(st: CoordinatorState, key: TimerKey, now_ms: int) -> Result:
    """A timer the edge armed has fired at `now_ms`. Stale firings (the thing it guarded moved on) do nothing."""
    if key.kind is TimerKind.RETENTION:
        result = expire_offsets(st, now_ms)
        nxt = Schedule(key, now_ms + st.config.offsets_retention_check_interval_ms)
        return Result(result.records, result.responses, (*result.timers, nxt))
    out = _Out(st)
    group = st.groups.get(key.group_id)
    if group is None or group.state is DEAD:
        return out.result()
    if key.kind is TimerKind.HEARTBEAT:
        member = group.members.get(key.member_id)
        if member is None:
            return out.result()
        member.armed_deadline_ms = None
        if member.deadline_ms > now_ms:
            member.armed_deadline_ms = member.deadline_ms
            out.schedule(key, member.deadline_ms)
        elif not member.is_new and (member.awaiting_join or member.awaiting_sync):
            pass  # parked members satisfy their heartbeat; re-armed when the parked request is answered
        else:
            _remove_member_and_update_group(out, group, member, now_ms)
    elif key.kind is TimerKind.PENDING_MEMBER:
        deadline = group.pending_members.get(key.member_id)
        if deadline is not None and deadline <= now_ms:
            _remove_pending_member(out, group, key.member_id, now_ms)
    elif key.kind is TimerKind.JOIN:
        if group.state is PREPARING:
            initial = group.initial_join
            if initial is not None:
                delay, remaining = initial
                if group.new_member_added and remaining != 0:
                    group.new_member_added = False
                    next_delay = min(st.config.group_initial_rebalance_delay_ms, remaining)
                    group.initial_join = (next_delay, max(remaining - delay, 0))
                    out.schedule(key, now_ms + next_delay)
                    return out.result()
                group.initial_join = None
            _on_complete_join(out, group, now_ms)
    elif key.kind is TimerKind.SYNC and group.state in (COMPLETING, STABLE) and group.pending_sync:
        # Members that never sent SyncGroup after the join completed are dropped, then the group rebalances.
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                _drop_member(out, group, member)
        _prepare_rebalance(out, group, now_ms)
    return out.result()


# ------------------------------------------------------------------------------------------------------ unload


def unload_groups(st: CoordinatorState, owned: Callable[[str], bool], now_ms: int) -> Result:
    """Kafka's `onGroupUnloaded` for every group `owned(group_id)` no longer covers (offsets partition moved away):
    parked JoinGroup/SyncGroup are answered NOT_COORDINATOR, timers cancelled, the group goes Dead and leaves memory
    together with its offsets. Nothing is written: the log still holds the group for its next coordinator."""
    out = _Out(st)
    for gid, group in list(st.groups.items()):
        if owned(gid):
            continue
        for member in group.members.values():
            if member.join_token is not None:
                out.respond(
                    member.join_token, _join_error(member.join_version, member.member_id, E.NOT_COORDINATOR)
                )
                group.set_join_token(member, None)
            if member.sync_token is not None:
                out.respond(member.sync_token, _sync_error(E.NOT_COORDINATOR))
                member.sync_token = None
            out.cancel(_hb_key(group, member.member_id))
        for member_id in group.pending_members:
            out.cancel(TimerKey(TimerKind.PENDING_MEMBER, gid, member_id))
        out.cancel(_join_key(group))
        out.cancel(_sync_key(group))
        group.transition(DEAD, now_ms)
        del st.groups[gid]
        st.view.forget(gid)
    return out.result()


# -------------------------------------------------------------------------------------------------------- load


def load(st: CoordinatorState, records: Iterable[Record], now_ms: int) -> Result:
    """Replay a log into the view, then rebuild live groups as Kafka does on partition load: a group with members
    is Stable (members get fresh session deadlines), one without is Empty; offset-only groups are simple groups."""
    out = _Out(st)
    for record in records:
        replay(st.view, record)
    for gid, value in st.view.groups.items():
        st.groups[gid] = _group_from_record(gid, value, now_ms)
    for gid in st.view.offsets:
        if gid not in st.groups:
            st.groups[gid] = ClassicGroup(gid, now_ms)
    for group in st.groups.values():
        for member in group.members.values():
            _touch(out, group, member, now_ms, member.session_timeout_ms)
    out.schedule(TimerKey(TimerKind.RETENTION), now_ms + st.config.offsets_retention_check_interval_ms)
    return out.result()


def _group_from_record(gid: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
    group = ClassicGroup(gid, now_ms)
    group.generation = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    group.leader_id = value.leader
    for mv in value.members:
        member = Member(
            mv.member_id,
            mv.group_instance_id,
            mv.client_id,
            mv.client_host,
            mv.rebalance_timeout,
            mv.session_timeout,
            value.protocol_type,
            ((value.protocol or "", mv.subscription),),
        )
        member.assignment = mv.assignment
        group.add(member, None, 0)
    group.state = STABLE if group.members else EMPTY
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
