"""The cluster id clients see in Metadata (kafka-python's describe_cluster): a single node's own, kept in
`meta.properties` across restarts; a cluster's `/cluster/id`, created as Kafka creates it or read if present."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kazoo.client import KazooClient

from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess, NodeUnavailable

pytestmark = pytest.mark.e2e

KAFKA_STYLE_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")  # 16 random bytes, url-safe base64, no padding


def _cluster_id(bootstrap: str) -> str:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return str(admin.describe_cluster()["cluster_id"])
    finally:
        admin.close()


def test_a_single_node_keeps_its_own_cluster_id(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "a", FAST_GROUP_FLAGS)
    with node:
        first = _cluster_id(node.bootstrap)
    assert KAFKA_STYLE_ID.match(first), first
    assert f"cluster.id={first}" in (tmp_path / "a" / "meta.properties").read_text()
    with node:
        assert _cluster_id(node.bootstrap) == first  # the same after a restart
    other = NodeProcess(tmp_path / "b", FAST_GROUP_FLAGS)
    with other:
        assert _cluster_id(other.bootstrap) != first  # another deployment, another id


@pytest.mark.integration
def test_a_cluster_node_creates_or_reads_cluster_id(zk_connect: str, tmp_path: Path) -> None:
    zk = KazooClient(hosts=zk_connect)
    zk.start(30)
    try:
        node = NodeProcess(tmp_path / "n1", ("--zk", zk_connect, "--node-id", "1", *FAST_GROUP_FLAGS))
        with node:
            created = _cluster_id(node.bootstrap)
        assert KAFKA_STYLE_ID.match(created), created
        assert (
            zk.get("/cluster/id")[0]
            == json.dumps({"version": "1", "id": created}, separators=(",", ":")).encode()
        )
        zk.set("/cluster/id", b'{"version":"1","id":"set-by-kafka-earlier"}')
        with node:
            assert _cluster_id(node.bootstrap) == "set-by-kafka-earlier"
        zk.set("/cluster/id", b"[[[not an id")
        with pytest.raises(NodeUnavailable, match="malformed znode /cluster/id"):
            node.start()
        assert zk.get("/cluster/id")[0] == b"[[[not an id"  # left as it was
    finally:
        zk.stop()
        zk.close()
