"""The proxy's broker list against real ZooKeeper: watched, and watched again after its session expired (an
expired session's watches are gone; without the re-read a broker registering afterwards would never get a port)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from zkcoord.legacy.codecs import BrokerRegistration
from zkcoord.local.zookeeper import free_port
from zkcoord.proxy.node import ProxyConfig, ProxyNode
from zkcoord.proxy.ports import PortMap
from zkcoord.testing import expire_session, wait_for


def register(zk: Any, node_id: int, port: int) -> None:
    reg = BrokerRegistration.create("127.0.0.1", port, timestamp_ms=int(time.time() * 1000))
    zk.create(f"/brokers/ids/{node_id}", reg.encode(), ephemeral=True, makepath=True)


def test_brokers_are_watched_across_a_session_expiry(zk: Any, zk_connect: str, tmp_path: Path) -> None:
    register(zk, 5, 19005)
    pins = {5: free_port(), 6: free_port(), 7: free_port()}
    config = ProxyConfig(zk_connect, "127.0.0.1", 9000, tmp_path, PortMap(free_port(), 40000, pinned=pins))

    async def scenario() -> None:
        node = ProxyNode(config)
        await node.start()
        try:
            assert node.watch is not None and node.watch.brokers == {5: ("127.0.0.1", 19005)}
            assert node.port_of(5) == pins[5]
            register(zk, 6, 19006)  # the watch, not a poll
            await asyncio.to_thread(wait_for, lambda: node.port_of(6) == pins[6], 10, "a port for broker 6")
            assert node.client is not None
            await asyncio.to_thread(expire_session, node.client)
            register(zk, 7, 19007)  # after the expiry: only a re-read with new watches sees it
            await asyncio.to_thread(wait_for, lambda: node.port_of(7) == pins[7], 10, "a port for broker 7")
            assert sorted(node.watch.brokers) == [5, 6, 7]
        finally:
            await node.close()

    asyncio.run(scenario())
