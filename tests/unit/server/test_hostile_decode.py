"""Hostile frames at the decoder entry: linear time and bounded memory, forbidden nulls as decode errors."""

from __future__ import annotations

import contextlib
import struct
import time
import tracemalloc

import pytest

from zkcoord.server import kafka_protocol as kp
from zkcoord.server.prescan import MAX_TAGGED_FIELDS


def _uv(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _cstr(s: str) -> bytes:
    raw = s.encode()
    return _uv(len(raw) + 1) + raw


def _flex_head(key: int, version: int) -> bytes:
    return struct.pack(">hhih", key, version, 1, 1) + b"c" + b"\x00"


def _join_v7_with_tagged_protocols(n: int, tagged: bool = True) -> bytes:
    """A valid JoinGroup v7 whose n protocol entries each carry one unknown tagged field (tag 9, 1 byte), or
    (tagged=False) the same frame length with an unused byte of metadata instead."""
    body = _cstr("g") + struct.pack(">ii", 10000, 10000) + _cstr("") + _uv(0) + _cstr("consumer")
    if tagged:
        entry = _cstr("r") + _uv(1) + _uv(1) + _uv(9) + _uv(1) + b"x"
    else:
        entry = _cstr("r") + _uv(4) + b"xyz" + _uv(0)
    return _flex_head(kp.JOIN_GROUP, 7) + body + _uv(n + 1) + entry * n + b"\x00"


def _decode_seconds(frame: bytes) -> float:
    started = time.perf_counter()
    with contextlib.suppress(kp.ProtocolError):
        kp.decode_request(frame)
    return time.perf_counter() - started


def test_unknown_tagged_fields_in_array_entries_are_dropped_up_to_the_bound() -> None:
    frame = _join_v7_with_tagged_protocols(MAX_TAGGED_FIELDS)
    req = kp.decode_request(frame)
    assert len(req.body.protocols) == MAX_TAGGED_FIELDS
    assert req.body.protocols[0].name == "r" and req.body.protocols[-1].metadata == b""
    with pytest.raises(kp.MalformedBody, match=f"more than {MAX_TAGGED_FIELDS} tagged fields in one request"):
        kp.decode_request(_join_v7_with_tagged_protocols(MAX_TAGGED_FIELDS + 1))


def _join_v7_with_top_level_tags(n: int, in_header: bool = False) -> bytes:
    """A JoinGroup v7 with one protocol and n unknown zero-size tags in its top-level (or header) tagged section."""
    # The tags repeat every 1,000: the megabyte frames repeat one period instead of encoding 800,000 varints
    # twice at collection (2.5 s of every run's start-up).
    whole, rest = divmod(n, 1000)
    tags = b"".join(_uv(100 + i) + _uv(0) for i in range(1000)) * whole
    tags += b"".join(_uv(100 + i) + _uv(0) for i in range(rest))
    body = _cstr("g") + struct.pack(">ii", 10000, 10000) + _cstr("") + _uv(0) + _cstr("consumer")
    body += _uv(2) + _cstr("r") + _uv(1) + _uv(0)
    if in_header:
        return struct.pack(">hhih", kp.JOIN_GROUP, 7, 1, 1) + b"c" + _uv(n) + tags + body + b"\x00"
    return _flex_head(kp.JOIN_GROUP, 7) + body + _uv(n) + tags


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (
            _join_v7_with_tagged_protocols(3_200_000 // 7),
            kp.MalformedBody,
        ),  # one tag in each of 457,000 entries
        (_join_v7_with_top_level_tags(800_000), kp.MalformedBody),
        (_join_v7_with_top_level_tags(800_000, in_header=True), kp.MalformedFrame),
    ],
    ids=["per-entry", "top-level", "header"],
)
def test_megabytes_of_tagged_fields_are_refused_before_any_per_tag_work(frame: bytes, error: type) -> None:
    # Before: decoded, holding the event loop 1.7 s (per-entry, 3.2 MB), 1.3 s (top-level, 2.4 MB) and 0.35 s
    # (header) here, so another client waited that long. The bound is counted from each section's count, so the
    # refusal walks at most MAX_TAGGED_FIELDS tags: milliseconds, whatever the frame's size.
    assert len(frame) > 2_000_000
    with pytest.raises(error, match=f"more than {MAX_TAGGED_FIELDS}"):
        kp.decode_request(frame)
    assert _decode_seconds(frame) < 0.2


def test_header_tags_count_against_the_same_budget() -> None:
    half = MAX_TAGGED_FIELDS // 2
    head = (
        struct.pack(">hhih", kp.JOIN_GROUP, 7, 1, 1)
        + b"c"
        + _uv(half)
        + b"".join(_uv(100) + _uv(0) for _ in range(half))
    )
    body = _join_v7_with_tagged_protocols(half)[len(_flex_head(kp.JOIN_GROUP, 7)) :]
    assert len(kp.decode_request(head + body).body.protocols) == half
    body = _join_v7_with_tagged_protocols(half + 1)[len(_flex_head(kp.JOIN_GROUP, 7)) :]
    with pytest.raises(kp.MalformedBody, match="tagged fields"):
        kp.decode_request(head + body)


def test_known_top_level_tagged_field_still_decodes() -> None:
    frame = kp.encode_request(
        kp.FETCH,
        12,
        3,
        "c",
        replica_id=-1,
        max_wait_ms=1,
        min_bytes=1,
        max_bytes=1,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[],
        forgotten_topics_data=[],
        rack_id="",
        cluster_id="cluster-x",
    )
    assert kp.decode_request(frame[4:]).body.cluster_id == "cluster-x"


def test_zero_padded_over_long_array_is_rejected_before_allocating() -> None:
    # DescribeGroups v5: 5,000,000 group names, all zero bytes (= null, which the schema forbids). Before: 5 M
    # Nones were allocated (tens of MB) and handed to the handler.
    n = 5_000_000
    frame = _flex_head(kp.DESCRIBE_GROUPS, 5) + _uv(n + 1) + b"\x00" * n + b"\x00" + b"\x00"
    tracemalloc.start()
    try:
        with pytest.raises(kp.MalformedBody, match="null where the schema forbids it"):
            kp.decode_request(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_array_count_beyond_the_bytes_left_is_rejected() -> None:
    frame = _flex_head(kp.DESCRIBE_GROUPS, 5) + _uv(2**28) + _cstr("g") + b"\x00\x00"
    with pytest.raises(kp.MalformedBody, match="cannot fit"):
        kp.decode_request(frame)
    legacy = struct.pack(">hhih", kp.DESCRIBE_GROUPS, 0, 1, -1) + struct.pack(">i", 2**31 - 1) + b"\x00\x01g"
    with pytest.raises(kp.MalformedBody, match="cannot fit"):
        kp.decode_request(legacy)


def test_string_length_past_the_end_is_rejected() -> None:
    frame = struct.pack(">hhih", kp.HEARTBEAT, 0, 1, -1) + struct.pack(">h", 30000) + b"g"
    with pytest.raises(kp.MalformedBody, match="only 1 bytes remain"):
        kp.decode_request(frame)


@pytest.mark.parametrize(
    ("key", "version", "body"),
    [
        (kp.DELETE_GROUPS, 2, b"\x00" + b"\x00"),  # groups_names: null compact array
        (kp.DESCRIBE_GROUPS, 5, b"\x00" + b"\x00" + b"\x00"),  # groups: null, include_authorized_operations
        (kp.LIST_GROUPS, 3, b"\x00"),  # (no arrays: control, must decode)
    ],
)
def test_nulls_where_the_schema_forbids_them_are_decode_errors(key: int, version: int, body: bytes) -> None:
    frame = _flex_head(key, version) + body
    if key == kp.LIST_GROUPS:
        assert kp.decode_request(frame).api_key == kp.LIST_GROUPS
        return
    with pytest.raises(kp.MalformedBody, match="null where the schema forbids it"):
        kp.decode_request(frame)


def test_nullable_fields_still_accept_null() -> None:
    # Metadata v9 topics=None means "all topics"; JoinGroup v7 group_instance_id is nullable.
    req = kp.decode_request(
        kp.encode_request(kp.METADATA, 9, 4, "c", topics=None, allow_auto_topic_creation=False)[4:]
    )
    assert req.body.topics is None
    frame = _join_v7_with_tagged_protocols(1)
    assert kp.decode_request(frame).body.group_instance_id is None
