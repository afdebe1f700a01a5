"""zkcoord in front of someone else's cluster, with Tansu as that cluster (registered in real ZooKeeper as a
ZooKeeper-era broker registers itself): plain cluster mode refuses to join it; the proxy carries real clients to it.

One Tansu for the module (node id 111; each test its own topics and its own ZooKeeper chroot).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zkcoord.cli import main
from zkcoord.cluster.node import ClusterConfig, ClusterNode, ForeignBrokersRegistered
from zkcoord.local.zookeeper import free_port
from zkcoord.testing.tansu import Tansu, register_in_zookeeper, snapshot

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tansu]:
    with Tansu.start(tmp_path_factory.mktemp("tansu") / "tansu.log") as broker:
        yield broker


@pytest.fixture(scope="module")
def topic(tansu: Tansu) -> str:
    tansu.create_topic("orders", 4)
    return "orders"


def test_plain_cluster_mode_refuses_a_foreign_cluster_and_writes_nothing(
    zk: Any, zk_connect: str, tansu: Tansu, topic: str, tmp_path: Path, capsys: Any
) -> None:
    with register_in_zookeeper(zk, tansu, {topic: 4}):
        before = snapshot(zk)
        code = main(["serve", "--zk", zk_connect, "--listen", f"127.0.0.1:{free_port()}", "--node-id", "1",
                     "--data-dir", str(tmp_path / "node"), "--bridge-zk-offsets", "--bridge-zk-groups", ".*"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2
        assert f"broker 111 (PLAINTEXT://127.0.0.1:{tansu.port}, controller)" in err
        assert "zkcoord did not start" in err and "zkcoord proxy --zk" in err and "nothing was written" in err
        # the library path refuses the same way, before its first write
        node = ClusterNode(ClusterConfig(zk_connect, 2, "127.0.0.1", free_port()))
        with pytest.raises(ForeignBrokersRegistered, match="broker 111"):
            node.start()
        assert snapshot(zk) == before
        assert not (tmp_path / "node").exists()


def test_a_controller_left_by_a_foreign_broker_is_refused_too(zk: Any, zk_connect: str, tansu: Tansu) -> None:
    """The controller's broker gone from /brokers/ids but its /controller still held (a broker stopping)."""
    with register_in_zookeeper(zk, tansu, {}):
        zk.delete("/brokers/ids/111")
        before = snapshot(zk)
        node = ClusterNode(ClusterConfig(zk_connect, 2, "127.0.0.1", free_port()))
        with pytest.raises(
            ForeignBrokersRegistered, match=r"/controller held by broker 111 \(not registered\)"
        ):
            node.start()
        assert snapshot(zk) == before


def test_zkcoord_nodes_start_beside_each_other(zk: Any, zk_connect: str) -> None:
    """Marked registrations are not foreign: a second node joins the first (and the first's controller)."""
    nodes = [ClusterNode(ClusterConfig(zk_connect, n, "127.0.0.1", free_port())) for n in (1, 2)]
    try:
        for node in nodes:
            node.start()
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
        assert sorted(zk.get_children("/zkcoord/brokers")) == ["1", "2"]
        for n in ("1", "2"):
            assert (
                zk.get(f"/zkcoord/brokers/{n}")[1].ephemeralOwner
                == zk.get(f"/brokers/ids/{n}")[1].ephemeralOwner
            )
    finally:
        for node in nodes:
            node.close()
