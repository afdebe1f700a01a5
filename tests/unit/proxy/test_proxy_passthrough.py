"""What a forwarded frame costs the proxy's own code: Produce and Fetch frames (and their answers) are never decoded,
and the bytes written on are the very objects read out of the other side's stream, not copies of them.

What asyncio itself copies is outside this check and is stated in docs/benchmarks.md ("proxy"): the stream
reader's buffer (kernel -> bytes -> its bytearray), the one copy out of it per frame that this test sees, and the
transport's buffer when a socket does not take a write whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

import pytest

from zkcoord.proxy import forward
from zkcoord.server import kafka_protocol as kp

FRAMES = 200


def request(key: int, corr: int, size: int) -> bytes:
    """A request frame (size prefix included) of API `key` v3 with `size` bytes of body after a 1-byte client id;
    Produce's body starts with a null transactional id and acks=1 (what `produce_acks` reads)."""
    body = (struct.pack(">hhh", -1, 1, 1000) if key == kp.PRODUCE else b"") + bytes(size)
    head = struct.pack(">hhih", key, 3, corr, 1) + b"c"
    return struct.pack(">i", len(head) + len(body)) + head + body


def test_produce_and_fetch_frames_pass_undecoded_and_uncopied(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[Any] = []
    for name in ("decode_request", "rewrite_addresses", "cap_api_versions"):
        real = getattr(kp, name)

        def counting(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            decoded.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(kp, name, counting)
    asyncio.run(_run(monkeypatch, decoded))


async def _run(monkeypatch: pytest.MonkeyPatch, decoded: list[Any]) -> None:
    read_objects: dict[
        int, Any
    ] = {}  # id -> the object a Link read from a stream (kept alive: ids stay unique)
    written: list[Any] = []

    real_readexactly = asyncio.StreamReader.readexactly

    async def recording_readexactly(self: asyncio.StreamReader, n: int) -> bytes:
        data = await real_readexactly(self, n)
        if n > 4:
            read_objects[id(data)] = data
        return data

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answers each request with a frame of its correlation id and the request's own body."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = struct.unpack(">i", await real_readexactly(reader, 4))
                frame = await real_readexactly(reader, size)
                answer = frame[4:8] + frame[11:]
                writer.write(struct.pack(">i", len(answer)) + answer)
                await writer.drain()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        write = writer.write

        def recording_write(data: Any) -> None:
            written.append(data)
            write(data)

        writer.write = recording_write  # type: ignore[method-assign]
        link = forward.Link(reader, writer, ("127.0.0.1", up_port), lambda n, h, p: (h, p), {}, None, 1 << 24)
        await link.run()

    async def connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        r, w = await asyncio.open_connection(host, port)
        write = w.write

        def recording_write(data: Any) -> None:
            written.append(data)
            write(data)

        w.write = recording_write  # type: ignore[method-assign]
        return r, w

    monkeypatch.setattr(forward, "_plain_connect", connect)
    monkeypatch.setattr(asyncio.StreamReader, "readexactly", recording_readexactly)
    upstream = await asyncio.start_server(broker, "127.0.0.1", 0)
    up_port = upstream.sockets[0].getsockname()[1]
    proxy = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        reader, client = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
        sent = [request(kp.PRODUCE if i % 2 else kp.FETCH, i, 100 + 997 * i) for i in range(FRAMES)]
        for frame in sent:
            client.write(frame)
        async with asyncio.timeout(30):
            for i, frame in enumerate(sent):
                (size,) = struct.unpack(">i", await real_readexactly(reader, 4))
                answer = await real_readexactly(reader, size)
                assert answer == struct.pack(">i", i) + frame[15:]  # in order, byte for byte
        client.close()
    finally:
        proxy.close()
        upstream.close()
    assert decoded == []
    bodies = [w for w in written if len(w) > 4]  # size prefixes are written apart
    assert len(bodies) == 2 * FRAMES  # each request toward the broker, each answer toward the client
    assert all(id(w) in read_objects and read_objects[id(w)] is w for w in bodies)
