"""The classic group APIs on the wire: kafka-python request objects (or the fast paths' values) into
`zkcoord.group.messages` requests, and those responses encoded at the request's version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.consumer import (
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)

from zkcoord.api_keys import ApiKey
from zkcoord.group import messages as gm
from zkcoord.server import fastpath
from zkcoord.server.kafka_protocol.common import bitfield
from zkcoord.server.kafka_protocol.frames import (
    FAST_VALUES,
    RequestFrame,
    UnknownApiKey,
    encode,
    frame_response,
)

# Plain ints, compared per request (an enum member's attribute lookup costs more than the comparison).
HEARTBEAT = int(ApiKey.HEARTBEAT)
JOIN_GROUP = int(ApiKey.JOIN_GROUP)
SYNC_GROUP = int(ApiKey.SYNC_GROUP)
LEAVE_GROUP = int(ApiKey.LEAVE_GROUP)
OFFSET_COMMIT = int(ApiKey.OFFSET_COMMIT)
OFFSET_FETCH = int(ApiKey.OFFSET_FETCH)
DESCRIBE_GROUPS = int(ApiKey.DESCRIBE_GROUPS)
LIST_GROUPS = int(ApiKey.LIST_GROUPS)
DELETE_GROUPS = int(ApiKey.DELETE_GROUPS)


def _s(value: str | None) -> str:
    return value if value is not None else ""


def group_requests(req: RequestFrame, client_host: str = "") -> list[gm.GroupRequest]:
    """The zkcoord request(s) for one group-API frame: one, except OffsetFetch v8+ (one per group)."""
    b = req.body
    v = req.api_version
    key = req.api_key
    if type(b) in FAST_VALUES:
        return [b]  # already a zkcoord value (decoded by zkcoord.server.fastpath)
    if key == HEARTBEAT:
        return [
            gm.HeartbeatRequest(
                v, b.group_id, b.generation_id, b.member_id, b.group_instance_id if v >= 3 else None
            )
        ]
    if key == JOIN_GROUP:
        return [
            gm.JoinGroupRequest(
                api_version=v,
                group_id=b.group_id,
                session_timeout_ms=b.session_timeout_ms,
                rebalance_timeout_ms=b.rebalance_timeout_ms if v >= 1 else -1,
                member_id=b.member_id,
                group_instance_id=b.group_instance_id if v >= 5 else None,
                protocol_type=b.protocol_type,
                protocols=tuple((p.name, bytes(p.metadata)) for p in b.protocols),
                reason=b.reason if v >= 8 else None,
                client_id=_s(req.client_id),
                client_host=client_host,
            )
        ]
    if key == SYNC_GROUP:
        return [
            gm.SyncGroupRequest(
                api_version=v,
                group_id=b.group_id,
                generation_id=b.generation_id,
                member_id=b.member_id,
                group_instance_id=b.group_instance_id if v >= 3 else None,
                protocol_type=b.protocol_type if v >= 5 else None,
                protocol_name=b.protocol_name if v >= 5 else None,
                assignments=tuple((a.member_id, bytes(a.assignment)) for a in b.assignments or ()),
            )
        ]
    if key == LEAVE_GROUP:
        if v >= 3:
            members = tuple(
                gm.LeaveGroupMember(m.member_id, m.group_instance_id, m.reason if v >= 5 else None)
                for m in b.members
            )
        else:
            members = (gm.LeaveGroupMember(b.member_id, None),)
        return [gm.LeaveGroupRequest(v, b.group_id, members)]
    if key == OFFSET_COMMIT:
        topics = tuple(
            gm.OffsetCommitRequestTopic(
                t.name,
                tuple(
                    gm.OffsetCommitRequestPartition(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                        committed_metadata=p.committed_metadata,
                        commit_timestamp=p.commit_timestamp if v == 1 else -1,
                    )
                    for p in t.partitions
                ),
            )
            for t in b.topics
        )
        return [
            gm.OffsetCommitRequest(
                api_version=v,
                group_id=b.group_id,
                generation_id=b.generation_id_or_member_epoch if v >= 1 else -1,
                member_id=b.member_id if v >= 1 else "",
                topics=topics,
                group_instance_id=b.group_instance_id if v >= 7 else None,
                retention_time_ms=b.retention_time_ms if 2 <= v <= 4 else -1,
            )
        ]
    if key == OFFSET_FETCH:
        stable = bool(b.require_stable) if v >= 7 else False
        if v >= 8:
            return [
                gm.OffsetFetchRequest(
                    v,
                    g.group_id,
                    None
                    if g.topics is None
                    else tuple(
                        gm.OffsetFetchRequestTopic(t.name, tuple(t.partition_indexes)) for t in g.topics
                    ),
                    stable,
                    g.member_id if v >= 9 else None,
                    g.member_epoch if v >= 9 else -1,
                )
                for g in b.groups
            ]
        topics_v = (
            None
            if b.topics is None
            else tuple(gm.OffsetFetchRequestTopic(t.name, tuple(t.partition_indexes)) for t in b.topics)
        )
        return [gm.OffsetFetchRequest(v, b.group_id, topics_v, stable)]
    if key == DESCRIBE_GROUPS:
        return [
            gm.DescribeGroupsRequest(
                v, tuple(b.groups), bool(b.include_authorized_operations) if v >= 3 else False
            )
        ]
    if key == LIST_GROUPS:
        return [
            gm.ListGroupsRequest(
                v,
                tuple(b.states_filter or ()) if v >= 4 else (),
                tuple(b.types_filter or ()) if v >= 5 else (),
            )
        ]
    if key == DELETE_GROUPS:
        return [gm.DeleteGroupsRequest(v, tuple(b.groups_names))]
    raise UnknownApiKey("not a group API", key, v, req.correlation_id)


_HEARTBEAT_V0 = struct.Struct(">h")
_HEARTBEAT_V1 = struct.Struct(">ih")


def group_response(req: RequestFrame, responses: Sequence[gm.GroupResponse]) -> bytes:
    """Encode the zkcoord response(s) to one group-API frame at its version."""
    v = req.api_version
    key = req.api_key
    r: Any = responses[0]
    if key == HEARTBEAT:
        # The hottest group API: its body is fixed fields, so it is packed directly (byte-identical to
        # HeartbeatResponse.encode, checked in tests) instead of building a response object per heartbeat.
        if v == 0:
            body = _HEARTBEAT_V0.pack(r.error_code)
        elif v < 4:
            body = _HEARTBEAT_V1.pack(0, r.error_code)
        else:
            body = _HEARTBEAT_V1.pack(0, r.error_code) + b"\x00"  # v4 is flexible: empty tagged fields
        return frame_response(key, v, req.correlation_id, body)
    if key == JOIN_GROUP:
        M = JoinGroupResponse.JoinGroupResponseMember
        protocol_name = r.protocol_name if v >= 7 else _s(r.protocol_name)
        resp = JoinGroupResponse(
            version=v,
            throttle_time_ms=0,
            error_code=r.error_code,
            generation_id=r.generation_id,
            protocol_type=r.protocol_type,
            protocol_name=protocol_name,
            leader=r.leader,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
            members=[
                M(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
                for m in r.members
            ],
        )
        return encode(req, resp)
    if key == SYNC_GROUP:
        resp = SyncGroupResponse(
            version=v,
            throttle_time_ms=0,
            error_code=r.error_code,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            assignment=r.assignment,
        )
        return encode(req, resp)
    if key == LEAVE_GROUP:
        MR = LeaveGroupResponse.MemberResponse
        if v >= 3:
            resp = LeaveGroupResponse(
                version=v,
                throttle_time_ms=0,
                error_code=r.error_code,
                members=[
                    MR(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error_code)
                    for m in r.members
                ],
            )
        else:
            error = r.error_code if r.error_code != 0 or not r.members else r.members[0].error_code
            resp = LeaveGroupResponse(version=v, throttle_time_ms=0, error_code=error)
        return encode(req, resp)
    if key == OFFSET_COMMIT:
        packed = fastpath.offset_commit_response(v, req.correlation_id, r.topics)
        if packed is not None:
            return packed
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        resp = OffsetCommitResponse(
            version=v,
            throttle_time_ms=0,
            topics=[
                T(
                    name=t.name,
                    partitions=[
                        P(partition_index=p.partition_index, error_code=p.error_code) for p in t.partitions
                    ],
                )
                for t in r.topics
            ],
        )
        return encode(req, resp)
    if key == OFFSET_FETCH:
        return encode(req, _offset_fetch_response(req, responses))
    if key == DESCRIBE_GROUPS:
        G = DescribeGroupsResponse.DescribedGroup
        DM = G.DescribedGroupMember
        resp = DescribeGroupsResponse(
            version=v,
            throttle_time_ms=0,
            groups=[
                G(
                    error_code=g.error_code,
                    error_message=None,
                    group_id=g.group_id,
                    group_state=g.group_state,
                    protocol_type=g.protocol_type,
                    protocol_data=g.protocol_data,
                    members=[
                        DM(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.member_metadata,
                            member_assignment=m.member_assignment,
                        )
                        for m in g.members
                    ],
                    authorized_operations=bitfield(g.authorized_operations),
                )
                for g in r.groups
            ],
        )
        return encode(req, resp)
    if key == LIST_GROUPS:
        LG = ListGroupsResponse.ListedGroup
        resp = ListGroupsResponse(
            version=v,
            throttle_time_ms=0,
            error_code=r.error_code,
            groups=[
                LG(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.group_state,
                    group_type=g.group_type,
                )
                for g in r.groups
            ],
        )
        return encode(req, resp)
    if key == DELETE_GROUPS:
        DR = DeleteGroupsResponse.DeletableGroupResult
        resp = DeleteGroupsResponse(
            version=v,
            throttle_time_ms=0,
            results=[DR(group_id=x.group_id, error_code=x.error_code) for x in r.results],
        )
        return encode(req, resp)
    raise UnknownApiKey("not a group API", key, v, req.correlation_id)


def _offset_fetch_response(req: RequestFrame, responses: Sequence[gm.GroupResponse]) -> Any:
    v = req.api_version
    cls = OffsetFetchResponse
    if v >= 8:
        G = cls.OffsetFetchResponseGroup
        GT = G.OffsetFetchResponseTopics
        GP = GT.OffsetFetchResponsePartitions
        groups = []
        for greq, gresp in zip(group_requests(req), responses, strict=True):
            assert isinstance(greq, gm.OffsetFetchRequest) and isinstance(gresp, gm.OffsetFetchResponse)
            groups.append(
                G(
                    group_id=greq.group_id,
                    error_code=gresp.error_code,
                    topics=[
                        GT(
                            name=t.name,
                            partitions=[
                                GP(
                                    partition_index=p.partition_index,
                                    committed_offset=p.committed_offset,
                                    committed_leader_epoch=p.committed_leader_epoch,
                                    metadata=p.metadata,
                                    error_code=p.error_code,
                                )
                                for p in t.partitions
                            ],
                        )
                        for t in gresp.topics
                    ],
                )
            )
        return cls(version=v, throttle_time_ms=0, groups=groups)
    r = responses[0]
    assert isinstance(r, gm.OffsetFetchResponse)
    T = cls.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    return cls(
        version=v,
        throttle_time_ms=0,
        error_code=r.error_code,
        topics=[
            T(
                name=t.name,
                partitions=[
                    P(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch,
                        metadata=p.metadata,
                        # before v2 there is no top-level error: a group-wide error goes into each partition
                        error_code=p.error_code if v >= 2 or r.error_code == 0 else r.error_code,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )
