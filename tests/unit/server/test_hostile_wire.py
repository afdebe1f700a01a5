"""Hostile clients against a whole single-node server: every request is answered or its connection closed."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

from zkcoord.server import kafka_protocol as kp
from zkcoord.server.app import Node
from zkcoord.server.broker import ServerConfig


def _with_node(tmp_path: Path, scenario: Callable[[Node], Awaitable[None]], **config: object) -> None:
    async def run() -> None:
        node = Node(ServerConfig(port=0, data_dir=tmp_path, **config))  # type: ignore[arg-type]
        await node.start()
        try:
            await scenario(node)
        finally:
            await node.close()

    asyncio.run(run())


async def _connect(node: Node) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    assert node.wire is not None
    return await asyncio.open_connection("127.0.0.1", node.wire.port)


async def _answer_or_close(reader: asyncio.StreamReader) -> bytes:
    """The first response frame, or b"" when the server closed; fails after 10 s of silence."""
    try:
        head = await asyncio.wait_for(reader.readexactly(4), 10)
    except asyncio.IncompleteReadError as exc:
        assert exc.partial == b""
        return b""
    (size,) = struct.unpack(">i", head)
    return await asyncio.wait_for(reader.readexactly(size), 10)


def test_offset_commit_whose_handler_fails_is_answered_or_closed(tmp_path: Path) -> None:
    _with_node(tmp_path, _offset_commit_overflow)


async def _offset_commit_overflow(node: Node) -> None:
    # Before: the handler raised (retention 2^63-1 overflows the stored expiry), OffsetCommit v2 has no top-level
    # error code, and the connection stayed open with no answer.
    reader, writer = await _connect(node)
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
    got = await _answer_or_close(reader)
    if got:
        assert struct.unpack(">i", got[:4])[0] == 5
    writer.close()
    # The server still serves others.
    reader2, writer2 = await _connect(node)
    writer2.write(kp.encode_request(kp.API_VERSIONS, 0, 9, None))
    assert struct.unpack(">i", (await _answer_or_close(reader2))[:4])[0] == 9
    writer2.close()


def test_null_array_in_delete_groups_closes_the_connection(tmp_path: Path) -> None:
    _with_node(tmp_path, _delete_groups_null)


async def _delete_groups_null(node: Node) -> None:
    # Before: the decoder let the null through and the handler raised on it.
    reader, writer = await _connect(node)
    body = struct.pack(">hhih", kp.DELETE_GROUPS, 2, 3, 1) + b"c" + b"\x00" + b"\x00" + b"\x00"
    writer.write(struct.pack(">i", len(body)) + body)
    assert await _answer_or_close(reader) == b""
    writer.close()
