"""What a forwarded frame costs the proxy: Produce and Fetch frames (and their answers) are never decoded, and
each byte is copied once in user space: the kernel receives it straight into a buffer the proxy gave it
(`get_buffer`), and the proxy writes on a view of that very buffer, never a copy. The only other copy allowed is
the part of a frame received before its size showed it would not fit in the buffer (`carried`), bounded here.

What asyncio itself copies is outside this check and is stated in docs/benchmarks.md ("proxy"): the transport's
buffer when a socket does not take a write whole, and TLS's encryption.
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


def test_produce_and_fetch_frames_pass_undecoded_and_copied_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Old code (asyncio streams): every write was a `bytes` made by StreamReader.readexactly out of its own
    buffer (itself filled from a `bytes` the socket returned): 3 copies, no view of a receive buffer."""
    decoded: list[Any] = []
    for name in ("decode_request", "rewrite_addresses", "cap_api_versions"):
        real = getattr(kp, name)

        def counting(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            decoded.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(kp, name, counting)
    asyncio.run(_run(monkeypatch, decoded))


async def _run(monkeypatch: pytest.MonkeyPatch, decoded: list[Any]) -> None:
    given: dict[
        int, Any
    ] = {}  # id -> a buffer the proxy gave the kernel to receive into (kept alive: ids unique)
    written: list[Any] = []  # what the proxy wrote to either socket
    sides: list[forward._Frames] = []

    real_get_buffer = forward._Frames.get_buffer
    real_made = forward._Frames.connection_made

    def recording_get_buffer(self: forward._Frames, sizehint: int) -> memoryview:
        view = real_get_buffer(self, sizehint)
        given[id(view.obj)] = view.obj
        return view

    def recording_made(self: forward._Frames, transport: Any) -> None:
        write = transport.write

        def recording_write(data: Any) -> None:
            written.append(data)
            write(data)

        transport.write = recording_write
        sides.append(self)
        real_made(self, transport)

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answers each request with a frame of its correlation id and the request's own body."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                answer = frame[4:8] + frame[11:]
                writer.write(struct.pack(">i", len(answer)) + answer)
                await writer.drain()

    monkeypatch.setattr(forward._Frames, "get_buffer", recording_get_buffer)
    monkeypatch.setattr(forward._Frames, "connection_made", recording_made)
    upstream = await asyncio.start_server(broker, "127.0.0.1", 0)
    up_port = upstream.sockets[0].getsockname()[1]
    links: set[asyncio.Task[None]] = set()
    proxy = await forward.listen(
        "127.0.0.1",
        0,
        lambda t: forward.Link(("127.0.0.1", up_port), lambda n, h, p: (h, p), {}, None, 1 << 24),
        links,
    )
    try:
        reader, client = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
        sent = [request(kp.PRODUCE if i % 2 else kp.FETCH, i, 100 + 997 * i) for i in range(FRAMES)]
        for frame in sent:
            client.write(frame)
        async with asyncio.timeout(30):
            for i, frame in enumerate(sent):
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                answer = await reader.readexactly(size)
                assert answer == struct.pack(">i", i) + frame[15:]  # in order, byte for byte
        client.close()
        async with asyncio.timeout(10):
            while links:
                await asyncio.wait(set(links))
    finally:
        proxy.close()
        upstream.close()
    assert decoded == []
    forwarded = sum(map(len, sent)) + sum(
        len(f) - 7 for f in sent
    )  # the requests, then their answers (framed)
    assert all(
        isinstance(w, memoryview) and id(w.obj) in given and given[id(w.obj)] is w.obj for w in written
    )
    assert (
        sum(len(w) for w in written) == forwarded
    )  # each byte written on once, from where the kernel put it
    carried = sum(side.carried for side in sides)
    assert len(sides) == 2
    # At most TAIL bytes of a frame are moved (measured: 51,489 of 39,726,400 bytes, 0.13%).
    assert carried <= min(2 * FRAMES * forward.TAIL, forwarded // 100), (
        f"{carried} of {forwarded} bytes moved"
    )
    assert len(written) <= 2 * FRAMES  # a frame's size prefix goes with it (the old code wrote them apart)
