"""Pure parts of the process manager: config rendering and argument checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkcoord.local.zookeeper import ZooKeeper, ZooKeeperNode, free_port


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_ensemble_config_lists_every_peer(tmp_path: Path) -> None:
    nodes = [ZooKeeperNode(myid=i, client_port=20000 + i, data_dir=tmp_path / f"n{i}",
                           quorum_port=21000 + i, election_port=22000 + i) for i in (1, 2, 3)]  # fmt: skip
    for node in nodes:
        node.peers = nodes
    nodes[1].write_config()
    cfg = nodes[1].cfg_path.read_text().splitlines()
    assert "clientPort=20002" in cfg
    assert "clientPortAddress=127.0.0.1" in cfg
    assert "admin.enableServer=false" in cfg
    assert [line for line in cfg if line.startswith("server.")] == [
        "server.1=127.0.0.1:21001:22001",
        "server.2=127.0.0.1:21002:22002",
        "server.3=127.0.0.1:21003:22003",
    ]
    assert (tmp_path / "n2" / "myid").read_text().strip() == "2"


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ZooKeeper.start(0)
