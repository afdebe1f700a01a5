"""Coalesced writes (issue 17): answers ready at once (heartbeats) and answers that wait for a durable write
(commits), pipelined in one burst on one connection, still come back in request order, every one of them."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from zkcoord.server import kafka_protocol as kp
from zkcoord.server.app import Node
from zkcoord.server.broker import ServerConfig


def _commit(corr: int, offset: int) -> bytes:
    return kp.encode_request(
        kp.OFFSET_COMMIT,
        8,
        corr,
        "c",
        group_id="simple",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[("t", [(p, offset, -1, "") for p in range(10)])],
    )


def _create_t(node: Node) -> None:
    # The commits' topic: a commit naming a topic the node lacks is answered without a write.
    assert node.logs is not None
    node.logs.create_topic("t", 10)


def _heartbeat(corr: int) -> bytes:
    # an unknown group: answered at once (UNKNOWN_MEMBER_ID) unless a write is pending ahead of it
    return kp.encode_request(kp.HEARTBEAT, 3, corr, "c", group_id="g", generation_id=1, member_id="m")


def test_ready_and_parked_answers_keep_request_order(tmp_path: Path) -> None:
    async def run() -> None:
        node = Node(ServerConfig(port=0, data_dir=tmp_path))
        await node.start()
        try:
            _create_t(node)
            assert node.wire is not None
            reader, writer = await asyncio.open_connection("127.0.0.1", node.wire.port)
            frames = []
            for corr in range(1, 301):
                frames.append(_commit(corr, corr) if corr % 7 == 0 else _heartbeat(corr))
            writer.write(b"".join(frames))  # one burst: the server reads many frames per turn
            seen = []
            for _ in range(300):
                (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
                body = await asyncio.wait_for(reader.readexactly(size), 10)
                seen.append(struct.unpack_from(">i", body, 0)[0])
            assert seen == list(range(1, 301))
            writer.close()
            assert node.groups is not None
            stored = node.groups.state.view.offsets["simple"]
            assert stored[("t", 0)].offset == 294  # the last commit (7 * 42) is the one that stands
        finally:
            await node.close()

    asyncio.run(run())


def test_answers_released_together_leave_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits queued behind one append are answered together: their answers go out in a few writes (one per
    append batch), not a send() each, and still in request order."""
    writes: list[int] = []
    real_write = asyncio.StreamWriter.write

    def counting_write(self: asyncio.StreamWriter, data: bytes) -> None:
        if self.get_extra_info("sockname")[1] == port:
            writes.append(len(data))
        real_write(self, data)

    port = 0

    async def run() -> None:
        nonlocal port
        node = Node(ServerConfig(port=0, data_dir=tmp_path))
        await node.start()
        try:
            _create_t(node)
            assert node.wire is not None
            port = node.wire.port
            monkeypatch.setattr(asyncio.StreamWriter, "write", counting_write)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"".join(_commit(corr, corr) for corr in range(1, 41)))
            seen = []
            for _ in range(40):
                (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
                body = await asyncio.wait_for(reader.readexactly(size), 10)
                seen.append(struct.unpack_from(">i", body, 0)[0])
            assert seen == list(range(1, 41))
            writer.close()
        finally:
            await node.close()

    asyncio.run(run())
    # The reader takes 8 frames per turn, so at worst one append batch per turn: 5 writes, not 40.
    assert 1 <= len(writes) <= 20, writes
