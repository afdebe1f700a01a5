"""Request decoding (precise errors, never an unhandled exception) and the wire listener's edge rules."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.server import kafka_protocol as kp
from zkcoord.server.broker import Broker, ServerConfig
from zkcoord.server.log import LogManager
from zkcoord.server.wire import WireServer


def _unframe(frame: bytes) -> bytes:
    return frame[4:]


def test_decode_round_trip_heartbeat_v4() -> None:
    frame = kp.encode_request(kp.HEARTBEAT, 4, 42, "cli", group_id="g", generation_id=3, member_id="m")
    req = kp.decode_request(_unframe(frame))
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (12, 4, 42, "cli")
    assert (req.body.group_id, req.body.generation_id, req.body.member_id) == ("g", 3, "m")


def test_precise_errors() -> None:
    with pytest.raises(kp.MalformedFrame, match="shorter than a request header"):
        kp.decode_request(b"\x00\x12\x00")
    with pytest.raises(kp.UnknownApiKey, match="api key 999"):
        kp.decode_request(struct.pack(">hhih", 999, 0, 1, -1))
    with pytest.raises(kp.UnsupportedVersion, match="outside the supported range") as exc:
        kp.decode_request(struct.pack(">hhih", kp.HEARTBEAT, 77, 5, -1))
    assert exc.value.correlation_id == 5
    frame = _unframe(kp.encode_request(kp.HEARTBEAT, 4, 1, "c", group_id="g", generation_id=1, member_id="m"))
    with pytest.raises(kp.MalformedBody, match=r"does not decode|truncated"):
        kp.decode_request(frame[:-4])
    with pytest.raises(kp.MalformedBody, match="trailing bytes"):
        kp.decode_request(frame + b"\x00\x00")
    with pytest.raises(kp.MalformedFrame, match="client_id"):
        kp.decode_request(struct.pack(">hhih", kp.HEARTBEAT, 0, 1, 200) + b"x")


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(sorted(kp.ACCEPTED)),
    st.integers(min_value=-1, max_value=13),
    st.binary(max_size=120),
)
def test_fuzzed_frames_raise_only_protocol_errors(key: int, version: int, tail: bytes) -> None:
    frame = struct.pack(">hhi", key, version, 7) + tail
    try:
        kp.decode_request(frame)
    except kp.ProtocolError as exc:
        assert exc.reason


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=200))
def test_every_truncation_of_real_requests_is_a_protocol_error(cut: int) -> None:
    frames = [
        kp.encode_request(kp.HEARTBEAT, 4, 1, "c", group_id="g", generation_id=1, member_id="m"),
        kp.encode_request(kp.API_VERSIONS, 3, 1, "c", client_software_name="x", client_software_version="1"),
        kp.encode_request(kp.METADATA, 9, 1, "c", topics=None, allow_auto_topic_creation=True),
    ]
    for framed in frames:
        body = _unframe(framed)
        if cut < len(body):
            with pytest.raises(kp.ProtocolError):
                kp.decode_request(body[:cut])


# -- the listener ------------------------------------------------------------------------------------------------


async def _server(tmp_path: Path) -> tuple[WireServer, LogManager]:
    cfg = ServerConfig(port=0, data_dir=tmp_path)
    logs = LogManager(tmp_path)
    broker = Broker(cfg, logs)
    wire = WireServer(broker.dispatch, "127.0.0.1", 0, max_request_bytes=64 * 1024)
    await wire.start()
    return wire, logs


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def test_wire_rules(tmp_path: Path) -> None:
    async def scenario() -> None:
        wire, logs = await _server(tmp_path)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", wire.port)
            # ApiVersions at an unknown version: v0 body, error 35, one entry for ApiVersions.
            w.write(struct.pack(">ihhih", 10, kp.API_VERSIONS, 9, 11, -1))
            frame = await _read_frame(r)
            corr, resp = kp.decode_response(kp.API_VERSIONS, 0, frame)
            assert corr == 11 and resp.error_code == 35
            assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 3)]
            # Pipelined requests come back in order.
            for corr_id in (1, 2, 3):
                w.write(
                    kp.encode_request(
                        kp.API_VERSIONS,
                        3,
                        corr_id,
                        "c",
                        client_software_name="t",
                        client_software_version="1",
                    )
                )
            w.write(kp.encode_request(kp.METADATA, 9, 4, "c", topics=None, allow_auto_topic_creation=False))
            got = [kp.decode_response(kp.API_VERSIONS, 3, await _read_frame(r))[0] for _ in range(3)]
            assert got == [1, 2, 3]
            corr, md = kp.decode_response(kp.METADATA, 9, await _read_frame(r))
            assert corr == 4 and [b.node_id for b in md.brokers] == [0]
            # Unsupported Heartbeat version with a top-level error code: UNSUPPORTED_VERSION.
            w.write(struct.pack(">ihhih", 10, kp.HEARTBEAT, 5, 12, -1))
            # kafka-python cannot encode Heartbeat v5 (class max 4), so the server closes instead.
            assert await r.read() == b""
            w.close()
            # An oversized frame closes the connection without reading it.
            r2, w2 = await asyncio.open_connection("127.0.0.1", wire.port)
            w2.write(struct.pack(">i", 2**31 - 1))
            assert await asyncio.wait_for(r2.read(), 5) == b""
            w2.close()
            # Garbage closes the connection; the server keeps serving others.
            r3, w3 = await asyncio.open_connection("127.0.0.1", wire.port)
            w3.write(struct.pack(">i", 6) + b"\xff" * 6)
            assert await asyncio.wait_for(r3.read(), 5) == b""
            w3.close()
            r4, w4 = await asyncio.open_connection("127.0.0.1", wire.port)
            w4.write(kp.encode_request(kp.API_VERSIONS, 0, 99, None))
            assert kp.decode_response(kp.API_VERSIONS, 0, await _read_frame(r4))[0] == 99
            w4.close()
            assert wire.rejected >= 3
        finally:
            await wire.close()
            logs.close()

    asyncio.run(scenario())


def test_unsupported_version_answer_for_encodable_versions() -> None:
    # JoinGroup v9 is accepted; ListGroups v5 is not accepted but encodable with a top-level error code.
    reply = kp.unsupported_version_response(kp.LIST_GROUPS, 5, 8)
    assert reply is not None
    corr, resp = kp.decode_response(kp.LIST_GROUPS, 5, reply[4:])
    assert corr == 8 and resp.error_code == 35
