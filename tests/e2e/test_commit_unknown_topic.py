"""OffsetCommit for a topic or partition the cluster does not have: UNKNOWN_TOPIC_OR_PARTITION for that partition,
nothing stored and nothing mirrored to ZooKeeper, the rest of the commit taken (Kafka's KafkaApis existence
check), on a single node, a cluster node and the proxy (in front of Tansu), for the versions clients send (v1 on
the generic path, v2 and v8 on the fast path)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse
from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kazoo.client import KazooClient

from e2e.conftest import FAST_GROUP_FLAGS, BridgedCluster, NodeProcess
from e2e.proxies import ProxyProcess, coordinator_proxy
from e2e.wire_calls import call_once
from zkcoord.errors import ErrorCode
from zkcoord.testing import wait_for
from zkcoord.testing.tansu import Tansu, register_in_zookeeper
from zkcoord.zk.session import ensure_chroot

pytestmark = pytest.mark.e2e

UNKNOWN = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


@pytest.fixture(scope="module")
def single(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, str]]:
    """A single node (no --zk) mirroring its groups' commits to ZooKeeper: (node, its bridge's connect string)."""
    connect = ensure_chroot(zk_server.hosts, f"/zkcoord-tests/unknown-{uuid.uuid4().hex[:8]}")
    node = NodeProcess(
        tmp_path_factory.mktemp("unknown-topic-node"),
        (*FAST_GROUP_FLAGS, "--num.partitions=2", f"--bridge-zk-offsets={connect}"),
    )
    node.start()
    try:
        yield node, connect
    finally:
        node.stop()


@pytest.fixture(scope="module", params=["single", "cluster"])
def served(request: pytest.FixtureRequest) -> tuple[NodeProcess, str]:
    if request.param == "single":
        node, connect = request.getfixturevalue("single")
        return node, connect
    cluster: BridgedCluster = request.getfixturevalue("bridged_cluster")
    return cluster.node, cluster.zk_connect


@pytest.fixture
def zk_at(served: tuple[NodeProcess, str]) -> Iterator[KazooClient]:
    client = KazooClient(hosts=served[1])
    client.start(30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _topic(node: NodeProcess, partitions: int) -> str:
    """A fresh topic, created and known to the node's metadata (a cluster node learns it from ZooKeeper)."""
    name = f"known-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])

        def known() -> bool:
            (described,) = admin.describe_topics([name])
            return described["error_code"] == 0 and len(described["partitions"]) == partitions

        wait_for(known, 30, f"{name} in the node's metadata")
    finally:
        admin.close()
    return name


def _commit(port: int, version: int, group: str, offsets: dict[tuple[str, int], int]) -> dict[Any, int]:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    topics = sorted({t for t, _ in offsets})
    req = OffsetCommitRequest(
        version=version,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            T(
                name=t,
                partitions=[
                    P(partition_index=p, committed_offset=o) for (tt, p), o in offsets.items() if tt == t
                ],
            )
            for t in topics
        ],
    )
    resp = call_once(port, req, OffsetCommitResponse)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def _fetch(port: int, group: str, tps: list[tuple[str, int]]) -> dict[Any, int]:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = sorted({t for t, _ in tps})
    req = OffsetFetchRequest(
        version=1,
        group_id=group,
        topics=[T(name=t, partition_indexes=[p for tt, p in tps if tt == t]) for t in topics],
    )
    resp = call_once(port, req, OffsetFetchResponse)
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


def _groups(port: int) -> set[str]:
    resp = call_once(port, ListGroupsRequest(version=0), ListGroupsResponse)
    return {g.group_id for g in resp.groups}


NOT_READY = {
    int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
    int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
    int(ErrorCode.NOT_COORDINATOR),
}


def _until_coordinated(node: NodeProcess, group: str, topic: str) -> None:
    """A fresh cluster node elects a leader for the group's offsets partition and loads it before it takes a
    commit: commit the known partition until it is taken (the test then commits it again)."""
    wait_for(
        lambda: _commit(node.port, 2, group, {(topic, 0): 0})[(topic, 0)] not in NOT_READY,
        30,
        f"a coordinator for {group}",
    )


@pytest.mark.parametrize("version", [1, 2, 8])
def test_a_commit_naming_what_the_cluster_lacks_is_refused_there_and_taken_elsewhere(
    served: tuple[NodeProcess, str], version: int
) -> None:
    node, _ = served
    topic = _topic(node, 2)
    group = f"simple-{uuid.uuid4().hex[:8]}"
    _until_coordinated(node, group, topic)
    answer = _commit(node.port, version, group, {(topic, 0): 5, (topic, 2): 6, ("no-such-topic", 0): 7})
    assert answer == {(topic, 0): 0, (topic, 2): UNKNOWN, ("no-such-topic", 0): UNKNOWN}
    assert _fetch(node.port, group, [(topic, 0), (topic, 2), ("no-such-topic", 0)]) == {
        (topic, 0): 5,
        (topic, 2): -1,
        ("no-such-topic", 0): -1,
    }
    # Nothing known at all: answered before the coordinator, so no group is made for it.
    lost = f"lost-{uuid.uuid4().hex[:8]}"
    assert _commit(node.port, version, lost, {("no-such-topic", 0): 1, (topic, 7): 2}) == {
        ("no-such-topic", 0): UNKNOWN,
        (topic, 7): UNKNOWN,
    }
    assert lost not in _groups(node.port)
    assert group in _groups(node.port)


def test_a_members_commit_mirrors_only_what_the_cluster_has(
    served: tuple[NodeProcess, str], zk_at: KazooClient
) -> None:
    """librdkafka in the group commits three partitions, one real: only that one is stored, and the coordinator's
    mirror writes its znode only."""
    node, _ = served
    topic = _topic(node, 2)
    group = f"member-{uuid.uuid4().hex[:8]}"
    committed: list[tuple[Any, Any]] = []  # what on_commit reported: (error, partitions)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": node.bootstrap, "group.id": group, "enable.auto.commit": False,
         "session.timeout.ms": 6000, "log_level": 3,
         "on_commit": lambda err, partitions: committed.append((err, partitions))}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])

        def assigned() -> bool:
            consumer.poll(0.2)
            return bool(consumer.assignment())

        wait_for(assigned, 30, "the member's assignment")
        TP = confluent_kafka.TopicPartition
        consumer.commit(
            offsets=[TP(topic, 1, 11), TP(topic, 5, 12), TP("no-such-topic", 0, 13)], asynchronous=True
        )

        def answered() -> bool:
            consumer.poll(0.1)
            return bool(committed)

        wait_for(answered, 15, "the commit's answer")
        # librdkafka reports the request's first partition error on every partition of it: what was stored
        # tells them apart.
        assert committed[0][0].code() == UNKNOWN
        assert _fetch(node.port, group, [(topic, 1), (topic, 5), ("no-such-topic", 0)]) == {
            (topic, 1): 11,
            (topic, 5): -1,
            ("no-such-topic", 0): -1,
        }
    finally:
        consumer.close()
    # The mirror writes a commit's accepted partitions in one batch: once the real one's znode is there, the
    # others would be too.
    base = f"/consumers/{group}/offsets"
    wait_for(lambda: zk_at.exists(f"{base}/{topic}/1") is not None, 15, "the mirrored commit")
    assert zk_at.get(f"{base}/{topic}/1")[0] == b"11"
    assert zk_at.get_children(f"{base}/{topic}") == ["1"]
    assert zk_at.exists(f"{base}/no-such-topic") is None


def test_the_proxy_judges_a_commit_by_the_clusters_topics(
    zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path
) -> None:
    """Behind `zkcoord proxy`, the topics are the cluster's (Tansu's): a partition it lacks is refused, and a topic
    created on the cluster a moment ago, which the proxy has never asked about, is looked up and taken."""
    topic, group = f"proxied-{uuid.uuid4().hex[:8]}", f"mixed-unknown-{uuid.uuid4().hex[:8]}"
    tansu.create_topic(topic, 2)
    with register_in_zookeeper(zk, tansu, {topic: 2}):
        proxy = ProxyProcess(zk_connect, tmp_path / "proxy", "--bridge-zk-groups", "mixed-.*")
        try:
            coordinator_proxy(zk_connect, group)
            wait_for(
                lambda: _commit(proxy.port, 2, group, {(topic, 0): 0})[(topic, 0)] not in NOT_READY,
                30,
                "the proxy's coordinator",
            )
            answer = _commit(proxy.port, 8, group, {(topic, 0): 5, (topic, 2): 6, ("no-such-topic", 0): 7})
            assert answer == {(topic, 0): 0, (topic, 2): UNKNOWN, ("no-such-topic", 0): UNKNOWN}
            later = f"proxied-later-{uuid.uuid4().hex[:8]}"
            tansu.create_topic(later, 3)
            assert _commit(proxy.port, 8, group, {(later, 2): 9}) == {(later, 2): 0}
            assert _fetch(proxy.port, group, [(topic, 0), (topic, 2), ("no-such-topic", 0), (later, 2)]) == {
                (topic, 0): 5,
                (topic, 2): -1,
                ("no-such-topic", 0): -1,
                (later, 2): 9,
            }
        finally:
            proxy.stop()
