"""The era's own clients against one `zkcoord serve --zk` node shared by the module: version-0 offsets in
ZooKeeper (kafka-python's own v0 request classes over a real socket, and a zkcoord legacy member)."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kazoo.client import KazooClient

from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for

pytestmark = pytest.mark.e2e

TOPIC = "old-clients"


class Cluster:
    def __init__(self, node: NodeProcess, zk_connect: str, zk: KazooClient) -> None:
        self.node = node
        self.zk_connect = zk_connect
        self.zk = zk


@pytest.fixture(scope="module")
def cluster(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    chroot = f"/old-clients-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zk_server.hosts)
    root.start(30)
    root.ensure_path(chroot)
    connect = f"{zk_server.hosts}{chroot}"
    zk = KazooClient(hosts=connect)
    zk.start(30)
    node = NodeProcess(
        tmp_path_factory.mktemp("old-clients-node"),
        ("--zk", connect, "--node-id", "1", "--num.partitions=1", *FAST_GROUP_FLAGS),
    )
    try:
        with node:
            yield Cluster(node, connect, zk)
    finally:
        node.kill9()
        zk.stop()
        zk.close()
        root.delete(chroot, recursive=True)
        root.stop()
        root.close()


def _call(port: int, request: Any, response_cls: Any) -> Any:
    """One request over a fresh socket; the response decoded by the request's own response class."""
    request.with_header(correlation_id=7, client_id="old-client")
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", _read(sock, 4))[0]
        frame = _read(sock, size)
    response = response_cls.decode(frame, version=request.version, header=True)
    assert response.header.correlation_id == 7
    return response


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "the server closed the connection"
        buf += chunk
    return buf


def _commit_v0(port: int, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> dict[Any, int]:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    topics = sorted({t for t, _ in offsets})
    req = OffsetCommitRequest(
        version=0,
        group_id=group,
        topics=[
            T(
                name=t,
                partitions=[
                    P(partition_index=p, committed_offset=o, committed_metadata=m)
                    for (tt, p), (o, m) in sorted(offsets.items())
                    if tt == t
                ],
            )
            for t in topics
        ],
    )
    resp = _call(port, req, OffsetCommitResponse)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def _fetch(port: int, group: str, tps: list[tuple[str, int]], version: int = 0) -> dict[Any, tuple[int, int]]:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = sorted({t for t, _ in tps})
    req = OffsetFetchRequest(
        version=version,
        group_id=group,
        topics=[T(name=t, partition_indexes=[p for tt, p in tps if tt == t]) for t in topics],
    )
    resp = _call(port, req, OffsetFetchResponse)
    return {
        (t.name, p.partition_index): (p.committed_offset, p.error_code)
        for t in resp.topics
        for p in t.partitions
    }


def _legacy_consume(zk_connect: str, group: str, topic: str, n: int) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "zkcoord", "legacy", "consume", "--zk", zk_connect, "--group", group,
           "--topic", topic, "--max-messages", str(n)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, timeout=90, stdin=subprocess.DEVNULL)


def test_v0_offsets_are_the_zookeeper_offsets(cluster: Cluster) -> None:
    topic, group = f"{TOPIC}-v0", "old-group"
    producer = KafkaProducer(bootstrap_servers=cluster.node.bootstrap, linger_ms=5)
    try:
        for i in range(60):
            producer.send(topic, value=b"r%d" % i, partition=0)
        producer.flush(30)
    finally:
        producer.close(5)
    port = cluster.node.port
    path = f"/consumers/{group}/offsets/{topic}/0"

    # A v0 commit lands in the znode as Kafka writes it (the decimal offset, metadata not stored); a partition
    # the cluster does not know and metadata over offset.metadata.max.bytes are refused, nothing written.
    errors = _commit_v0(
        port,
        group,
        {(topic, 0): (42, "from kafka-node"), (topic, 9): (5, ""), ("no-such-topic", 0): (5, "")},
    )
    assert errors == {(topic, 0): 0, (topic, 9): 3, ("no-such-topic", 0): 3}
    assert cluster.zk.get(path)[0] == b"42"
    assert _commit_v0(port, group, {(topic, 0): (43, "x" * 4097)}) == {(topic, 0): 12}
    assert cluster.zk.get(path)[0] == b"42"
    assert cluster.zk.exists(f"/consumers/{group}/offsets/no-such-topic") is None
    # v1+ is unchanged: the coordinator's store has nothing for the group.
    assert _fetch(port, group, [(topic, 0)], version=1) == {(topic, 0): (-1, 0)}

    # A zkcoord legacy member starts from the v0 commit, and commits in ZooKeeper as it goes.
    done = _legacy_consume(cluster.zk_connect, group, topic, 5)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout.splitlines() == [b"r%d" % i for i in range(42, 47)]
    wait_for(lambda: cluster.zk.get(path)[0] == b"47", 10, "the member's commit")

    # ... and the legacy member's ZooKeeper commit is what OffsetFetch v0 returns; no znode is Kafka's
    # UNKNOWN_TOPIC_OR_PARTITION with offset -1, as is a partition the cluster does not know.
    fetched = _fetch(port, group, [(topic, 0), (topic, 3), ("no-such-topic", 0)])
    assert fetched == {(topic, 0): (47, 0), (topic, 3): (-1, 3), ("no-such-topic", 0): (-1, 3)}
    assert _fetch(port, "never-committed", [(topic, 0)]) == {(topic, 0): (-1, 3)}
    # A znode that is no number is that partition's error, never a default offset.
    cluster.zk.set(path, b"forty")
    assert _fetch(port, group, [(topic, 0)]) == {(topic, 0): (-1, -1)}
