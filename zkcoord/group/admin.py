"""The admin group APIs (DescribeGroups, ListGroups, DeleteGroups), answered per group from the live state.

DescribeGroups and DeleteGroups run the edge's per-group status check (`status`) on each named group; only
DeleteGroups emits records: the tombstones of an Empty group and all its offsets.
"""

from __future__ import annotations

from collections.abc import Callable

from zkcoord.group.common import (
    DEAD,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    EMPTY,
    STABLE,
    E,
    Effects,
    group_status_error,
)
from zkcoord.group.consumer import tombstone_consumer_group
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from zkcoord.group.model import CoordinatorState
from zkcoord.group.offsets import tombstone_group
from zkcoord.group.results import Result
from zkcoord.group.state import parse_state

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
        # A consumer group is not a classic group: Kafka 4 describes it as Dead, with no error below v6 (the
        # versions served here; v6 adds GROUP_ID_NOT_FOUND and "Group gid is not a classic group.").
        if gid in st.consumer_groups or group is None or group.state is DEAD:
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
    state_names = {s.lower() for s in req.states_filter}
    types = {t.lower() for t in req.types_filter}  # Kafka's group types: classic, consumer
    classic = tuple(
        ListedGroup(g.group_id, g.protocol_type or "", g.state.value, "classic")
        for g in st.groups.values()
        if g.state is not DEAD
        and g.group_id not in st.consumer_groups
        and (not states or g.state in states)
        and (not types or "classic" in types)
    )
    consumer = tuple(
        ListedGroup(gid, "consumer", g.state_name(), "consumer")
        for gid, g in sorted(st.consumer_groups.items())
        if (not state_names or g.state_name().lower() in state_names) and (not types or "consumer" in types)
    )
    listed = classic + consumer
    return Result(responses=((token, ListGroupsResponse(error_code, listed)),))


def handle_delete(
    st: CoordinatorState,
    req: DeleteGroupsRequest,
    now_ms: int,
    token: int,
    status: StatusCheck = _no_status_error,
) -> Result:
    out = Effects(st)
    results = []
    for gid in req.groups_names:
        err = group_status_error(gid, DELETE_GROUPS) or status(gid)
        if err is None and gid in st.consumer_groups:
            if st.consumer_groups[gid].members:
                err = E.NON_EMPTY_GROUP
            else:  # an empty consumer group: its records and offsets go, as Kafka's deleteGroups does
                out.records.extend(tombstone_consumer_group(st, gid))
                tombstone_group(out, gid, everything=True)
        elif err is None:
            group = st.groups.get(gid)
            if group is None or group.state is DEAD:
                err = E.GROUP_ID_NOT_FOUND
            elif group.state is EMPTY:
                group.transition(DEAD, now_ms)
                tombstone_group(out, gid, everything=True)
            else:
                err = E.NON_EMPTY_GROUP
        results.append(DeletableGroupResult(gid, int(err or 0)))
    out.respond(token, DeleteGroupsResponse(tuple(results)))
    return out.result()
