"""Before the SASL login: frames are bounded by `sasl.server.max.receive.size` on their size prefix, so
unauthenticated clients sending huge SaslAuthenticate frames pin no memory and do not delay anyone else; a real
client (kafka-python) still logs in and is served large requests once authenticated."""

from __future__ import annotations

import asyncio
import struct
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

from kafka import KafkaAdminClient

from zkcoord.security.sasl import PLAIN
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.app import Node
from zkcoord.server.limits import ConnectionLimits
from zkcoord.server.listener_security import ListenerSecurity, SaslConfig
from zkcoord.testing.nodes import answer_or_close, connect, run_with_node

USERS = {"alice": "alice-secret"}
_SASL = ListenerSecurity(sasl=SaslConfig((PLAIN,), USERS))


def _with_sasl_node(
    tmp_path: Path, scenario: Callable[[Node], Awaitable[None]], limits: ConnectionLimits | None = None
) -> None:
    run_with_node(tmp_path, scenario, security=_SASL, connection_limits=limits or ConnectionLimits())


def _handshake(correlation_id: int) -> bytes:
    return kp.encode_request(kp.SASL_HANDSHAKE, 1, correlation_id, "c", mechanism=PLAIN)


def _authenticate_frame(correlation_id: int, token_size: int) -> tuple[bytes, int]:
    """The head of a SaslAuthenticate v1 frame whose token has `token_size` bytes: (prefix and header up to the
    token, total frame size). The token itself is streamed separately."""
    header = struct.pack(">hhih", kp.SASL_AUTHENTICATE, 1, correlation_id, 1) + b"c"
    body_head = struct.pack(">i", token_size)
    size = len(header) + len(body_head) + token_size
    return struct.pack(">i", size) + header + body_head, size


async def _hostile_login(node: Node, token_size: int, chunk: bytes) -> int:
    """SaslHandshake PLAIN, then a SaslAuthenticate of `token_size` bytes written in `chunk`s (one buffer reused,
    so the client side allocates nothing per chunk); returns how many token bytes the server took before it
    closed (everything when it never did)."""
    reader, writer = await connect(node)
    try:
        writer.write(_handshake(1))
        assert await answer_or_close(reader), "SaslHandshake PLAIN is answered"
        head, _size = _authenticate_frame(2, token_size)
        writer.write(head)
        sent = 0
        while sent < token_size:
            try:
                writer.write(chunk)
                await writer.drain()
            except ConnectionError:
                break
            if writer.transport.is_closing() or reader.at_eof():
                break
            sent += len(chunk)
        return sent
    finally:
        writer.close()


def test_huge_frames_before_login_pin_no_memory_and_delay_no_one(tmp_path: Path) -> None:
    # Before: each 50 MB SaslAuthenticate was read whole and kept (six pinned 1.4 GB until the idle timeout) and
    # other clients waited seconds. Now each is refused on its size prefix (Kafka's sasl.server.max.receive.size).
    token_size = 50 * 1024 * 1024
    chunk = b"x" * (1 << 20)

    async def scenario(node: Node) -> None:
        assert node.wire is not None
        wire = node.wire
        loop = asyncio.get_running_loop()
        tracemalloc.start()
        try:
            hostile = [asyncio.create_task(_hostile_login(node, token_size, chunk)) for _ in range(6)]
            await _wait_until(lambda: wire.connections >= 6)
            # Another client meanwhile (all along, until every hostile login ended): ApiVersions, served before
            # login, answered within a second.
            reader, writer = await connect(node)
            worst, corr, deadline = 0.0, 0, loop.time() + 60
            while corr < 5 or not all(t.done() for t in hostile):
                assert loop.time() < deadline, "the hostile logins did not end within 60 s"
                corr += 1
                started = loop.time()
                writer.write(kp.encode_request(kp.API_VERSIONS, 0, corr, "victim"))
                answer = await answer_or_close(reader)
                worst = max(worst, loop.time() - started)
                assert struct.unpack(">i", answer[:4])[0] == corr
            writer.close()
            taken = await asyncio.wait_for(asyncio.gather(*hostile), 60)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 16 * 1024 * 1024, f"traced peak {peak / 1e6:.1f} MB"
        assert worst < 1.0, f"another client waited {worst:.2f} s"
        # The server stopped reading at the size prefix: no client got its 50 MB in (the socket buffers hold some).
        assert all(t < token_size for t in taken), taken
        assert wire.closed_by_limit["sasl_receive_size"] == 6

    _with_sasl_node(tmp_path, scenario)


def test_the_bound_is_kafkas_size_check_before_login_only(tmp_path: Path) -> None:
    """A frame of exactly sasl.server.max.receive.size is read and answered (a failed PLAIN login: 58); one byte
    more closes unanswered; after the login the bound no longer applies."""
    limit = 1024

    async def scenario(node: Node) -> None:
        assert node.wire is not None
        # exactly the limit: read, answered SASL_AUTHENTICATION_FAILED
        reader, writer = await connect(node)
        writer.write(_handshake(1))
        assert await answer_or_close(reader)
        overhead = _authenticate_frame(2, 0)[1]
        head, size = _authenticate_frame(2, limit - overhead)
        assert size == limit
        writer.write(head + b"u" * (limit - overhead))
        answer = await answer_or_close(reader)
        assert answer, "a frame of exactly the limit is read and answered"
        _corr, resp = kp.decode_response(kp.SASL_AUTHENTICATE, 1, answer)
        assert resp.error_code == 58
        writer.close()
        # one byte more: closed on the size prefix, nothing answered
        reader, writer = await connect(node)
        writer.write(_handshake(1))
        assert await answer_or_close(reader)
        head, size = _authenticate_frame(2, limit - overhead + 1)
        assert size == limit + 1
        writer.write(head)
        assert await answer_or_close(reader) == b""
        assert node.wire.closed_by_limit["sasl_receive_size"] == 1
        writer.close()

    _with_sasl_node(tmp_path, scenario, ConnectionLimits(sasl_server_max_receive_size=limit))


def test_a_real_client_logs_in_and_sends_large_requests_after_login(tmp_path: Path) -> None:
    """kafka-python over SASL_PLAINTEXT with PLAIN, against a node whose pre-login bound is 1 KiB: its login
    frames fit, and once logged in a CreateTopics of ~40 KB (far above the bound) is served."""

    async def scenario(node: Node) -> None:
        assert node.wire is not None
        port = node.wire.port

        def create() -> list[str]:
            from kafka.admin import NewTopic

            admin = KafkaAdminClient(
                bootstrap_servers=f"127.0.0.1:{port}",
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=PLAIN,
                sasl_plain_username="alice",
                sasl_plain_password=USERS["alice"],
                request_timeout_ms=20_000,
            )
            try:
                topics = [NewTopic(f"t{i:04d}-" + "x" * 150, 1, 1) for i in range(200)]
                admin.create_topics(topics, timeout_ms=20_000)
                return sorted(admin.list_topics())
            finally:
                admin.close()

        listed = await asyncio.to_thread(create)
        assert len(listed) == 200
        assert node.wire.closed_by_limit["sasl_receive_size"] == 0

    _with_sasl_node(tmp_path, scenario, ConnectionLimits(sasl_server_max_receive_size=1024))


async def _wait_until(cond: Callable[[], bool], seconds: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not cond():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)
