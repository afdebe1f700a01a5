"""Group membership (classic `GroupMetadataManager`): Join/Sync/Heartbeat/Leave and the timers that guard them.

Handlers change the live groups and return records, responses and timers; they do no I/O. A rebalance runs
Kafka's steps in Kafka's order: prepare (cancel the sync wait, arm the join timer), complete the join when every
member rejoined or the timer fired (drop the rest, next generation, answer the parked JoinGroups), then wait for
the leader's SyncGroup, whose assignment is recorded before any member's response.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from zkcoord.group.common import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    E,
    Effects,
    heartbeat_key,
    join_error,
    join_key,
    sync_error,
    sync_key,
    touch,
    validate_current_member,
)
from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.group.model import ClassicGroup, CoordinatorState, Member, group_record
from zkcoord.group.results import Result, Schedule, TimerKey, TimerKind
from zkcoord.group.state import CAN_REBALANCE

_HEARTBEAT_RESPONSES = {code: HeartbeatResponse(int(code)) for code in ErrorCode}

# A policy the caller may supply for one JoinGroup (`handle_join`): whether a current member's rejoin of a Stable
# group, which Kafka answers with a new rebalance (a changed subscription, or the leader), is answered in the
# current generation instead. Plain groups get none and keep Kafka's behaviour; a mixed group's (whose
# assignment the coordinator computes itself) says yes to a KIP-429 member whose rejoin only shows it gave up
# what it was told to (zkcoord.server.mixed_decisions.rejoins_in_place).
RejoinInPlace = Callable[[ClassicGroup, Member, JoinGroupRequest], bool]

# Rebalances and departures at INFO, as Kafka's GroupCoordinator logs them: why a group rebalanced is the first
# question of anyone watching one that does not settle. Heartbeats and commits log nothing.
log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------- rebalance mechanics


def _maybe_prepare_rebalance(out: Effects, group: ClassicGroup, now_ms: int, reason: str) -> None:
    if group.state in CAN_REBALANCE:
        _prepare_rebalance(out, group, now_ms, reason)


def _prepare_rebalance(out: Effects, group: ClassicGroup, now_ms: int, reason: str) -> None:
    log.info(
        "group=%s gen=%d preparing to rebalance in state %s (reason: %s)",
        group.group_id,
        group.generation,
        group.state.value,
        reason,
    )
    _drop_sync_holds(out, group, now_ms)
    if group.state is COMPLETING:
        _reset_and_propagate_assignment_error(out, group, E.REBALANCE_IN_PROGRESS, now_ms)
    out.cancel(sync_key(group))
    cfg = out.st.config
    if group.state is EMPTY:
        delay = cfg.group_initial_rebalance_delay_ms
        group.initial_join = (delay, max(group.rebalance_timeout_ms() - delay, 0))
        group.new_member_added = False
        out.schedule(join_key(group), now_ms + delay)
        group.transition(PREPARING, now_ms)
    else:
        group.initial_join = None
        out.schedule(join_key(group), now_ms + group.rebalance_timeout_ms())
        group.transition(PREPARING, now_ms)
        _try_complete_join(out, group, now_ms)


def _reset_and_propagate_assignment_error(
    out: Effects, group: ClassicGroup, code: ErrorCode, now_ms: int
) -> None:
    response = sync_error(code)
    for member in group.members.values():
        member.assignment = b""
        if member.sync_token is not None:
            out.respond(member.sync_token, response)
            member.sync_token = None
            touch(out, group, member, now_ms, member.session_timeout_ms)


def _try_complete_join(out: Effects, group: ClassicGroup, now_ms: int) -> None:
    if group.state is PREPARING and group.initial_join is None and group.has_all_members_joined():
        out.cancel(join_key(group))
        _on_complete_join(out, group, now_ms)


def _drop_member(out: Effects, group: ClassicGroup, member: Member) -> None:
    """Remove without rebalancing; any parked request of the member is answered UNKNOWN_MEMBER_ID."""
    if member.join_token is not None:
        out.respond(member.join_token, join_error(member.join_version, member.member_id, E.UNKNOWN_MEMBER_ID))
        group.set_join_token(member, None)
    if member.sync_token is not None:
        out.respond(member.sync_token, sync_error(E.UNKNOWN_MEMBER_ID))
        member.sync_token = None
    group.remove(member.member_id)
    if member.armed_deadline_ms is not None:
        member.armed_deadline_ms = None
        out.cancel(heartbeat_key(group, member.member_id))


def _remove_member_and_update_group(
    out: Effects, group: ClassicGroup, member: Member, now_ms: int, why: str
) -> None:
    log.info("group=%s gen=%d member=%s removed: %s", group.group_id, group.generation, member.member_id, why)
    _drop_member(out, group, member)
    if group.state in (STABLE, COMPLETING):
        _maybe_prepare_rebalance(out, group, now_ms, f"removing member {member.member_id}: {why}")
    elif group.state is PREPARING:
        _try_complete_join(out, group, now_ms)


def _remove_pending_member(out: Effects, group: ClassicGroup, member_id: str, now_ms: int) -> None:
    group.remove(member_id)
    out.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
    if group.state is PREPARING:
        _try_complete_join(out, group, now_ms)


def _on_complete_join(out: Effects, group: ClassicGroup, now_ms: int) -> None:
    for member in [m for m in group.members.values() if m.join_token is None and m.group_instance_id is None]:
        log.info(
            "group=%s gen=%d member=%s removed: did not rejoin",
            group.group_id,
            group.generation,
            member.member_id,
        )
        _drop_member(out, group, member)
    if group.state is DEAD:
        return
    if not _maybe_elect_new_joined_leader(group) and group.members:
        # Only static members that have not rejoined remain: wait another round for them (or their expiry).
        out.schedule(join_key(group), now_ms + group.rebalance_timeout_ms())
        return
    _init_next_generation(group, now_ms)
    log.info(
        "group=%s gen=%d stabilized: members=%d leader=%s protocol=%s",
        group.group_id,
        group.generation,
        len(group.members),
        group.leader_id,
        group.protocol_name,
    )
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
        touch(out, group, member, now_ms, member.session_timeout_ms)
        member.is_new = False
        group.pending_sync[member.member_id] = None
    out.schedule(sync_key(group), now_ms + group.rebalance_timeout_ms())


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
    group.sync_holds.clear()
    group.new_member_added = False


# -------------------------------------------------------------------------------------------------- JoinGroup


def handle_join(
    st: CoordinatorState,
    req: JoinGroupRequest,
    now_ms: int,
    token: int,
    member_uuid: str,
    in_place: RejoinInPlace | None = None,
) -> Result:
    """JoinGroup (after the common status checks). `member_uuid` is the edge's fresh UUID for a new member id;
    `in_place`: the caller's `RejoinInPlace` policy (None: Kafka's rules only)."""
    out = Effects(st)
    v = req.api_version
    cfg = st.config
    if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        out.respond(token, join_error(v, req.member_id, E.INVALID_SESSION_TIMEOUT))
        return out.result()
    is_unknown = req.member_id == ""
    group = st.groups.get(req.group_id)
    if group is None:
        if not is_unknown:
            out.respond(token, join_error(v, req.member_id, E.UNKNOWN_MEMBER_ID))
            return out.result()
        group = st.groups[req.group_id] = ClassicGroup(req.group_id, now_ms)
    if not _accept_joining_member(group, req.member_id, cfg):
        member = group.members.get(req.member_id)
        if member is not None:
            _drop_member(out, group, member)
        else:
            group.remove(req.member_id)
        out.respond(token, join_error(v, "", E.GROUP_MAX_SIZE_REACHED))
    elif is_unknown:
        _join_new_member(out, group, req, now_ms, token, member_uuid)
    else:
        _join_current_member(out, group, req, now_ms, token, in_place)
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
    out: Effects, group: ClassicGroup, req: JoinGroupRequest, now_ms: int, token: int, member_uuid: str
) -> None:
    v = req.api_version
    if group.state is DEAD:
        out.respond(token, join_error(v, "", E.COORDINATOR_NOT_AVAILABLE))
        return
    if not group.supports_protocols(req.protocol_type, req.protocols):
        out.respond(token, join_error(v, "", E.INCONSISTENT_GROUP_PROTOCOL))
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
        out.respond(token, join_error(v, new_id, E.MEMBER_ID_REQUIRED))
    else:
        _add_member_and_rebalance(out, group, req, new_id, now_ms, token)


def _join_current_member(
    out: Effects,
    group: ClassicGroup,
    req: JoinGroupRequest,
    now_ms: int,
    token: int,
    in_place: RejoinInPlace | None = None,
) -> None:
    v = req.api_version
    member_id = req.member_id
    if group.state is DEAD:
        out.respond(token, join_error(v, member_id, E.COORDINATOR_NOT_AVAILABLE))
        return
    if not group.supports_protocols(req.protocol_type, req.protocols):
        out.respond(token, join_error(v, member_id, E.INCONSISTENT_GROUP_PROTOCOL))
        return
    if member_id in group.pending_members:
        if req.group_instance_id is not None:
            # Kafka raises IllegalStateException here (a pending id is never static), which reaches the client
            # as UNKNOWN_SERVER_ERROR.
            out.respond(token, join_error(v, member_id, E.UNKNOWN_SERVER_ERROR))
            return
        out.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
        _add_member_and_rebalance(out, group, req, member_id, now_ms, token)
        return
    instance = req.group_instance_id
    current_static = group.static_members.get(instance) if instance is not None else None
    if current_static is not None and current_static != member_id:
        out.respond(token, join_error(v, member_id, E.FENCED_INSTANCE_ID))
        return
    member = group.members.get(member_id)
    if member is None or (instance is not None and current_static is None):
        out.respond(token, join_error(v, member_id, E.UNKNOWN_MEMBER_ID))
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
            if in_place is not None and in_place(group, member, req):
                _rejoin_in_place(out, group, member, req, now_ms, token)
            else:
                _update_member_and_rebalance(out, group, member, req, now_ms, token)
        else:
            out.respond(token, _current_generation_response(group, member, v, with_members=False))
    else:
        out.respond(token, join_error(v, member_id, E.UNKNOWN_MEMBER_ID))


def _protocol_name(version: int, name: str | None) -> str | None:
    return "" if name is None and version < 7 else name


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


def _set_join(out: Effects, group: ClassicGroup, member: Member, token: int, version: int) -> None:
    if member.join_token is not None and member.join_token != token:
        # A retried JoinGroup supersedes the parked one; answer the old request instead of leaking it.
        out.respond(
            member.join_token, join_error(member.join_version, member.member_id, E.REBALANCE_IN_PROGRESS)
        )
    group.set_join_token(member, token, version)


def _rejoin_in_place(
    out: Effects, group: ClassicGroup, member: Member, req: JoinGroupRequest, now_ms: int, token: int
) -> None:
    """The `RejoinInPlace` policy's answer: the member's new metadata is stored (and recorded, as a rebalance
    would), and it gets the current generation, as Kafka answers a follower that rejoins a Stable group
    unchanged (a leader gets the member list too, whose assignment its SyncGroup then cannot change: a Stable
    group answers every SyncGroup with the stored assignment)."""
    if member.protocols != req.protocols:
        group.update_protocols(member, req.protocols)
    member.rebalance_timeout_ms = _rebalance_timeout(req)
    member.session_timeout_ms = req.session_timeout_ms
    log.info(
        "group=%s gen=%d member=%s rejoined in place (no rebalance: the group's policy accepts its new metadata)",
        group.group_id,
        group.generation,
        member.member_id,
    )
    out.record(group_record(group, now_ms))
    touch(out, group, member, now_ms, member.session_timeout_ms)
    out.respond(token, _current_generation_response(group, member, req.api_version, with_members=True))


def _update_member_and_rebalance(
    out: Effects, group: ClassicGroup, member: Member, req: JoinGroupRequest, now_ms: int, token: int
) -> None:
    if member.protocols != req.protocols:
        group.update_protocols(member, req.protocols)
    member.rebalance_timeout_ms = _rebalance_timeout(req)
    member.session_timeout_ms = req.session_timeout_ms
    _set_join(out, group, member, token, req.api_version)
    _maybe_prepare_rebalance(
        out, group, now_ms, f"member {member.member_id} rejoined in state {group.state.value}"
    )


def _add_member_and_rebalance(
    out: Effects, group: ClassicGroup, req: JoinGroupRequest, member_id: str, now_ms: int, token: int
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
    touch(out, group, member, now_ms, out.st.config.new_member_join_timeout_ms)
    _maybe_prepare_rebalance(out, group, now_ms, f"adding new member {member_id} (client {req.client_id})")


def _update_static_member_and_rebalance(
    out: Effects,
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
    touch(out, group, member, now_ms, member.session_timeout_ms)
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
            _maybe_prepare_rebalance(
                out, group, now_ms, f"static member {new_id} rejoined with other protocols"
            )
    elif state is COMPLETING:
        # Assignments computed for the old id would not reach the new one: start over.
        _prepare_rebalance(out, group, now_ms, f"static member {new_id} replaced {old_id} during the sync")


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


def _replace_static_member(out: Effects, group: ClassicGroup, old_id: str, new_id: str) -> Member:
    member = group.members.pop(old_id)
    if member.join_token is not None:
        out.respond(member.join_token, join_error(member.join_version, old_id, E.FENCED_INSTANCE_ID))
        group.set_join_token(member, None)
    if member.sync_token is not None:
        out.respond(member.sync_token, sync_error(E.FENCED_INSTANCE_ID))
        member.sync_token = None
    if member.armed_deadline_ms is not None:
        out.cancel(heartbeat_key(group, old_id))
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


# -------------------------------------------------------------------------------------------------- SyncGroup


def handle_sync(st: CoordinatorState, req: SyncGroupRequest, now_ms: int, token: int) -> Result:
    out = Effects(st)
    group = st.groups.get(req.group_id)
    if group is None:
        out.respond(token, sync_error(E.UNKNOWN_MEMBER_ID))
        return out.result()
    if group.state is DEAD:
        out.respond(token, sync_error(E.COORDINATOR_NOT_AVAILABLE))
        return out.result()
    err = validate_current_member(group, req.member_id, req.group_instance_id)
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
        out.respond(token, sync_error(err))
        return out.result()
    member = group.members[req.member_id]
    if group.state is COMPLETING:
        if member.sync_token is not None:
            out.respond(member.sync_token, sync_error(E.REBALANCE_IN_PROGRESS))
        member.sync_token = token
        _remove_pending_sync(out, group, req.member_id)
        if group.is_leader(req.member_id):
            assignment = dict(req.assignments)
            for m in group.members.values():
                m.assignment = assignment.get(m.member_id, b"")
            out.record(group_record(group, now_ms))
            for m in group.members.values():
                if m.sync_token is not None and m.member_id not in group.sync_holds:
                    out.respond(
                        m.sync_token,
                        SyncGroupResponse(0, group.protocol_type, group.protocol_name, m.assignment),
                    )
                    m.sync_token = None
                    touch(out, group, m, now_ms, m.session_timeout_ms)
            group.transition(STABLE, now_ms)
    elif req.member_id in group.sync_holds:  # Stable, its answer held (hold_sync_answers)
        if member.sync_token is not None:
            out.respond(member.sync_token, sync_error(E.REBALANCE_IN_PROGRESS))
        member.sync_token = token
        _remove_pending_sync(out, group, req.member_id)
    else:  # Stable
        _remove_pending_sync(out, group, req.member_id)
        out.respond(token, SyncGroupResponse(0, group.protocol_type, group.protocol_name, member.assignment))
        touch(out, group, member, now_ms, member.session_timeout_ms)
    return out.result()


def hold_sync_answers(
    st: CoordinatorState, group_id: str, generation: int, member_ids: tuple[str, ...], deadline_ms: int
) -> Result:
    """Hold the SyncGroup answers of `member_ids` in `generation`, whose join completed (called before the
    leader's SyncGroup is handled): whenever each one's SyncGroup arrives, it stays parked until
    `release_sync_answer` (with a new assignment, or the stored one) or `deadline_ms` (the stored one). A new
    rebalance answers it REBALANCE_IN_PROGRESS, as Kafka answers a parked SyncGroup then. Nothing is recorded:
    the hold is live state only, and a reloaded coordinator answers from the recorded assignment. Anything else
    (another generation or state, a member gone) holds nothing."""
    out = Effects(st)
    group = st.groups.get(group_id)
    if group is None or group.state is not COMPLETING or group.generation != generation:
        return out.result()
    for member_id in member_ids:
        if member_id in group.members:
            group.sync_holds[member_id] = deadline_ms
            out.schedule(TimerKey(TimerKind.SYNC_HOLD, group_id, member_id), deadline_ms)
    return out.result()


def release_sync_answer(
    st: CoordinatorState,
    group_id: str,
    generation: int,
    member_id: str,
    assignment: bytes | None,
    now_ms: int,
) -> Result:
    """End the hold of `member_id` in `generation` of a Stable group: store `assignment` (recorded; None keeps
    the stored one) and answer its parked SyncGroup with it (a SyncGroup still to come gets it as usual).
    Nothing when the member's answer is not held in that generation (`sync_held` tells beforehand)."""
    out = Effects(st)
    group = st.groups.get(group_id)
    if group is None or not sync_held(group, generation, member_id):
        return out.result()
    del group.sync_holds[member_id]
    out.cancel(TimerKey(TimerKind.SYNC_HOLD, group_id, member_id))
    member = group.members[member_id]
    if assignment is not None and assignment != member.assignment:
        member.assignment = assignment
        out.record(group_record(group, now_ms))
    _answer_held(out, group, member, now_ms)
    return out.result()


def sync_held(group: ClassicGroup, generation: int, member_id: str) -> bool:
    """Whether `member_id`'s SyncGroup answer in `generation` of a Stable group is held now."""
    return group.state is STABLE and group.generation == generation and member_id in group.sync_holds


def _answer_held(out: Effects, group: ClassicGroup, member: Member, now_ms: int) -> None:
    if member.sync_token is not None:
        out.respond(
            member.sync_token,
            SyncGroupResponse(0, group.protocol_type, group.protocol_name, member.assignment),
        )
        member.sync_token = None
        touch(out, group, member, now_ms, member.session_timeout_ms)


def _drop_sync_holds(out: Effects, group: ClassicGroup, now_ms: int) -> None:
    """A rebalance starts: every held SyncGroup is answered REBALANCE_IN_PROGRESS (the member rejoins)."""
    for member_id in list(group.sync_holds):
        out.cancel(TimerKey(TimerKind.SYNC_HOLD, group.group_id, member_id))
        member = group.members.get(member_id)
        if member is not None and member.sync_token is not None and group.state is STABLE:
            out.respond(member.sync_token, sync_error(E.REBALANCE_IN_PROGRESS))
            member.sync_token = None
            touch(out, group, member, now_ms, member.session_timeout_ms)
    group.sync_holds.clear()


def _remove_pending_sync(out: Effects, group: ClassicGroup, member_id: str) -> None:
    if group.pending_sync.pop(member_id, 0) is None and not group.pending_sync:
        out.cancel(sync_key(group))


# -------------------------------------------------------------------------------------------------- Heartbeat


def handle_heartbeat(st: CoordinatorState, req: HeartbeatRequest, now_ms: int, token: int) -> Result:
    group = st.groups.get(req.group_id)
    if group is None:
        code = E.UNKNOWN_MEMBER_ID
    elif group.state is DEAD:
        code = E.COORDINATOR_NOT_AVAILABLE
    else:
        err = validate_current_member(group, req.member_id, req.group_instance_id)
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
                    timers=(Schedule(heartbeat_key(group, member.member_id), deadline),),
                )
    return Result(responses=((token, _HEARTBEAT_RESPONSES[code]),))


# ------------------------------------------------------------------------------------------------- LeaveGroup


def handle_leave(st: CoordinatorState, req: LeaveGroupRequest, now_ms: int, token: int) -> Result:
    out = Effects(st)
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
                _remove_member_and_update_group(out, group, group.members[current], now_ms, "LeaveGroup")
        elif leaving.member_id in group.pending_members:
            _remove_pending_member(out, group, leaving.member_id, now_ms)
        else:
            err = validate_current_member(group, leaving.member_id, leaving.group_instance_id)
            if err is not None:
                code = err
            else:
                _remove_member_and_update_group(
                    out, group, group.members[leaving.member_id], now_ms, "LeaveGroup"
                )
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


# ----------------------------------------------------------------------------------------------------- timers


def handle_external_rebalance(st: CoordinatorState, group_id: str, now_ms: int) -> Result:
    """Something outside the classic protocol changed the group (a legacy ZooKeeper member of a mixed group
    joined, left or lost its session; a subscribed topic grew): a Stable or CompletingRebalance group prepares a
    rebalance, so its members rejoin and get the new assignment. No record: only the live layer changes, as on any
    rebalance start, so a replayed log is the same with or without it. Any other state: nothing to do (a rebalance
    is already running, or there is no member to tell)."""
    out = Effects(st)
    group = st.groups.get(group_id)
    if group is not None and group.state in (STABLE, COMPLETING):
        _prepare_rebalance(out, group, now_ms, "membership changed outside the classic protocol")
    return out.result()


def on_member_timer(st: CoordinatorState, key: TimerKey, now_ms: int) -> Result:
    """A membership timer fired at `now_ms`. Stale firings (the thing it guarded moved on) do nothing."""
    out = Effects(st)
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
            _remove_member_and_update_group(out, group, member, now_ms, "session timeout expired")
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
    elif key.kind is TimerKind.SYNC_HOLD:
        deadline = group.sync_holds.get(key.member_id)
        member = group.members.get(key.member_id)
        if deadline is not None and deadline <= now_ms and member is not None:
            del group.sync_holds[key.member_id]
            if group.state is STABLE:  # completing: the leader's SyncGroup answers it, held no longer
                log.info(
                    "group=%s gen=%d member=%s: SyncGroup answer no longer held (deadline passed)",
                    group.group_id,
                    group.generation,
                    key.member_id,
                )
                _answer_held(out, group, member, now_ms)
    elif key.kind is TimerKind.SYNC and group.state in (COMPLETING, STABLE) and group.pending_sync:
        # Members that never sent SyncGroup after the join completed are dropped, then the group rebalances.
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                log.info(
                    "group=%s gen=%d member=%s removed: no SyncGroup",
                    group.group_id,
                    group.generation,
                    member_id,
                )
                _drop_member(out, group, member)
        _prepare_rebalance(out, group, now_ms, "members did not send SyncGroup in time")
    return out.result()
