"""The test kit's in-process node for wire tests: a single-node `zkcoord serve` (the server's `Node`) started on a
free loopback port inside an asyncio scenario, a raw connection to it, and the next response frame or the close.

    async def scenario(node: Node) -> None:
        reader, writer = await connect(node)
        writer.write(kp.encode_request(kp.API_VERSIONS, 0, 7, "c"))
        assert (await answer_or_close(reader))[:4] == struct.pack(">i", 7)

    run_with_node(tmp_path, scenario, connection_limits=ConnectionLimits(max_connections_per_ip=2))
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from zkcoord.server.app import Node
from zkcoord.server.broker import ServerConfig
from zkcoord.server.listener_security import ListenerSecurity


def run_with_node(
    data_dir: Path,
    scenario: Callable[[Node], Awaitable[None]],
    *,
    security: ListenerSecurity | None = None,
    **config: Any,
) -> None:
    """Start a node on port 0 over `data_dir` (`config`: more `ServerConfig` fields; `security`: what its
    listener requires), run `scenario(node)` on a fresh event loop, and close the node whatever happened."""

    async def run() -> None:
        node = Node(ServerConfig(port=0, data_dir=data_dir, **config), security=security)
        await node.start()
        try:
            await scenario(node)
        finally:
            await node.close()

    asyncio.run(run())


async def connect(node: Node) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw TCP connection to the node's listener."""
    assert node.wire is not None, "the node is not started"
    return await asyncio.open_connection("127.0.0.1", node.wire.port)


async def answer_or_close(reader: asyncio.StreamReader, timeout: float = 10.0) -> bytes:
    """The next response frame (without its size prefix), or b"" when the server closed the connection (cleanly
    or by a reset) before one; fails after `timeout` seconds of silence, and on a frame cut short."""
    try:
        head = await asyncio.wait_for(reader.readexactly(4), timeout)
    except asyncio.IncompleteReadError as exc:
        assert exc.partial == b"", f"the server closed inside a size prefix ({exc.partial!r})"
        return b""
    except ConnectionError:
        return b""
    (size,) = struct.unpack(">i", head)
    return await asyncio.wait_for(reader.readexactly(size), timeout)


__all__ = ["answer_or_close", "connect", "run_with_node"]
