"""A standalone node's shutdown closes its group-records log: the "interval" fsync policy's last fsync, and a
compaction under way finished, before `Node.close` returns."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from zkcoord.group.config import GroupConfig
from zkcoord.server.app import Node
from zkcoord.server.broker import ServerConfig
from zkcoord.storage import FileRecordStore


def test_close_closes_the_record_log_after_its_compaction(tmp_path: Path) -> None:
    release = threading.Event()

    async def scenario() -> FileRecordStore:
        node = Node(
            ServerConfig(
                port=0, data_dir=tmp_path, group_records_fsync="interval", group_records_compact_min_bytes=1
            ),
            GroupConfig(group_initial_rebalance_delay_ms=0),
        )
        await node.start()
        assert node.groups is not None
        store = node.groups.store
        assert isinstance(store, FileRecordStore)
        store._step = lambda name: release.wait(30) if name == "read" else None  # hold the compaction
        store.append([(b"k", b"v")])  # over the threshold: a compaction starts and waits
        asyncio.get_running_loop().call_later(0.05, release.set)
        await node.close()
        return store

    store = asyncio.run(scenario())
    assert release.is_set() and store.compactions == 1  # close waited for it
    assert store._fd == -1  # and closed the active segment (after its fsync)
