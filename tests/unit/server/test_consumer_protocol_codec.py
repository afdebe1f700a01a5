"""The hand-written ConsumerGroupHeartbeat (68) / ConsumerGroupDescribe (69) codec: round trips of any value, byte
layouts checked against Kafka's schemas by hand, and any bytes -> a request or a precise MalformedBody."""

from __future__ import annotations

import struct
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.group import consumer_messages as cm
from zkcoord.server import consumer_protocol as cp
from zkcoord.server import kafka_protocol as kp

from .consumer_heartbeats import heartbeats as shared_heartbeats

name = st.text(max_size=8)
i32 = st.integers(-(2**31), 2**31 - 1)
topic_id = st.binary(min_size=16, max_size=16).map(bytes.hex)
partitions = st.tuples(topic_id, st.lists(i32, max_size=4).map(tuple))
owned = st.lists(partitions, max_size=3).map(tuple)


heartbeats = partial(shared_heartbeats, name, owned)


@settings(max_examples=300)
@given(req=heartbeats(), corr=i32)
def test_heartbeat_requests_round_trip_through_the_adapter(
    req: cm.ConsumerGroupHeartbeatRequest, corr: int
) -> None:
    frame = kp.encode_consumer_group_request(corr, "client-1", req)
    decoded = kp.decode_request(frame[4:])
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (68, req.api_version, corr)
    assert decoded.body == req
    value = kp.consumer_group_request(decoded, "10.0.0.1")
    assert (value.client_id, value.client_host) == ("client-1", "10.0.0.1")


@settings(max_examples=200)
@given(
    groups=st.lists(name, max_size=3).map(tuple),
    include=st.booleans(),
    corr=i32,
)
def test_describe_requests_round_trip(groups: tuple[str, ...], include: bool, corr: int) -> None:
    req = cm.ConsumerGroupDescribeRequest(0, groups, include)
    decoded = kp.decode_request(kp.encode_consumer_group_request(corr, None, req)[4:])
    assert decoded.body == req and decoded.client_id is None


@settings(max_examples=200)
@given(
    code=st.integers(-(2**15), 2**15 - 1),
    message=st.none() | name,
    member=st.none() | name,
    epoch=i32,
    interval=i32,
    assignment=st.none() | owned,
    version=st.sampled_from((0, 1)),
)
def test_heartbeat_responses_round_trip(
    code: int, message: str | None, member: str | None, epoch: int, interval: int,
    assignment: cm.TopicPartitions | None, version: int,
) -> None:  # fmt: skip
    resp = cm.ConsumerGroupHeartbeatResponse(code, message, member, epoch, interval, assignment)
    req = kp.decode_request(
        kp.encode_consumer_group_request(7, "c", cm.ConsumerGroupHeartbeatRequest(version, "g", "m", 1))[4:]
    )
    frame = kp.consumer_group_response(req, resp)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert kp.decode_consumer_group_response(68, version, frame[4:]) == (7, resp)


described = st.builds(cm.DescribedTopicPartitions, topic_id, name, st.lists(i32, max_size=3).map(tuple))
members = st.builds(
    cm.DescribedConsumerMember,
    name, st.none() | name, st.none() | name, i32, name, name,
    st.lists(name, max_size=2).map(tuple),
    st.lists(described, max_size=2).map(tuple),
    st.lists(described, max_size=2).map(tuple),
)  # fmt: skip
groups_ = st.builds(
    cm.DescribedConsumerGroup,
    st.integers(-(2**15), 2**15 - 1), name, st.none() | name, name, i32, i32, name,
    st.lists(members, max_size=2).map(tuple), i32,
)  # fmt: skip


@settings(max_examples=200)
@given(groups=st.lists(groups_, max_size=3).map(tuple))
def test_describe_responses_round_trip(groups: tuple[cm.DescribedConsumerGroup, ...]) -> None:
    resp = cm.ConsumerGroupDescribeResponse(groups)
    req = kp.decode_request(
        kp.encode_consumer_group_request(9, "c", cm.ConsumerGroupDescribeRequest(0, ()))[4:]
    )
    assert kp.decode_consumer_group_response(69, 0, kp.consumer_group_response(req, resp)[4:]) == (9, resp)


def test_a_join_is_laid_out_as_kafkas_schema_says() -> None:
    """ConsumerGroupHeartbeatRequest v1 by hand: compact strings (length + 1), int32s, the v1 regex after the
    topic names, a null owned list as 0, one empty tagged-field section."""
    req = cm.ConsumerGroupHeartbeatRequest(1, "g", "m", 0, None, None, 300_000, ("t",), "", None, ())
    assert cp.encode_heartbeat_request(req) == (
        b"\x02g" + b"\x02m" + struct.pack(">i", 0) + b"\x00" + b"\x00" + struct.pack(">i", 300_000)
        + b"\x02\x02t" + b"\x01" + b"\x00" + b"\x01" + b"\x00"
    )  # fmt: skip
    tid = "00112233445566778899aabbccddeeff"
    resp = cm.ConsumerGroupHeartbeatResponse(0, None, "m", 3, 5000, ((tid, (0, 2)),))
    assert cp.encode_heartbeat_response(resp, 1) == (
        struct.pack(">ih", 0, 0) + b"\x00" + b"\x02m" + struct.pack(">ii", 3, 5000)
        + b"\x01" + b"\x02" + bytes.fromhex(tid) + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00" + b"\x00"
        + b"\x00"
    )  # fmt: skip
    assert cp.encode_heartbeat_response(cm.ConsumerGroupHeartbeatResponse(0), 0).endswith(b"\xff\x00")


@settings(max_examples=1000)
@given(key=st.sampled_from((68, 69)), version=st.integers(0, 1), body=st.binary(max_size=96))
def test_any_bytes_decode_or_raise_a_precise_error(key: int, version: int, body: bytes) -> None:
    if key == 69 and version == 1:
        version = 0
    frame = struct.pack(">hhih", key, version, 1, 1) + b"c" + b"\x00" + body
    try:
        kp.decode_request(frame)
    except kp.MalformedBody as exc:
        assert exc.api_key == key and exc.correlation_id == 1
        assert "body does not decode" in str(exc)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\x02g\x02m\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00", "trailing bytes"),
        (b"\x02g\x02m\x00\x00", "MemberEpoch"),
        (b"\x02g\xff\xff\xff\x7f", "MemberId"),  # a 256 MB string claimed in a 10-byte frame
        (b"\x02g\x02m\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\xff\xff\xff\x0f", "SubscribedTopicNames"),
        (b"\x02g\x02\xff", "not UTF-8"),
    ],
)
def test_damaged_heartbeats_name_what_was_wrong(body: bytes, reason: str) -> None:
    frame = struct.pack(">hhih", 68, 0, 5, -1) + b"\x00" + body
    with pytest.raises(kp.MalformedBody, match=reason):
        kp.decode_request(frame)


def test_the_apis_are_advertised_with_their_windows() -> None:
    assert kp.ADVERTISED[68] == (0, 1) and kp.ADVERTISED[69] == (0, 0)
    assert kp.ADVERTISED[kp.OFFSET_COMMIT][1] >= 9 and kp.ADVERTISED[kp.OFFSET_FETCH][1] >= 9
    assert kp.ADVERTISED[kp.METADATA][1] >= 12  # topics by id: librdkafka maps KIP-848 assignments with it
    # A version beyond the window is answered UNSUPPORTED_VERSION in the highest version's layout.
    frame = kp.unsupported_version_response(68, 7, 11)
    assert frame is not None
    corr, resp = kp.decode_consumer_group_response(68, 1, frame[4:])
    assert corr == 11 and resp == cm.ConsumerGroupHeartbeatResponse(int(kp.UNSUPPORTED_VERSION))
