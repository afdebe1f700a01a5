"""A Link on a listener without SASL: its ApiVersions answer leaves SaslHandshake/SaslAuthenticate out (whatever
the broker lists), and a SaslHandshake is never forwarded: the connection is closed, the broker sees nothing.
On a SASL listener the answer lists the proxy's own windows instead of the broker's."""

from __future__ import annotations

import asyncio
import contextlib
import struct

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from zkcoord.proxy import forward
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.listener_security import SaslAuthenticator, SaslConfig


def api_versions(corr: int) -> bytes:
    req = ApiVersionsRequest(version=0)
    req.with_header(correlation_id=corr, client_id="c")
    return bytes(req.encode(header=True, framed=True))


def handshake(corr: int) -> bytes:
    head = struct.pack(">hhih", kp.SASL_HANDSHAKE, 1, corr, 1) + b"c" + struct.pack(">h", 5) + b"PLAIN"
    return struct.pack(">i", len(head)) + head


async def _through(
    frames: list[bytes], auth: SaslAuthenticator | None, expect: int | None = None
) -> tuple[list[bytes], list[int]]:
    """Send `frames` through a Link to a broker that answers ApiVersions with zkcoord's own table (SASL APIs
    included, with other windows); returns (the answers the client got before the close, api keys the broker saw)."""
    seen: list[int] = []

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                req = kp.decode_request(await reader.readexactly(size))
                seen.append(req.api_key)
                writer.write(kp.api_versions_response(req))

    upstream = await asyncio.start_server(broker, "127.0.0.1", 0)
    up_port = upstream.sockets[0].getsockname()[1]
    links: set[asyncio.Task[None]] = set()
    proxy = await forward.listen(
        "127.0.0.1", 0,
        lambda t: forward.Link(("127.0.0.1", up_port), lambda n, h, p: (h, p), {}, None, 1 << 20, auth=auth),
        links,
    )  # fmt: skip
    answers: list[bytes] = []
    try:
        reader, client = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
        for frame in frames:
            client.write(frame)
        async with asyncio.timeout(10):
            with contextlib.suppress(asyncio.IncompleteReadError):
                while expect is None or len(answers) < expect:  # None: until the proxy closes
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    answers.append(await reader.readexactly(size))
        client.close()
    finally:
        proxy.close()
        upstream.close()
    return answers, seen


def _windows(answer: bytes) -> dict[int, tuple[int, int]]:
    obj = ApiVersionsResponse.decode(answer, version=0, header=True)
    return {e.api_key: (e.min_version, e.max_version) for e in obj.api_keys}


def test_without_sasl_the_sasl_apis_are_left_out_and_a_handshake_closes_unforwarded() -> None:
    answers, seen = asyncio.run(_through([api_versions(1), handshake(2), api_versions(3)], None))
    assert (
        len(answers) == 1
    )  # the ApiVersions before it is answered, then the handshake closes the connection
    windows = _windows(answers[0])
    assert kp.SASL_HANDSHAKE not in windows and kp.SASL_AUTHENTICATE not in windows and kp.PRODUCE in windows
    assert seen == [kp.API_VERSIONS]


def test_on_a_sasl_listener_the_proxys_own_windows_are_listed_and_the_handshake_answered_by_it() -> None:
    auth = SaslAuthenticator(SaslConfig(("PLAIN",), {"u": "p"}), "peer")
    answers, seen = asyncio.run(_through([api_versions(1), handshake(2)], auth, expect=2))
    windows = _windows(answers[0])
    assert windows[kp.SASL_HANDSHAKE] == kp.ADVERTISED[kp.SASL_HANDSHAKE]
    assert windows[kp.SASL_AUTHENTICATE] == kp.ADVERTISED[kp.SASL_AUTHENTICATE]
    assert struct.unpack_from(">ih", answers[1]) == (2, 0)  # the proxy accepted PLAIN
    assert seen == [kp.API_VERSIONS]  # the handshake never reached the broker
