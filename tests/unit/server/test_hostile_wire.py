"""Hostile clients against a whole single-node server: every request is answered or its connection closed."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from zkcoord.records.batch import AppendRules, validate_for_append
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.app import Node
from zkcoord.server.limits import ConnectionLimits, LogLimits
from zkcoord.server.log import LogManager
from zkcoord.testing.nodes import answer_or_close, connect, run_with_node


def test_offset_commit_whose_handler_fails_is_answered_or_closed(tmp_path: Path) -> None:
    run_with_node(tmp_path, _offset_commit_overflow)


async def _offset_commit_overflow(node: Node) -> None:
    # Before: the handler raised (retention 2^63-1 overflows the stored expiry), OffsetCommit v2 has no top-level
    # error code, and the connection stayed open with no answer.
    reader, writer = await connect(node)
    writer.write(
        kp.encode_request(
            kp.OFFSET_COMMIT,
            2,
            5,
            "c",
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            retention_time_ms=2**63 - 1,
            topics=[("t", [(0, 5, "m")])],
        )
    )
    got = await answer_or_close(reader)
    if got:
        assert struct.unpack(">i", got[:4])[0] == 5
    writer.close()
    # The server still serves others.
    reader2, writer2 = await connect(node)
    writer2.write(kp.encode_request(kp.API_VERSIONS, 0, 9, None))
    assert struct.unpack(">i", (await answer_or_close(reader2))[:4])[0] == 9
    writer2.close()


def test_null_array_in_delete_groups_closes_the_connection(tmp_path: Path) -> None:
    run_with_node(tmp_path, _delete_groups_null)


async def _delete_groups_null(node: Node) -> None:
    # Before: the decoder let the null through and the handler raised on it.
    reader, writer = await connect(node)
    body = struct.pack(">hhih", kp.DELETE_GROUPS, 2, 3, 1) + b"c" + b"\x00" + b"\x00" + b"\x00"
    writer.write(struct.pack(">i", len(body)) + body)
    assert await answer_or_close(reader) == b""
    writer.close()


# -- connection limits ---------------------------------------------------------------------------------------


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), seconds) == b""
    except TimeoutError:
        return False


def test_connection_caps_refuse_extra_connections(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        assert node.wire is not None
        held = [await connect(node) for _ in range(2)]
        for r, w in held:  # the two allowed are served
            w.write(kp.encode_request(kp.API_VERSIONS, 0, 1, None))
            assert await answer_or_close(r)
        r3, w3 = await connect(node)
        assert await _closed_within(r3, 10)
        assert node.wire.closed_by_limit["refused_per_ip"] == 1
        held[0][1].close()
        await _wait_until(lambda: len(node.wire._live) == 1)
        r4, w4 = await connect(node)  # a slot freed: served again
        w4.write(kp.encode_request(kp.API_VERSIONS, 0, 2, None))
        assert await answer_or_close(r4)
        for w in (held[1][1], w3, w4):
            w.close()

    run_with_node(tmp_path, scenario, connection_limits=ConnectionLimits(max_connections_per_ip=2))


def test_idle_connections_and_slow_senders_are_closed(tmp_path: Path) -> None:
    # Before: 2,000 idle connections and 200 slow senders were kept for ever.
    async def scenario(node: Node) -> None:
        assert node.wire is not None
        r_idle, w_idle = await connect(node)
        r_slow, w_slow = await connect(node)
        w_slow.write(struct.pack(">i", 100) + b"\x00" * 10)  # a frame that never completes
        assert await _closed_within(r_idle, 10)
        assert await _closed_within(r_slow, 10)
        assert node.wire.closed_by_limit["idle"] >= 1 and node.wire.closed_by_limit["slow_frame"] == 1
        for w in (w_idle, w_slow):
            w.close()

    limits = ConnectionLimits(connections_max_idle_ms=400, request_read_timeout_ms=300)
    run_with_node(tmp_path, scenario, connection_limits=limits)


def test_half_sent_frames_share_one_memory_budget(tmp_path: Path) -> None:
    # Before: 19 connections each holding a partial 100 MiB frame drove the node into MemoryError.
    async def scenario(node: Node) -> None:
        assert node.wire is not None
        conns = [await connect(node) for _ in range(4)]
        for _r, w in conns:
            w.write(struct.pack(">i", 60_000) + b"\x00" * 1000)
        await _wait_until(lambda: node.wire is not None and node.wire._queued_bytes > 0)
        await asyncio.sleep(0.2)  # not synchronisation: give the other readers time to (wrongly) reserve
        assert node.wire._queued_bytes <= 100_000
        for _r, w in conns:
            w.close()
        await _wait_until(lambda: node.wire is not None and node.wire._queued_bytes == 0)

    limits = ConnectionLimits(queued_max_request_bytes=100_000)
    run_with_node(tmp_path, scenario, connection_limits=limits, socket_request_max_bytes=65_536)


async def _wait_until(cond: Callable[[], bool], seconds: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not cond():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


# -- partition limits ----------------------------------------------------------------------------------------


def _create_topics(name: str, partitions: int) -> bytes:
    C = kp._CLASSES[kp.CREATE_TOPICS][0]
    topic = C.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
    )
    return kp.encode_request(
        kp.CREATE_TOPICS, 4, 7, "c", topics=[topic], timeout_ms=1000, validate_only=False
    )


def test_partition_limits_per_topic_and_per_node(tmp_path: Path) -> None:
    # Before: CreateTopics accepted 2^31-1 partitions (and 20,000 exhausted the descriptors).
    async def scenario(node: Node) -> None:
        assert node.logs is not None
        r, w = await connect(node)
        w.write(_create_topics("huge", 2**31 - 1))
        resp = kp.decode_response(kp.CREATE_TOPICS, 4, await answer_or_close(r))[1]
        assert resp.topics[0].error_code == 37 and "max.partitions.per.topic" in resp.topics[0].error_message
        w.write(_create_topics("fits", 40))
        assert kp.decode_response(kp.CREATE_TOPICS, 4, await answer_or_close(r))[1].topics[0].error_code == 0
        w.write(_create_topics("over", 20))
        resp = kp.decode_response(kp.CREATE_TOPICS, 4, await answer_or_close(r))[1]
        assert resp.topics[0].error_code == 37 and "max.broker.partitions" in resp.topics[0].error_message
        # Metadata auto-create at the node limit: the topic's error, the connection stays usable.
        w.write(kp.encode_request(kp.METADATA, 9, 8, "c", topics=[("auto",)], allow_auto_topic_creation=True))
        md = kp.decode_response(kp.METADATA, 9, await answer_or_close(r))[1]
        assert [(t.name, t.error_code) for t in md.topics] == [("auto", 37)]
        assert sorted(node.logs.topics) == ["fits"]
        w.close()

    limits = LogLimits(max_partitions_per_topic=50, max_broker_partitions=50)
    run_with_node(tmp_path, scenario, log_limits=limits, num_partitions=20)


def _open_fds(under: Path) -> int:
    """Descriptors this process holds on files under `under`: other tests' sockets, closed by the garbage
    collector at any moment, do not count."""
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed between the listing and the read
            continue
        held += target.startswith(str(under))
    return held


def test_many_partitions_open_lazily_within_a_descriptor_budget(tmp_path: Path) -> None:
    from zkcoord.records.batch import build_batch

    limits = LogLimits(max_partitions_per_topic=3000, max_broker_partitions=3000, log_max_open_files=16)
    before = _open_fds(tmp_path)
    logs = LogManager(tmp_path, limits=limits)
    batch = build_batch([(b"k", b"v")])
    headers = validate_for_append(batch, 0, AppendRules(timestamp_after_max_ms=2**62))
    try:
        for plog in logs.create_topic("wide", 3000):
            plog.append([(headers[0], memoryview(batch))])
        assert _open_fds(tmp_path) - before <= 16
    finally:
        logs.close()
    assert _open_fds(tmp_path) == before
    again = LogManager(tmp_path, limits=limits)  # restart: nothing opened until used
    try:
        assert _open_fds(tmp_path) == before
        wide = again.topics["wide"]
        assert len(wide) == 3000 and wide[2999].next_offset == 1 and wide[0].read(0, 1 << 20) == batch
        assert _open_fds(tmp_path) - before <= 16
    finally:
        again.close()


# -- fairness ------------------------------------------------------------------------------------------------


def test_a_pipelining_connection_does_not_hold_up_another(tmp_path: Path) -> None:
    # Before: one connection pipelining 100,000 requests delayed another client's answer by 2.2 s: the reader
    # handled every frame already buffered before yielding. Counted in requests, not seconds, so load cancels.
    hog_requests = 30_000

    async def scenario(node: Node) -> None:
        assert node.wire is not None
        wire = node.wire
        hog_r, hog_w = await connect(node)
        victim_r, victim_w = await connect(node)
        one = kp.encode_request(kp.API_VERSIONS, 0, 1, None)

        async def drain_hog() -> int:
            got = 0
            while got < hog_requests:
                head = await hog_r.readexactly(4)
                await hog_r.readexactly(struct.unpack(">i", head)[0])
                got += 1
            return got

        hog_reader = asyncio.create_task(drain_hog())
        hog_w.write(one * hog_requests)
        await _wait_until(lambda: wire.requests > 1)  # the hog is being served
        victim_w.write(kp.encode_request(kp.API_VERSIONS, 0, 99, None))
        assert struct.unpack(">i", (await answer_or_close(victim_r))[:4])[0] == 99
        served_when_victim_answered = wire.requests
        assert await asyncio.wait_for(hog_reader, 60) == hog_requests
        assert served_when_victim_answered < hog_requests / 2, served_when_victim_answered
        hog_w.close()
        victim_w.close()

    run_with_node(tmp_path, scenario)


def _uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _join_with_a_tag_in_every_protocol(n: int) -> bytes:
    """A JoinGroup v7 frame (with its size prefix) of n protocol entries, each with one unknown 1-byte tag."""
    cstr = lambda raw: _uv(len(raw) + 1) + raw  # noqa: E731
    body = cstr(b"g") + struct.pack(">ii", 10000, 10000) + cstr(b"") + _uv(0) + cstr(b"consumer")
    entry = cstr(b"r") + _uv(1) + _uv(1) + _uv(9) + _uv(1) + b"x"
    frame = (
        struct.pack(">hhih", kp.JOIN_GROUP, 7, 1, 1)
        + b"c"
        + b"\x00"
        + body
        + _uv(n + 1)
        + entry * n
        + b"\x00"
    )
    return struct.pack(">i", len(frame)) + frame


def test_megabytes_of_tagged_fields_do_not_hold_up_another_client(tmp_path: Path) -> None:
    # Before: the 3.2 MB JoinGroup below was decoded on the event loop, and another client's ApiVersions waited
    # 1.8 s for it. Now it is refused after MAX_TAGGED_FIELDS tags. The other client pings until the frame has
    # been read and handled; client and server share one event loop, so the ping in flight meanwhile waits for
    # the whole decode whatever the machine's load.
    hostile_frame = _join_with_a_tag_in_every_protocol(3_200_000 // 7)
    assert len(hostile_frame) > 3_200_000

    async def scenario(node: Node) -> None:
        assert node.wire is not None
        wire = node.wire
        loop = asyncio.get_running_loop()
        victim_r, victim_w = await connect(node)
        hostile_r, hostile_w = await connect(node)
        before = wire.requests
        hostile_w.write(hostile_frame)
        worst, corr, read_it = 0.0, 0, False
        while not read_it:
            # the hostile frame counted besides the pings so far: one more ping, then stop
            read_it = wire.requests - before > corr
            corr += 1
            started = loop.time()
            victim_w.write(kp.encode_request(kp.API_VERSIONS, 0, corr, "victim"))
            answer = await answer_or_close(victim_r)
            worst = max(worst, loop.time() - started)
            assert struct.unpack(">i", answer[:4])[0] == corr
            assert loop.time() - started < 30
        assert worst < 1.0, f"another client waited {worst:.2f} s"
        assert await _closed_within(hostile_r, 10)  # refused: more than 1024 tagged fields
        assert wire.errors["malformed"] == 1
        for w in (victim_w, hostile_w):
            w.close()

    run_with_node(tmp_path, scenario)


# -- log rate limits -----------------------------------------------------------------------------------------


def test_repeated_connection_errors_are_rate_limited_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: one warning per bad connection (256,000 lines in 218 s under fuzzing).
    bad = 200

    async def scenario(node: Node) -> None:
        assert node.wire is not None
        for _ in range(bad):
            r, w = await connect(node)
            w.write(struct.pack(">i", 6) + b"\xff" * 6)
            assert await _closed_within(r, 10)
            w.close()
        assert node.wire.errors["malformed"] == bad
        assert node.wire.log_suppressed["malformed"] >= bad - 20

    with caplog.at_level(logging.INFO, logger="zkcoord.server.wire"):
        run_with_node(tmp_path, scenario)
    lines = [r for r in caplog.records if r.name == "zkcoord.server.wire"]
    assert 1 <= len(lines) <= 20, len(lines)


def test_answers_owed_before_a_bad_frame_are_sent_before_the_close(tmp_path: Path) -> None:
    # Kafka reads a connection's next request only after answering the previous one, so a bad frame never
    # costs the answers to the requests before it. Before: pending group answers were dropped at the close.
    async def scenario(node: Node) -> None:
        r, w = await connect(node)
        beats = [
            kp.encode_request(kp.HEARTBEAT, 3, c, "c", group_id="g", generation_id=1, member_id="m")
            for c in range(1, 6)
        ]
        w.write(b"".join(beats) + struct.pack(">i", 6) + b"\xff" * 6)
        got = []
        while (answer := await answer_or_close(r)) != b"":
            got.append(struct.unpack(">i", answer[:4])[0])
        assert got == [1, 2, 3, 4, 5]
        w.close()

    run_with_node(tmp_path, scenario)
