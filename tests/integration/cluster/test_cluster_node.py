"""Cluster nodes in-process over a real ZooKeeper: registration, coordinator lookup, loading, failover."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

import zkcoord.cluster.node as node_module
from zkcoord.cluster.node import ClusterConfig, ClusterNode
from zkcoord.errors import ConfigError
from zkcoord.group.errors import ErrorCode
from zkcoord.records.offsets import OffsetCommitKey, OffsetCommitValue, encode_key, encode_offset_value
from zkcoord.testing import expire_session, wait_for
from zkcoord.zk.record_store import StoreFenced, ZkRecordStore, encode_batch, records_path
from zkcoord.zk.registry import NodeIdInUse

pytestmark = pytest.mark.integration

SESSION_S = 4.0
PARTS = 6
GROUPS = [f"group-{i}" for i in range(12)]


def value(offset: int) -> bytes:
    """A committed offset as the coordinator stores it (a node refuses to load a record that does not decode)."""
    return encode_offset_value(OffsetCommitValue(offset, -1, "", 0))


class Loaded:
    """What the group service would do: replay a partition's records on leadership, drop them on resign."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.gate: dict[int, threading.Event] = {}

    def become_leader(self, partition: int, store: Any) -> None:
        gate = self.gate.get(partition)
        if gate is not None:
            assert gate.wait(10)
        self.records[partition] = list(store.load())

    def resign(self, partition: int) -> None:
        self.records.pop(partition, None)


@pytest.fixture
def make_node(zk_connect: str, zk_client_factory: Callable[..., Any]) -> Any:
    nodes: list[ClusterNode] = []

    def make(node_id: int, loaded: Loaded | None = None, client: Any = None) -> ClusterNode:
        loaded = loaded or Loaded()
        cfg = ClusterConfig(
            zk_connect, node_id, "127.0.0.1", 19000 + node_id, offsets_topic_num_partitions=PARTS
        )
        node = ClusterNode(
            cfg,
            on_become_leader=loaded.become_leader,
            on_resign=loaded.resign,
            client=client or zk_client_factory(session_timeout_s=SESSION_S),
        )
        node.loaded = loaded  # type: ignore[attr-defined]
        node.start()
        nodes.append(node)
        return node

    yield make
    for n in nodes:
        n.close()


def settled(nodes: list[ClusterNode]) -> bool:
    """Every node sees every node, the same balanced leaders, and has loaded what it leads."""
    ids = {n.node_id for n in nodes}
    views = [n.offsets_leaders() for n in nodes]
    if any(v != views[0] for v in views) or len(views[0]) != PARTS:
        return False
    counts = [sum(1 for lead in views[0].values() if lead.leader == i) for i in ids]
    if max(counts) - min(counts) > 1 or any({b for b, _, _ in n.brokers()} != ids for n in nodes):
        return False
    return all(n.owns_group(g) for g in GROUPS for n in nodes if n.find_coordinator(g).node_id == n.node_id)


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"offsets\.topic\.num\.partitions"):
        ClusterConfig("h:1", 1, "127.0.0.1", 9092, offsets_topic_num_partitions=0)
    with pytest.raises(ConfigError, match=r"node\.id"):
        ClusterConfig("h:1", -1, "127.0.0.1", 9092)


def test_duplicate_node_id_is_refused(make_node: Any) -> None:
    make_node(1)
    with pytest.raises(NodeIdInUse, match="node id 1 is already registered"):
        make_node(1)


def test_every_node_agrees_on_the_coordinator(make_node: Any) -> None:
    nodes = [make_node(i) for i in (1, 2, 3)]
    wait_for(lambda: settled(nodes), 15, "all nodes to see leaders and load their partitions")
    for g in GROUPS:
        answers = {n.find_coordinator(g) for n in nodes}
        assert len(answers) == 1
        (answer,) = answers
        assert answer.error == ErrorCode.NONE and answer.port == 19000 + answer.node_id
        statuses = {n.node_id: n.group_status(g) for n in nodes}
        assert statuses[answer.node_id] == ErrorCode.NONE
        assert all(s == ErrorCode.NOT_COORDINATOR for i, s in statuses.items() if i != answer.node_id)
    assert sorted(b for b, _, _ in nodes[0].brokers()) == [1, 2, 3]


def test_load_in_progress_until_the_partition_is_loaded(make_node: Any) -> None:
    loaded = Loaded()
    gate = threading.Event()
    loaded.gate = {p: gate for p in range(PARTS)}
    node = make_node(1, loaded)
    try:
        wait_for(lambda: node.group_status("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 10, "loading")
        assert not node.owns_group("g")
    finally:
        gate.set()
    wait_for(lambda: node.owns_group("g"), 10, "the partition to finish loading")


def test_load_in_progress_while_the_store_is_being_opened(
    make_node: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ZooKeeper names the node leader before its pass has opened the partition's store (a ZooKeeper round trip
    per partition, 50 after a restart): LOAD_IN_PROGRESS then, as Kafka after becomeLeader, never
    NOT_COORDINATOR, which made clients drop the coordinator and rediscover the same node."""
    opening = threading.Event()
    gate = threading.Event()

    class SlowStore(ZkRecordStore):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            opening.set()
            assert gate.wait(10)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(node_module, "ZkRecordStore", SlowStore)
    node = make_node(1)
    try:
        assert opening.wait(10)
        wait_for(lambda: node.find_coordinator("g").node_id == 1, 10, "ZooKeeper naming node 1")
        assert node.group_status("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    finally:
        gate.set()
    wait_for(lambda: node.owns_group("g"), 10, "the partition to finish loading")


def test_failover_loads_every_acknowledged_record_and_fences_the_old_leader(make_node: Any) -> None:
    nodes = {i: make_node(i) for i in (1, 2, 3)}
    wait_for(lambda: settled(list(nodes.values())), 15, "steady state")
    group = "payments"
    old = nodes[nodes[1].find_coordinator(group).node_id]
    partition = old.partition_for(group)
    store = old.record_store()
    acked = []
    for i in range(50):
        rec = (encode_key(OffsetCommitKey(group, "orders", i % 3)), value(i))
        store.append([rec])
        acked.append(rec)
    stale = old.store_for_group(group)

    expire_session(old.client)  # real server-side expiry: its registration and leadership go
    survivors = [n for n in nodes.values() if n is not old]

    def moved() -> bool:
        answers = {n.find_coordinator(group).node_id for n in survivors}
        return (
            len(answers) == 1
            and old.node_id not in answers
            and -1 not in answers  # no leader yet (the dead node's registration gone, no new state)
            and all(n.owns_group(group) for n in survivors if n.find_coordinator(group).node_id == n.node_id)
        )

    wait_for(moved, 15, "a survivor to take over the group's partition")
    new = nodes[survivors[0].find_coordinator(group).node_id]
    assert new.loaded.records[partition] == acked
    with pytest.raises(StoreFenced):
        stale.append([(encode_key(OffsetCommitKey(group, "orders", 0)), value(999))])
    assert list(new.store_for_group(group).load()) == acked
    # the expired node re-registers on its new session and rejoins as a follower for this group
    wait_for(lambda: old.node_id in {b for b, _, _ in new.brokers()}, 15, "the old node to re-register")
    # it gets a balanced share back (offsets partitions may move, records live in ZooKeeper), loading them fresh
    wait_for(lambda: settled(list(nodes.values())), 15, "the cluster to settle with the old node back")
    now = nodes[new.find_coordinator(group).node_id]
    assert now.loaded.records[partition] == acked


def test_the_leader_compacts_after_appends_and_on_load(
    zk_connect: str, zk_client_factory: Callable[..., Any]
) -> None:
    group = "compacted"
    keys = [encode_key(OffsetCommitKey(group, "orders", p)) for p in range(3)]

    def node(node_id: int, compact_after: int) -> ClusterNode:
        cfg = ClusterConfig(
            zk_connect,
            node_id,
            "127.0.0.1",
            19000 + node_id,
            offsets_topic_num_partitions=PARTS,
            offsets_compact_after_batches=compact_after,
        )
        loaded = Loaded()  # loads each partition it leads, as the group service does
        n = ClusterNode(
            cfg,
            on_become_leader=loaded.become_leader,
            on_resign=loaded.resign,
            client=zk_client_factory(session_timeout_s=SESSION_S),
        )
        n.start()
        return n

    # node 1 never compacts within this test (threshold 1000): it leaves a 12-batch history
    first = node(1, 1000)
    try:
        wait_for(lambda: first.owns_group(group), 15, "node 1 to lead the group's partition")
        for i in range(12):
            first.record_store().append([(keys[i % 3], value(i))])
        assert first.store_for_group(group).batch_count() == 12
    finally:
        first.close()
    # node 2 takes the partition over, loads the history and compacts it right after the load
    second = node(2, 5)
    try:
        wait_for(lambda: second.owns_group(group), 15, "node 2 to lead the group's partition")
        store = second.store_for_group(group)
        wait_for(lambda: store.compactions == 1, 10, "compaction after the load")
        assert store.batch_count() == 1
        last = {keys[i % 3]: value(i) for i in range(12)}
        assert dict(store.load()) == last
        # appends make it due again; the node's worker compacts, the acknowledged values survive
        for i in range(4):
            second.record_store().append([(keys[0], value(100 + i))])
        wait_for(lambda: store.compactions == 2, 10, "compaction after appends")
        assert dict(store.load()) == {**last, keys[0]: value(103)} and store.batch_count() == 1
    finally:
        second.close()


def test_one_partitions_malformed_batch_is_its_own_problem_and_a_repair_needs_no_restart(
    make_node: Any, zk: Any, zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A bad batch znode in one offsets partition used to stop the load of that partition and of every partition
    after it, until a restart. Now: only the bad partitions wait (LOAD_IN_PROGRESS), named with path and reason,
    the znodes stay as they were, and a repaired (set) or removed znode is loaded without a restart."""
    loaded = Loaded()
    cfg = ClusterConfig(zk_connect, 1, "127.0.0.1", 19001, offsets_topic_num_partitions=PARTS)
    first = ClusterNode(
        cfg, on_become_leader=loaded.become_leader, on_resign=loaded.resign
    )  # its own session
    first.start()
    wait_for(lambda: settled([first]), 15, "node 1 to lead every partition")
    by_partition: dict[int, str] = {}
    for g in GROUPS:
        by_partition.setdefault(first.partition_for(g), g)
    assert sorted(by_partition) == list(range(PARTS))
    acked: dict[int, list[tuple[bytes, bytes | None]]] = {}
    for p, g in sorted(by_partition.items()):
        acked[p] = [(encode_key(OffsetCommitKey(g, "orders", i)), value(10 * p + i)) for i in range(2)]
        first.record_store().append(acked[p])
    first.close()  # its session ends: node 2 takes every partition over

    # Partition 1: a batch that is no batch. Partition 4: a well-framed batch whose record does not decode.
    garbage = zk.create(records_path(1) + "/batch-", b"not a batch", sequence=True)
    undecodable = zk.create(records_path(4) + "/batch-", encode_batch([(b"\xff\xff", b"x")]), sequence=True)
    with caplog.at_level(logging.WARNING, logger="zkcoord.cluster.node"):
        second = make_node(2)
        others = [p for p in range(PARTS) if p not in (1, 4)]
        wait_for(lambda: all(second.owns_group(by_partition[p]) for p in others), 15, "the other partitions")
        wait_for(lambda: sorted(second.load_failures()) == [1, 4], 10, "both failures reported")
        for p in others:
            assert second.loaded.records[p] == acked[p]
        failures = second.load_failures()
        assert f"malformed znode {garbage}: batch does not start with b'ZKR1'" in failures[1].reason
        assert f"malformed znode {undecodable}: record 0 does not decode" in failures[4].reason
        for p in (1, 4):
            assert second.group_status(by_partition[p]) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert zk.get(garbage)[0] == b"not a batch" and zk.exists(undecodable) is not None

        # The operator repairs one (a valid batch in its place) and removes the other: both load, no restart,
        # well before the back-off would have retried (the watch on the bad znode wakes the node).
        repaired = (encode_key(OffsetCommitKey(by_partition[1], "orders", 7)), value(77))
        zk.set(garbage, encode_batch([repaired]))
        zk.delete(undecodable)
        wait_for(
            lambda: second.owns_group(by_partition[1]) and second.owns_group(by_partition[4]), 5, "repair"
        )
        assert second.loaded.records[1] == [*acked[1], repaired]
        assert second.loaded.records[4] == acked[4]
        assert second.load_failures() == {}
    reports = [r.getMessage() for r in caplog.records if "NOT served" in r.getMessage()]
    assert 2 <= len(reports) <= 10, reports
    assert any("partition 1 NOT served" in m and garbage in m for m in reports)
    assert any("loaded after" in r.getMessage() for r in caplog.records)
