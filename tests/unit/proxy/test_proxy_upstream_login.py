"""When a Link connects upstream and logs in there: not when a client connects, and not for a client that has not
logged in to the proxy. A client's ApiVersions before its own login is asked on the opened upstream connection
before the proxy's login; the proxy's SaslHandshake/SaslAuthenticate go to the broker only once the client's
login succeeded, then the client's frames follow on that same connection."""

from __future__ import annotations

import asyncio
import contextlib
import struct

from kafka.protocol.metadata import ApiVersionsRequest

from zkcoord.proxy import forward, upstream
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.listener_security import SaslAuthenticator, SaslConfig

PROXY_LOGIN = upstream.UpstreamSecurity("SASL_PLAINTEXT", None, "PLAIN", "proxy-user", "proxy-secret")


def api_versions(corr: int) -> bytes:
    req = ApiVersionsRequest(version=0)
    req.with_header(correlation_id=corr, client_id="c")
    return bytes(req.encode(header=True, framed=True))


def handshake(corr: int) -> bytes:
    head = struct.pack(">hhih", kp.SASL_HANDSHAKE, 1, corr, 1) + b"c" + struct.pack(">h", 5) + b"PLAIN"
    return struct.pack(">i", len(head)) + head


def authenticate(corr: int, user: str, password: str) -> bytes:
    return upstream.authenticate_request(corr, b"\0" + user.encode() + b"\0" + password.encode())


class Broker:
    """A broker that answers ApiVersions (zkcoord's table), the proxy's PLAIN login (checking its credentials)
    and nothing else; it records, per connection, the api keys it was sent."""

    def __init__(self) -> None:
        self.connections: list[list[int]] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen: list[int] = []
        self.connections.append(seen)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                key, _version, corr = struct.unpack_from(">hhi", frame)
                seen.append(key)
                if key == kp.API_VERSIONS:
                    writer.write(kp.api_versions_response(kp.decode_request(frame)))
                elif key == kp.SASL_HANDSHAKE:
                    body = struct.pack(">ihih", corr, 0, 1, 5) + b"PLAIN"
                    writer.write(struct.pack(">i", len(body)) + body)
                elif key == kp.SASL_AUTHENTICATE:
                    ok = frame.endswith(b"\0proxy-user\0proxy-secret")
                    body = struct.pack(">ihhi", corr, 0 if ok else 58, -1, 0) + bytes(8)
                    writer.write(struct.pack(">i", len(body)) + body)


async def _session(frames: list[bytes], answers: int) -> tuple[Broker, list[bytes]]:
    """`frames` sent by one client of a SASL listener (PLAIN, user u / password p) through a Link that logs in
    upstream with PROXY_LOGIN; returns the broker's record and the first `answers` answers (fewer if closed)."""
    broker = Broker()
    server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    up_port = server.sockets[0].getsockname()[1]
    links: set[asyncio.Task[None]] = set()
    proxy = await forward.listen(
        "127.0.0.1", 0,
        lambda t: forward.Link(("127.0.0.1", up_port), lambda n, h, p: (h, p), {}, None, 1 << 20,
                               security=PROXY_LOGIN,
                               auth=SaslAuthenticator(SaslConfig(("PLAIN",), {"u": "p"}), "peer")),
        links,
    )  # fmt: skip
    got: list[bytes] = []
    try:
        reader, client = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
        for frame in frames:
            client.write(frame)
        async with asyncio.timeout(10):
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                while len(got) < answers:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    got.append(await reader.readexactly(size))
            client.close()
            while links:  # the link is over (so is everything it sent upstream)
                await asyncio.wait(set(links))
    finally:
        proxy.close()
        server.close()
    return broker, got


def test_a_client_that_only_connects_opens_nothing_upstream() -> None:
    broker, got = asyncio.run(_session([], 0))
    assert (broker.connections, got) == ([], [])  # the old Link connected and logged in at once


def test_a_client_whose_login_fails_never_makes_the_proxy_log_in() -> None:
    broker, got = asyncio.run(
        _session([api_versions(1), handshake(2), authenticate(3, "u", "wrong"), api_versions(4)], 3)
    )
    assert len(got) == 3 and struct.unpack_from(">ih", got[2])[1] != 0  # the client's login was refused
    assert broker.connections == [[kp.API_VERSIONS]]  # its ApiVersions only: no SaslHandshake of the proxy's


def test_a_logged_in_client_gets_the_proxys_login_then_its_frames_on_one_connection() -> None:
    broker, got = asyncio.run(
        _session([api_versions(1), handshake(2), authenticate(3, "u", "p"), api_versions(4)], 4)
    )
    assert [struct.unpack_from(">i", g)[0] for g in got] == [1, 2, 3, 4]
    assert struct.unpack_from(">ih", got[2]) == (3, 0)  # logged in to the proxy
    assert broker.connections == [
        [kp.API_VERSIONS, kp.SASL_HANDSHAKE, kp.SASL_AUTHENTICATE, kp.API_VERSIONS]
    ]  # the client's pre-login ApiVersions, the proxy's login, then the client's frame
