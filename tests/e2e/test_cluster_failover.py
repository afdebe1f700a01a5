"""Three `zkcoord serve --zk` nodes: one controller, kcat sees brokers/topics/leaders, and a kafka-python group
and a confluent-kafka group survive kill -9 of their coordinator with committed offsets and records intact."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from zkcoord.local.node import NodeProcess
from zkcoord.placement.coordinator import OFFSETS_TOPIC, partition_for_group
from zkcoord.testing import wait_for
from zkcoord.zk import registry

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

OFFSETS_PARTITIONS = 6
TOPIC = "events"
PARTITIONS = 6
PER_PARTITION = 50
CLUSTER_FLAGS = (
    "--group.min.session.timeout.ms=1000",
    "--group.initial.rebalance.delay.ms=0",
    f"--offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
    f"--num.partitions={PARTITIONS}",
)


class Cluster:
    """N serve children on loopback in one ZooKeeper chroot; every one is killed on `stop()`."""

    def __init__(self, zk_connect: str, base: Path, ids: tuple[int, ...] = (1, 2, 3)) -> None:
        self.nodes = {
            n: NodeProcess(base / f"node{n}", ("--zk", zk_connect, "--node-id", str(n), *CLUSTER_FLAGS))
            for n in ids
        }

    def start(self, zk: Any) -> None:
        # Side by side: each start is a new interpreter's import-bound second, and the nodes do not need one
        # another to come up (whichever registers first may win the controller election; the tests read it).
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(NodeProcess.start, self.nodes.values()))
        wait_for(
            lambda: sorted(registry.read_brokers(zk)) == sorted(self.nodes), 20, "all brokers registered"
        )
        wait_for(lambda: self.offsets_leaders(zk) is not None, 30, "every offsets partition has a leader")

    def stop(self) -> None:
        for node in self.nodes.values():
            node.kill9()

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values() if n.running)

    def offsets_leaders(self, zk: Any) -> dict[int, int] | None:
        out = {}
        for p in range(OFFSETS_PARTITIONS):
            state = registry.read_partition_state(zk, OFFSETS_TOPIC, p)
            if state is None or state.leader < 0:
                return None
            out[p] = state.leader
        return out

    def coordinator(self, zk: Any, group: str) -> int:
        state = registry.read_partition_state(
            zk, OFFSETS_TOPIC, partition_for_group(group, OFFSETS_PARTITIONS)
        )
        assert state is not None
        return state.leader

    def data_leaders(self, zk: Any) -> dict[int, int]:
        out = {}
        for p in range(PARTITIONS):
            state = registry.read_partition_state(zk, TOPIC, p)
            out[p] = state.leader if state is not None else -1
        return out


@pytest.fixture
def cluster(zk: Any, zk_connect: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(zk_connect, tmp_path)
    try:
        c.start(zk)
        yield c
    finally:
        c.stop()


def _produce(bootstrap: str, partitions: list[int], tag: str) -> dict[int, int]:
    """PER_PARTITION acknowledged records to each partition; returns partition -> acknowledged count."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=5, request_timeout_ms=10000)
    try:
        futures = [
            (p, producer.send(TOPIC, f"{tag}-{p}-{i}".encode(), partition=p))
            for p in partitions
            for i in range(PER_PARTITION)
        ]
        acked: dict[int, int] = {}
        for p, fut in futures:
            fut.get(20)
            acked[p] = acked.get(p, 0) + 1
        return acked
    finally:
        producer.close(5)


def _kp_consumer(bootstrap: str, group: str) -> KafkaConsumer:
    return KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        metadata_max_age_ms=1000,
        request_timeout_ms=8000,
        retry_backoff_ms=100,
    )


def _ck_consumer(bootstrap: str, group: str) -> Any:
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    c.subscribe([TOPIC])
    return c


class KpGroup:
    def __init__(self, bootstrap: str, group: str) -> None:
        self.consumer = _kp_consumer(bootstrap, group)
        # kafka-python (3.0.12) joins before its first Metadata answer: the leader assigns nothing ("No partition
        # metadata for topic events"), then its metadata snapshot changes and it rejoins without setting
        # rejoin_needed; when poll()'s timer runs out while that second JoinGroup/SyncGroup is in flight, need_rejoin()
        # is already False (the new assignment snapshot equals the metadata one), the join's completion is never
        # awaited, heartbeats stay disabled and the member expires with nothing assigned (seen under load: gen 2
        # synced, then "removed: session timeout expired" 6 s later). The nodes answered Metadata correctly (all 6
        # partitions); the client only has to know them before its first poll joins the group.
        wait_for(
            lambda: (
                TOPIC in self.consumer.topics()
                and self.consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS))
            ),
            30,
            f"{group}'s kafka-python consumer knows {TOPIC}'s partitions before joining",
        )
        self.seen: dict[int, set[bytes]] = {}

    def step(self) -> None:
        for tp, records in self.consumer.poll(timeout_ms=200).items():
            self.seen.setdefault(tp.partition, set()).update(r.value for r in records)

    def commit(self) -> bool:
        try:
            self.consumer.commit()
            return True
        except Exception:
            return False

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close(autocommit=False)


class CkGroup:
    def __init__(self, bootstrap: str, group: str) -> None:
        self.consumer = _ck_consumer(bootstrap, group)
        self.seen: dict[int, set[bytes]] = {}

    def step(self) -> None:
        for msg in self.consumer.consume(100, 0.2):
            if msg.error() is None:
                self.seen.setdefault(msg.partition(), set()).add(msg.value())

    def commit(self) -> bool:
        try:
            self.consumer.commit(asynchronous=False)
            return True
        except confluent_kafka.KafkaException as exc:
            return "NO_OFFSET" in str(exc)  # nothing new to commit is not a failure

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close()


def _drive(groups: list[Any], until: Any, timeout: float, what: str) -> None:
    def step() -> bool:
        for g in groups:
            g.step()
        return bool(until())

    wait_for(step, timeout, what)


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    """OffsetFetch from outside the group (a non-member consumer)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=group, enable_auto_commit=False)
    try:
        return {p: (c.committed(TopicPartition(TOPIC, p)) or 0) for p in range(PARTITIONS)}
    finally:
        c.close(autocommit=False)


def _groups_with_distinct_coordinators(cluster: Cluster, zk: Any) -> tuple[str, str]:
    controller = registry.read_controller(zk)
    assert controller is not None
    names = [f"group-{i}" for i in range(200)]
    by_node: dict[int, str] = {}
    for name in names:
        by_node.setdefault(cluster.coordinator(zk, name), name)
    # kill a non-controller first, then the controller: both the plain and the re-election path are covered
    others = sorted(n for n in by_node if n != controller.brokerid)
    assert others and controller.brokerid in by_node
    return by_node[others[0]], by_node[controller.brokerid]


def _coordinator_moved(cluster: Cluster, zk: Any, group: str, victim: int) -> bool:
    return cluster.coordinator(zk, group) not in (victim, -1)


def test_one_controller_and_kcat_lists_cluster(cluster: Cluster, zk: Any) -> None:
    _produce(cluster.bootstrap, list(range(PARTITIONS)), "a")
    controller = registry.read_controller(zk)
    assert controller is not None and controller.brokerid in cluster.nodes
    leaders = cluster.data_leaders(zk)
    assert sorted(set(leaders.values())) == [1, 2, 3]  # round-robin replicas, one leader each
    out = subprocess.run(
        ["kcat", "-L", "-b", cluster.bootstrap, "-m", "10"], capture_output=True, text=True, timeout=30
    ).stdout
    assert " 3 brokers:" in out
    for n, node in cluster.nodes.items():
        assert f"broker {n} at 127.0.0.1:{node.port}" in out
    assert f'topic "{TOPIC}" with {PARTITIONS} partitions:' in out
    for p, leader in leaders.items():
        assert f"partition {p}, leader {leader}, replicas: {leader}, isrs: {leader}" in out
    assert (
        f"broker {controller.brokerid} at 127.0.0.1:{cluster.nodes[controller.brokerid].port} (controller)"
        in out
    )


def test_coordinator_failover_with_real_clients(cluster: Cluster, zk: Any) -> None:
    acked = _produce(cluster.bootstrap, list(range(PARTITIONS)), "before")
    kp_name, ck_name = _groups_with_distinct_coordinators(cluster, zk)
    # RF=1: a partition whose leader dies goes offline until that node returns (docs/cluster.md), so the
    # no-loss claim is about partitions that kept their original leader.
    original = cluster.data_leaders(zk)
    kp = KpGroup(cluster.bootstrap, kp_name)
    ck = CkGroup(cluster.bootstrap, ck_name)
    groups: list[KpGroup | CkGroup] = [kp, ck]
    try:
        everything = set(range(PARTITIONS))
        _drive(
            groups,
            lambda: all({p for p, s in g.seen.items() if len(s) == acked[p]} == everything for g in groups),
            60,
            "both groups consumed every record",
        )
        assert kp.commit() and ck.commit()
        before = {g: _committed(cluster.bootstrap, name) for g, name in ((0, kp_name), (1, ck_name))}
        assert before[0] == acked and before[1] == acked

        for victim_group, name in ((kp, kp_name), (ck, ck_name)):
            victim = cluster.coordinator(zk, name)
            cluster.nodes[victim].kill9()
            moved = functools.partial(_coordinator_moved, cluster, zk, name, victim)
            wait_for(moved, 40, f"{name} coordinator moved")
            new = cluster.coordinator(zk, name)
            assert new != victim and cluster.nodes[new].running
            # The group stabilises again: partitions assigned and a commit through the new coordinator succeeds.
            _drive(
                groups,
                lambda g=victim_group: g.assigned() == everything and g.commit(),
                60,
                f"{name} stable again after kill -9 of node {victim}",
            )
            after = _committed(cluster.bootstrap, name)
            assert all(after[p] >= acked[p] for p in range(PARTITIONS)), (after, acked)
            now = cluster.data_leaders(zk)
            alive = [p for p, lead in original.items() if now[p] == lead and cluster.nodes[lead].running]
            assert alive
            # the dead node's data partitions are offline, never moved to a node without their records
            wait_for(
                lambda victim=victim: all(
                    cluster.data_leaders(zk)[p] == -1 for p, lead in original.items() if lead == victim
                ),
                20,
                f"node {victim}'s data partitions offline",
            )
            more = _produce(cluster.bootstrap, alive, f"after-{victim}")
            for p, n in more.items():
                acked[p] += n
            _drive(
                groups,
                lambda alive=alive: all(len(g.seen.get(p, ())) == acked[p] for g in groups for p in alive),
                60,
                "records produced after the failover consumed",
            )
            _drive(groups, lambda: kp.commit() and ck.commit(), 60, "both groups commit")
            for gname in (kp_name, ck_name):
                committed = _committed(cluster.bootstrap, gname)
                assert all(committed[p] == acked[p] for p in alive), (gname, committed, acked)
        # every acknowledged record of a partition whose leader survived was delivered to both groups
        last = [n for n, node in cluster.nodes.items() if node.running]
        assert len(last) == 1
        for p, lead in original.items():
            if lead in last:
                for g in groups:
                    assert len(g.seen[p]) == acked[p]
    finally:
        kp.close()
        ck.close()
