"""Fixtures for end-to-end tests: one real `zkcoord serve` subprocess per module (`server`), or one bridged
`zkcoord serve --zk` node of mixed groups per module (`bridged_cluster`), always stopped afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from zkcoord.local.node import FAST_GROUP_FLAGS, READY, NodeProcess
from zkcoord.testing.tansu import Tansu
from zkcoord.zk.session import ensure_chroot

__all__ = ["FAST_GROUP_FLAGS", "READY", "BridgedCluster", "ServerProcess", "bridged_node_flags"]

# The e2e tests' server is the project's own `zkcoord serve` process manager.
ServerProcess = NodeProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("zkcoord-serve"), (*FAST_GROUP_FLAGS, "--num.partitions=1"))
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill9()


@dataclass
class BridgedCluster:
    """`serve --zk` nodes that bridge ZooKeeper offsets and the mixed groups `mixed-.*`, in one chroot."""

    zk_connect: str
    nodes: list[NodeProcess]

    @property
    def node(self) -> NodeProcess:
        return self.nodes[0]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes if n.running)


def bridged_node_flags(connect_string: str, node_id: int = 1, *extra: str) -> tuple[str, ...]:
    """A bridged node's flags: 12 partitions per new topic, 4 s ZooKeeper sessions, fast group timings."""
    return ("--zk", connect_string, "--node-id", str(node_id), "--num.partitions=12", *FAST_GROUP_FLAGS,
            "--zookeeper.session.timeout.ms=4000", "--bridge-zk-offsets", "--bridge-zk-groups", "mixed-.*",
            *extra)  # fmt: skip


@pytest.fixture(scope="module")
def bridged_cluster(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgedCluster]:
    """One chroot and one bridged serve node for the module; each test uses its own topic and group."""
    connect_string = ensure_chroot(zk_server.hosts, f"/zkcoord-tests/mixed-{uuid.uuid4().hex[:8]}")
    node = NodeProcess(tmp_path_factory.mktemp("mixed-node"), bridged_node_flags(connect_string))
    node.start()
    try:
        yield BridgedCluster(connect_string, [node])
    finally:
        node.stop()


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tansu]:
    """One Tansu (a Kafka-compatible broker zkcoord did not start, node id 111) for the module."""
    with Tansu.start(tmp_path_factory.mktemp("tansu") / "tansu.log") as broker:
        yield broker
