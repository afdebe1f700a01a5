"""A Link's flow control toward a broker that stops reading: what the proxy buffers stays bounded."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from kafka.protocol.producer import ProduceRequest

from zkcoord.proxy import forward

DRAIN_AT = 1 << 20  # the Link's upstream write-buffer threshold


def produce_frame(acks: int, correlation_id: int) -> bytes:
    """A Produce v3 request with a ~30 KB client id, framed (size prefix included)."""
    req = ProduceRequest(version=3, transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[])
    req.with_header(correlation_id=correlation_id, client_id="c" * 30_000)
    return bytes(req.encode(header=True, framed=True))


def test_fire_and_forget_produce_waits_for_a_stalled_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """acks=0 frames get no answer, so only the drain check bounds them: with the broker not reading, the Link
    stops taking frames from the client once its upstream buffer passes the threshold (it did not: every frame
    the client sent piled up in the proxy's memory)."""
    frame = produce_frame(acks=0, correlation_id=1)
    frames = (64 << 20) // len(frame)  # 64 MiB: more than the kernel's loopback buffers hold
    asyncio.run(_stalled_broker(monkeypatch, frame, frames))


async def _stalled_broker(monkeypatch: pytest.MonkeyPatch, frame: bytes, frames: int) -> None:
    received = bytearray()
    got_all = asyncio.Event()
    broker_conn: list[asyncio.StreamReader] = []
    broker_tx: list[asyncio.Transport] = []

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.pause_reading()  # type: ignore[attr-defined]
        broker_tx.append(writer.transport)  # type: ignore[arg-type]
        broker_conn.append(reader)
        await got_all.wait()
        writer.close()

    peak = 0
    exceeded = asyncio.Event()
    drained_while_full = asyncio.Event()
    real_open = asyncio.open_connection

    async def watched_open(*args: Any, **kw: Any) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await real_open(*args, **kw)
        write, drain = writer.write, writer.drain

        def watched_write(data: Any) -> None:
            nonlocal peak
            write(data)
            peak = max(peak, writer.transport.get_write_buffer_size())
            if peak > DRAIN_AT + 2 * len(frame):
                exceeded.set()

        async def watched_drain() -> None:
            if writer.transport.get_write_buffer_size() > DRAIN_AT:
                drained_while_full.set()
            await drain()

        writer.write = watched_write  # type: ignore[method-assign]
        writer.drain = watched_drain  # type: ignore[method-assign]
        return reader, writer

    upstream = await asyncio.start_server(broker, "127.0.0.1", 0)
    up_port = upstream.sockets[0].getsockname()[1]
    links: list[asyncio.Task[None]] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = forward.Link(
            reader, writer, ("127.0.0.1", up_port), lambda n, h, p: (h, p), {}, None, 1 << 20, 100
        )
        links.append(asyncio.current_task())  # type: ignore[arg-type]
        await link.run()

    monkeypatch.setattr(forward.asyncio, "open_connection", watched_open)
    proxy = await asyncio.start_server(accept, "127.0.0.1", 0)
    proxy_port = proxy.sockets[0].getsockname()[1]
    try:
        _, client = await real_open("127.0.0.1", proxy_port)
        for _ in range(frames):
            client.write(frame)  # the client's transport buffers what the proxy does not take
        waits = [asyncio.ensure_future(e.wait()) for e in (exceeded, drained_while_full)]
        await asyncio.wait(waits, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        assert not exceeded.is_set(), f"proxy buffered {peak} bytes for a broker that does not read"
        assert drained_while_full.is_set()
        # The broker reads again: every frame arrives, byte for byte, in order.
        broker_tx[0].resume_reading()
        want = len(frame) * frames
        async with asyncio.timeout(120):
            while len(received) < want:
                received += await broker_conn[0].read(1 << 20)
        assert received == frame * frames
        assert peak <= DRAIN_AT + len(frame) + 4
        got_all.set()
        client.close()
    finally:
        got_all.set()
        for server in (proxy, upstream):
            server.close()
        for task in links:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10)
