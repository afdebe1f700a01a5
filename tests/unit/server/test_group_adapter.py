"""The group-API adapter: kafka-python frames -> zkcoord.group.messages -> encoded responses, across versions."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import JoinGroupRequest as KJoin
from kafka.protocol.consumer import OffsetCommitRequest as KCommit
from kafka.protocol.consumer import OffsetFetchRequest as KFetch

from zkcoord.group import messages as gm
from zkcoord.server import kafka_protocol as kp


def _req(api_key: int, version: int, **fields: object) -> kp.RequestFrame:
    return kp.decode_request(kp.encode_request(api_key, version, 9, "cli", **fields)[4:])


@pytest.mark.parametrize("version", [0, 1, 5, 7, 9])
def test_join_group_round_trip(version: int) -> None:
    proto = KJoin.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")
    req = _req(
        kp.JOIN_GROUP,
        version,
        group_id="g",
        session_timeout_ms=6000,
        rebalance_timeout_ms=9000,
        member_id="",
        group_instance_id="inst" if version >= 5 else None,
        protocol_type="consumer",
        protocols=[proto],
    )
    (msg,) = kp.group_requests(req, client_host="/127.0.0.1")
    assert isinstance(msg, gm.JoinGroupRequest)
    assert msg.api_version == version and msg.protocols == (("range", b"\x00\x01"),)
    assert msg.rebalance_timeout_ms == (9000 if version >= 1 else -1)
    assert msg.group_instance_id == ("inst" if version >= 5 else None)
    assert msg.client_id == "cli"
    resp = gm.JoinGroupResponse(
        error_code=0,
        generation_id=3,
        protocol_type="consumer",
        protocol_name="range",
        leader="m1",
        skip_assignment=False,
        member_id="m1",
        members=(gm.JoinGroupMember("m1", None, b"meta"),),
    )
    corr, out = kp.decode_response(kp.JOIN_GROUP, version, kp.group_response(req, [resp])[4:])
    assert corr == 9 and out.generation_id == 3 and out.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in out.members] == [("m1", b"meta")]


@pytest.mark.parametrize("version", [0, 2, 3, 5])
def test_leave_group_single_and_batched(version: int) -> None:
    if version >= 3:
        M = kp.LeaveGroupRequest.MemberIdentity
        req = _req(kp.LEAVE_GROUP, version, group_id="g", members=[M(member_id="a", group_instance_id=None)])
    else:
        req = _req(kp.LEAVE_GROUP, version, group_id="g", member_id="a")
    (msg,) = kp.group_requests(req)
    assert isinstance(msg, gm.LeaveGroupRequest) and msg.members[0].member_id == "a"
    resp = gm.LeaveGroupResponse(0, (gm.LeaveGroupMemberResponse("a", None, 25),))
    _corr, out = kp.decode_response(kp.LEAVE_GROUP, version, kp.group_response(req, [resp])[4:])
    if version >= 3:
        assert out.error_code == 0 and [m.error_code for m in out.members] == [25]
    else:
        assert out.error_code == 25  # v0-2: the single member's error is the top-level one


@pytest.mark.parametrize("version", [2, 7, 8])
def test_offset_commit_and_fetch(version: int) -> None:
    T = KCommit.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = _req(
        kp.OFFSET_COMMIT,
        version,
        group_id="g",
        generation_id_or_member_epoch=4,
        member_id="m",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[T(name="t", partitions=[P(partition_index=1, committed_offset=42, committed_metadata="x")])],
    )
    (msg,) = kp.group_requests(req)
    assert isinstance(msg, gm.OffsetCommitRequest)
    assert (msg.generation_id, msg.topics[0].partitions[0].committed_offset) == (4, 42)
    resp = gm.OffsetCommitResponse(
        (gm.OffsetCommitResponseTopic("t", (gm.OffsetCommitResponsePartition(1, 0),)),)
    )
    _corr, out = kp.decode_response(kp.OFFSET_COMMIT, version, kp.group_response(req, [resp])[4:])
    assert out.topics[0].partitions[0].error_code == 0

    if version >= 8:
        G = KFetch.OffsetFetchRequestGroup
        GT = G.OffsetFetchRequestTopics
        freq = _req(
            kp.OFFSET_FETCH,
            8,
            groups=[
                G(group_id="g1", topics=[GT(name="t", partition_indexes=[1])]),
                G(group_id="g2", topics=None),
            ],
            require_stable=False,
        )
    else:
        FT = KFetch.OffsetFetchRequestTopic
        freq = _req(kp.OFFSET_FETCH, version, group_id="g1", topics=[FT(name="t", partition_indexes=[1])])
    msgs = kp.group_requests(freq)
    assert next(m.group_id for m in msgs if isinstance(m, gm.OffsetFetchRequest)) == "g1"
    part = gm.OffsetFetchResponsePartition(1, 42, -1, "x", 0)
    fresps = [gm.OffsetFetchResponse(0, (gm.OffsetFetchResponseTopic("t", (part,)),)) for _ in msgs]
    _corr, fout = kp.decode_response(kp.OFFSET_FETCH, freq.api_version, kp.group_response(freq, fresps)[4:])
    topics = fout.groups[0].topics if freq.api_version >= 8 else fout.topics
    assert topics[0].partitions[0].committed_offset == 42


def test_heartbeat_sync_describe_list_delete() -> None:
    hb = _req(kp.HEARTBEAT, 3, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    (msg,) = kp.group_requests(hb)
    assert msg == gm.HeartbeatRequest(3, "g", 1, "m", None)
    _c, out = kp.decode_response(kp.HEARTBEAT, 3, kp.group_response(hb, [gm.HeartbeatResponse(27)])[4:])
    assert out.error_code == 27
    A = kp.SyncGroupRequest.SyncGroupRequestAssignment
    sync = _req(
        kp.SYNC_GROUP,
        5,
        group_id="g",
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[A(member_id="m", assignment=b"as")],
    )
    (smsg,) = kp.group_requests(sync)
    assert isinstance(smsg, gm.SyncGroupRequest) and smsg.assignments == (("m", b"as"),)
    sresp = gm.SyncGroupResponse(0, "consumer", "range", b"as")
    _c, sout = kp.decode_response(kp.SYNC_GROUP, 5, kp.group_response(sync, [sresp])[4:])
    assert sout.assignment == b"as"
    desc = _req(kp.DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=False)
    dresp = gm.DescribeGroupsResponse((gm.DescribedGroup(0, "g", "Stable", "consumer", "range", ()),))
    _c, dout = kp.decode_response(kp.DESCRIBE_GROUPS, 5, kp.group_response(desc, [dresp])[4:])
    assert dout.groups[0].group_state == "Stable"
    lst = _req(kp.LIST_GROUPS, 4, states_filter=["Stable"])
    (lmsg,) = kp.group_requests(lst)
    assert isinstance(lmsg, gm.ListGroupsRequest) and lmsg.states_filter == ("Stable",)
    lresp = gm.ListGroupsResponse(0, (gm.ListedGroup("g", "consumer", "Stable"),))
    _c, lout = kp.decode_response(kp.LIST_GROUPS, 4, kp.group_response(lst, [lresp])[4:])
    assert [g.group_id for g in lout.groups] == ["g"]
    dele = _req(kp.DELETE_GROUPS, 2, groups_names=["g"])
    xresp = gm.DeleteGroupsResponse((gm.DeletableGroupResult("g", 68),))
    _c, xout = kp.decode_response(kp.DELETE_GROUPS, 2, kp.group_response(dele, [xresp])[4:])
    assert xout.results[0].error_code == 68
