"""Hostile frames at the decoder entry: linear time and bounded memory, forbidden nulls as decode errors."""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest

from zkcoord.server import kafka_protocol as kp


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
    kp.decode_request(frame)
    return time.perf_counter() - started


def test_unknown_tagged_fields_in_every_array_entry_decode_in_linear_time() -> None:
    # Before: kafka-python copied the rest of the frame per tagged section; 0.7 MB took ~4 s here against
    # ~0.2 s for the same length without tags. Measured against that reference so machine load cancels out.
    frame = _join_v7_with_tagged_protocols(100_000)
    plain = _join_v7_with_tagged_protocols(100_000, tagged=False)
    assert len(frame) == len(plain)
    req = kp.decode_request(frame)
    assert len(req.body.protocols) == 100_000
    assert req.body.protocols[0].name == "r" and req.body.protocols[-1].metadata == b""
    tagged_s, plain_s = _decode_seconds(frame), _decode_seconds(plain)
    assert tagged_s < 5 * plain_s + 0.5, (
        f"{len(frame)} bytes: {tagged_s:.2f} s with tags, {plain_s:.2f} s without"
    )


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
