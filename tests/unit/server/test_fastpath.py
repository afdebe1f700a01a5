"""The hand-written Heartbeat/OffsetCommit codecs against the adapter's generic path: equal values decoded from the
same frames, byte-identical answers, and a fall back (never a different answer) for anything they are unsure of."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.group import messages as gm
from zkcoord.server import fastpath
from zkcoord.server import kafka_protocol as kp

text = st.text(max_size=12)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)


@contextmanager
def generic_only() -> Iterator[None]:
    """The adapter with its fast paths switched off: the reference every fast result must equal."""
    with (
        mock.patch.object(kp.frames, "_fast_request", lambda *_a: None),
        mock.patch.object(fastpath, "offset_commit_response", lambda *_a: None),
    ):
        yield


def _both(frame: bytes) -> tuple[kp.RequestFrame, kp.RequestFrame]:
    fast = kp.decode_request(frame)
    with generic_only():
        generic = kp.decode_request(frame)
    return fast, generic


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 4),
    group=text,
    generation=i32,
    member=text,
    instance=st.none() | text,
    corr=i32,
)
def test_heartbeat_requests_decode_as_the_adapter_does(
    version: int, group: str, generation: int, member: str, instance: str | None, corr: int
) -> None:
    frame = kp.encode_request(
        kp.HEARTBEAT,
        version,
        corr,
        "c",
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=instance,
    )[4:]
    fast, generic = _both(frame)
    assert type(fast.body) is gm.HeartbeatRequest  # the fast path took it
    assert kp.group_requests(fast) == kp.group_requests(generic)
    assert (fast.api_key, fast.api_version, fast.correlation_id, fast.client_id, fast.flexible) == (
        generic.api_key,
        generic.api_version,
        generic.correlation_id,
        generic.client_id,
        generic.flexible,
    )


partitions = st.lists(
    st.tuples(i32, i64, i32, st.none() | text, i64), max_size=6
)  # index, offset, leader epoch, metadata, commit timestamp
topics = st.lists(st.tuples(text, partitions), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(list(fastpath.OFFSET_COMMIT_VERSIONS)),
    group=text,
    generation=i32,
    member=text,
    instance=st.none() | text,
    retention=i64,
    topic_list=topics,
    corr=i32,
)
def test_offset_commit_requests_decode_as_the_adapter_does(
    version: int,
    group: str,
    generation: int,
    member: str,
    instance: str | None,
    retention: int,
    topic_list: list[tuple[str, list[tuple[int, int, int, str | None, int]]]],
    corr: int,
) -> None:
    frame = kp.encode_request(
        kp.OFFSET_COMMIT,
        version,
        corr,
        "c",
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=instance,
        retention_time_ms=retention,
        topics=[
            (name, [(p, o, e, m) if version >= 6 else (p, o, m) for p, o, e, m, _ts in ps])
            for name, ps in topic_list
        ],
    )[4:]
    fast, generic = _both(frame)
    assert type(fast.body) is gm.OffsetCommitRequest
    assert kp.group_requests(fast) == kp.group_requests(generic)


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(list(fastpath.OFFSET_COMMIT_VERSIONS)),
    answer=st.lists(st.tuples(text, st.lists(st.tuples(i32, i16), max_size=40)), max_size=4),
    corr=i32,
)
def test_offset_commit_answers_are_byte_identical(
    version: int, answer: list[tuple[str, list[tuple[int, int]]]], corr: int
) -> None:
    req = kp.RequestFrame(kp.OFFSET_COMMIT, version, corr, "c", None, version >= 8)
    resp = gm.OffsetCommitResponse(
        tuple(
            gm.OffsetCommitResponseTopic(name, tuple(gm.OffsetCommitResponsePartition(i, e) for i, e in ps))
            for name, ps in answer
        )
    )
    packed = fastpath.offset_commit_response(version, corr, resp.topics)
    assert packed is not None
    with generic_only():
        reference = kp.group_response(req, [resp])
    assert packed == reference
    assert kp.group_response(req, [resp]) == reference  # and the adapter answers with the packed bytes


@settings(max_examples=200, deadline=None)
@given(version=st.integers(0, 4), error=i16, corr=i32)
def test_heartbeat_answers_are_byte_identical(version: int, error: int, corr: int) -> None:
    # packed by the adapter itself since issue 13; checked here beside the other hand-packed answer
    from kafka.protocol.consumer import HeartbeatResponse

    req = kp.RequestFrame(kp.HEARTBEAT, version, corr, "c", None, version >= 4)
    packed = kp.group_response(req, [gm.HeartbeatResponse(error)])
    body = HeartbeatResponse(version=version, throttle_time_ms=0, error_code=error).encode(version=version)
    head = (
        struct.pack(">iib", len(body) + 5, corr, 0)
        if version >= 4
        else struct.pack(">ii", len(body) + 4, corr)
    )
    assert packed == head + bytes(body)


def _commit_frame(version: int) -> bytes:
    return kp.encode_request(
        kp.OFFSET_COMMIT,
        version,
        5,
        "c",
        group_id="g",
        generation_id_or_member_epoch=1,
        member_id="m",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            (
                "t",
                [
                    (0, 10, -1, "x") if version >= 6 else (0, 10, "x"),
                    (1, 11, -1, None) if version >= 6 else (1, 11, None),
                ],
            )
        ],
    )[4:]


@settings(max_examples=400, deadline=None)
@given(
    version=st.sampled_from([4, 7, 8]),
    where=st.integers(0, 200),
    byte=st.integers(0, 255),
    cut=st.integers(0, 200),
)
def test_damaged_frames_fall_back_and_end_as_the_adapter_says(
    version: int, where: int, byte: int, cut: int
) -> None:
    """A flipped byte or a cut: the fast path gives the generic path's value, or the generic path's error."""
    frame = bytearray(_commit_frame(version))
    frame[10 + where % (len(frame) - 10)] = byte  # keep the header: the fast path starts after it
    damaged = bytes(frame[: max(10, len(frame) - cut % len(frame))])
    try:
        fast = kp.decode_request(damaged)
    except kp.ProtocolError as exc:
        with generic_only(), pytest.raises(type(exc)):
            kp.decode_request(damaged)
        return
    with generic_only():
        generic = kp.decode_request(damaged)
    assert kp.group_requests(fast) == kp.group_requests(generic)


@pytest.mark.parametrize("version", [4, 8])
def test_tagged_fields_and_nulls_take_the_generic_path(version: int) -> None:
    frame = _commit_frame(version)
    assert type(kp.decode_request(frame).body) is gm.OffsetCommitRequest
    if version >= 8:
        tagged = frame[:-1] + b"\x01\x05\x01\x00"  # one unknown tagged field at the top level
        assert fastpath.decode_offset_commit(tagged, 12, version) is None  # body after a 12-byte header
        with generic_only():
            reference = kp.decode_request(tagged)
        assert kp.group_requests(kp.decode_request(tagged)) == kp.group_requests(reference)
    # a null group id: forbidden by the schema, so the fast path declines and the adapter names it
    header = 11 + (1 if version >= 8 else 0)  # key, version, correlation id, client id "c" (+ tagged fields)
    null_group = (
        frame[:header]
        + (b"\x00" if version >= 8 else b"\xff\xff")
        + frame[header + (2 if version >= 8 else 3) :]
    )
    with pytest.raises(kp.MalformedBody):
        kp.decode_request(null_group)


@pytest.mark.parametrize("version", [2, 7, 8])
def test_a_fast_decoded_request_keeps_who_sent_it(version: int) -> None:
    """The authorizer reads the principal from the frame: the fast path must carry the session as the generic
    path does (a fast frame without it would be judged as User:ANONYMOUS)."""
    from zkcoord.security.acl import Session

    session = Session(principal="User:alice", host="127.0.0.1")
    fast = kp.decode_request(_commit_frame(version), session)
    with generic_only():
        generic = kp.decode_request(_commit_frame(version), session)
    assert isinstance(fast.body, gm.OffsetCommitRequest)  # it did take the fast path
    assert fast.session == generic.session == session
