"""The hand-written ConsumerGroupHeartbeat fast path against the generic reader and writer of
`zkcoord.server.consumer_protocol`: equal values from the same frames, byte-identical answers, and for anything
else (arbitrary bytes, cuts, extensions, tagged fields, long strings) never a crash and never a different outcome:
the generic path's value or the generic path's error, word for word."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zkcoord.group import consumer_messages as cm
from zkcoord.server import consumer_protocol as cp
from zkcoord.server import fastpath
from zkcoord.server import kafka_protocol as kp

from .consumer_heartbeats import heartbeats as shared_heartbeats

i32 = st.integers(-(2**31), 2**31 - 1)
short = st.text(max_size=12)
# Mostly the usual short ids and names, sometimes past a one-byte length (126 bytes): a two-byte varint.
name = short | st.text(alphabet="xé", min_size=120, max_size=130)
topic_id = st.binary(min_size=16, max_size=16).map(bytes.hex)
parts = st.lists(i32, max_size=5).map(tuple) | st.lists(st.just(7), min_size=125, max_size=127).map(tuple)
owned = st.lists(st.tuples(topic_id, parts), max_size=3).map(tuple)


heartbeats = partial(shared_heartbeats, name, owned)


@contextmanager
def generic_only() -> Iterator[None]:
    """The adapter with its fast paths switched off: the reference every fast result must equal."""
    with (
        mock.patch.object(kp.frames, "_fast_request", lambda *_a: None),
        mock.patch.object(fastpath, "consumer_heartbeat_response", lambda *_a: None),
    ):
        yield


def _frame(req: cm.ConsumerGroupHeartbeatRequest, corr: int = 7) -> bytes:
    """The frame without its size prefix, as the wire layer hands it to `decode_request`."""
    return kp.encode_consumer_group_request(corr, "client-1", req)[4:]


HEADER = 2 + 2 + 4 + 2 + len("client-1") + 1  # key, version, correlation id, client id, header tagged fields


def _outcome(frame: bytes) -> tuple[str, object]:
    """What the adapter makes of a frame: ("value", the request value) or ("error", type and message)."""
    try:
        req = kp.decode_request(frame)
    except kp.ProtocolError as exc:
        return "error", (type(exc), str(exc))
    return "value", req.body


def _generic_outcome(frame: bytes) -> tuple[str, object]:
    with generic_only():
        return _outcome(frame)


@settings(max_examples=200, deadline=None)
@given(req=heartbeats(), corr=i32)
def test_heartbeats_decode_as_the_generic_reader_does(
    req: cm.ConsumerGroupHeartbeatRequest, corr: int
) -> None:
    frame = _frame(req, corr)
    fast = fastpath.decode_consumer_heartbeat(frame, HEADER, req.api_version)
    assert _outcome(frame) == _generic_outcome(frame) == ("value", req)
    assert fast == req  # every shape without tagged fields takes the fast path, long strings and lists too


@settings(max_examples=200, deadline=None)
@given(req=heartbeats(), where=st.integers(0, 10_000), byte=st.integers(0, 255), cut=st.integers(0, 10_000))
@example(
    req=cm.ConsumerGroupHeartbeatRequest(1, "g", "m", 3, topic_partitions=(("ab" * 16, (1, 2)),)),
    where=0, byte=0, cut=0,
)  # fmt: skip
def test_damaged_frames_end_as_the_generic_path_says(
    req: cm.ConsumerGroupHeartbeatRequest, where: int, byte: int, cut: int
) -> None:
    """A flipped byte, a cut (a truncated frame) or bytes added (an oversized one): the generic path's value, or
    its error with its message."""
    frame = bytearray(_frame(req))
    body_len = len(frame) - HEADER
    frame[HEADER + where % body_len] = byte  # keep the header: the fast path starts after it
    for damaged in (
        bytes(frame),
        bytes(frame[: HEADER + cut % body_len]),  # truncated
        bytes(frame) + bytes([byte]) * (1 + cut % 40),  # trailing bytes
    ):
        assert _outcome(damaged) == _generic_outcome(damaged)


@settings(max_examples=500, deadline=None)
@given(version=st.sampled_from((0, 1, 2)), body=st.binary(max_size=300), pos=st.integers(0, 8))
def test_arbitrary_bytes_never_crash_the_reader(version: int, body: bytes, pos: int) -> None:
    value = fastpath.decode_consumer_heartbeat(body, min(pos, len(body)), version)
    assert value is None or isinstance(value, cm.ConsumerGroupHeartbeatRequest)
    frame = kp.encode_consumer_group_request(
        1, "c", cm.ConsumerGroupHeartbeatRequest(min(version, 1), "", "", 0)
    )
    head = frame[4 : 4 + 2 + 2 + 4 + 2 + 1 + 1]  # key, version, correlation id, client id "c", no header tags
    assert _outcome(head + body) == _generic_outcome(head + body)


def test_tagged_fields_and_nulls_take_the_generic_path() -> None:
    req = cm.ConsumerGroupHeartbeatRequest(1, "g", "m", 5, topic_partitions=(("cd" * 16, (0, 1)),))
    frame = _frame(req)
    assert fastpath.decode_consumer_heartbeat(frame, HEADER, 1) == req
    tagged = frame[:-1] + b"\x01\x05\x01\x00"  # one unknown tagged field at the top level
    assert fastpath.decode_consumer_heartbeat(tagged, HEADER, 1) is None
    assert _outcome(tagged) == ("value", req)  # the generic reader skips it
    null_group = frame[:HEADER] + b"\x00" + frame[HEADER + 2 :]  # "g" (2 bytes) -> null: not nullable
    assert fastpath.decode_consumer_heartbeat(null_group, HEADER, 1) is None
    assert _outcome(null_group) == _generic_outcome(null_group)
    kind, (error, message) = _outcome(null_group)  # type: ignore[misc]
    assert kind == "error" and error is kp.MalformedBody and "GroupId: null" in message
    topic_tagged = frame[:-2] + b"\x01\x00\x00\x00"  # one empty tagged field (tag 0) in the owned topic
    assert fastpath.decode_consumer_heartbeat(topic_tagged, HEADER, 1) is None
    assert _outcome(topic_tagged) == ("value", req)
    too_long = cm.ConsumerGroupHeartbeatRequest(1, "g" * (cp.MAX_STRING + 1), "m", 5)
    assert fastpath.decode_consumer_heartbeat(_frame(too_long), HEADER, 1) is None
    assert _outcome(_frame(too_long)) == _generic_outcome(_frame(too_long))
    assert _outcome(_frame(too_long))[0] == "error"


assignments = st.none() | st.lists(
    st.tuples(topic_id, st.lists(i32, max_size=5).map(tuple) | parts), max_size=3
).map(tuple)


@settings(max_examples=200, deadline=None)
@given(
    version=st.sampled_from((0, 1)),
    error=st.integers(-(2**15), 2**15 - 1),
    message=st.none() | name,
    member=st.none() | name,
    epoch=i32,
    interval=i32,
    assignment=assignments,
    corr=i32,
)
def test_heartbeat_answers_are_byte_identical(
    version: int,
    error: int,
    message: str | None,
    member: str | None,
    epoch: int,
    interval: int,
    assignment: cm.TopicPartitions | None,
    corr: int,
) -> None:
    resp = cm.ConsumerGroupHeartbeatResponse(error, message, member, epoch, interval, assignment)
    req = kp.decode_request(_frame(cm.ConsumerGroupHeartbeatRequest(version, "g", "m", 1), corr))
    packed = fastpath.consumer_heartbeat_response(version, corr, resp)
    with generic_only():
        generic = kp.consumer_group_response(req, resp)
    assert packed is not None and packed == generic == kp.consumer_group_response(req, resp)
    assert fastpath.consumer_heartbeat_response(version, corr, resp) == packed  # again: from the memo
    assert kp.decode_consumer_group_response(68, version, packed[4:]) == (corr, resp)


@pytest.mark.parametrize("version", [-1, 2])
def test_versions_it_does_not_know_are_not_packed(version: int) -> None:
    assert fastpath.consumer_heartbeat_response(version, 1, cm.ConsumerGroupHeartbeatResponse(0)) is None
    assert (
        fastpath.decode_consumer_heartbeat(
            _frame(cm.ConsumerGroupHeartbeatRequest(1, "g", "m", 1)), HEADER, version
        )
        is None
    )


def test_the_memos_are_bounded_and_give_what_a_read_gives() -> None:
    """A steady member's body is read once and then found in the memo; the memo never holds more than
    MEMO_ENTRIES values, nor a body over MEMO_BODY_BYTES."""
    req = cm.ConsumerGroupHeartbeatRequest(
        1, "memo-group", "memo-member", 4, topic_partitions=(("ab" * 16, (3,)),)
    )
    frame = _frame(req)
    first = fastpath.decode_consumer_heartbeat(frame, HEADER, 1)
    assert first == req and fastpath.decode_consumer_heartbeat(_frame(req, corr=99), HEADER, 1) is first
    for i in range(fastpath.MEMO_ENTRIES + 10):
        other = cm.ConsumerGroupHeartbeatRequest(1, "memo-group", f"m-{i}", 4)
        assert fastpath.decode_consumer_heartbeat(_frame(other), HEADER, 1) == other
        answer = cm.ConsumerGroupHeartbeatResponse(0, None, f"m-{i}", 4, 5000)
        assert fastpath.consumer_heartbeat_response(1, i, answer) is not None
        assert len(fastpath._read_memo) <= fastpath.MEMO_ENTRIES
        assert len(fastpath._answer_memo) <= fastpath.MEMO_ENTRIES
    big = cm.ConsumerGroupHeartbeatRequest(
        1, "memo-group", "m", 4, topic_partitions=(("ab" * 16, tuple(range(200))),)
    )
    before = len(fastpath._read_memo)
    assert fastpath.decode_consumer_heartbeat(_frame(big), HEADER, 1) == big
    assert len(fastpath._read_memo) == before
