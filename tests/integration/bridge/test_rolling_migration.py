"""The documented rolling offset migration (reference §7.6) of a 4-member legacy group against real ZooKeeper
and a real `zkcoord serve` broker, with a producer running throughout: ZooKeeper storage → kafka + dual
commit → kafka only → back to dual commit, ZooKeeper := max(zk, broker), → ZooKeeper storage. Checked: no
committed offset ever goes backwards in either store, no produced record is skipped, duplicates are
bounded. Plus a dual commit while the broker is down, in both orders, and the commit after it heals."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zkcoord.bridge import Store, TopicPartition
from zkcoord.bridge.broker_store import BrokerOffsetStore
from zkcoord.bridge.member import member_offsets
from zkcoord.bridge.zk_side import ZooKeeperSide
from zkcoord.errors import ConfigError
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.testing.members import LegacyMember
from zkcoord.testing.producers import PacedProducer
from zkcoord.topic_partition import TopicPartition as LegacyTP
from zkcoord.zk import registry
from zkcoord.zk.offset_store import WriteMode
from zkcoord.zk.session import connect

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 8
GROUP = "rolling"
COMMIT_INTERVAL_MS = 200


@pytest.fixture
def node(zk_connect: str, tmp_path: Path) -> Iterator[NodeProcess]:
    server = NodeProcess(
        tmp_path / "node",
        ("--zk", zk_connect, "--node-id", "1", f"--num.partitions={PARTITIONS}", *FAST_GROUP_FLAGS),
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _config(
    zk_connect: str, group: str, name: str, storage: str, dual: bool, **extra: Any
) -> LegacyConsumerConfig:
    return LegacyConsumerConfig(
        group_id=group,
        zookeeper_connect=zk_connect,
        consumer_id=name,
        auto_offset_reset="smallest",
        auto_commit_interval_ms=COMMIT_INTERVAL_MS,
        rebalance_backoff_ms=200,
        socket_timeout_ms=3000,
        mode="fast",
        offsets_storage=storage,
        dual_commit_enabled=dual,
        **extra,
    )


def _member(config: LegacyConsumerConfig, seen: list[tuple[int, int]], topic: str = TOPIC) -> LegacyMember:
    """A legacy member consuming in its own thread (once started) into a shared list of (partition, offset)."""
    sink = lambda p, o: seen.append((p, o))  # noqa: E731
    return LegacyMember(config, {topic: 1}, offsets=member_offsets, sink=sink)


class _Monitor:
    """Polls both stores and records every per-partition decrease it ever sees."""

    def __init__(self, zk_connect: str, bootstrap: str, group: str) -> None:
        self.client = connect(zk_connect)
        self.broker = BrokerOffsetStore(bootstrap, group, request_timeout_ms=3000, bootstrap_timeout_ms=3000)
        self.group = group
        self.last: dict[tuple[str, Any], int] = {}
        self.regressions: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monitor", daemon=True)

    def sample(self) -> None:
        zk = registry.read_offsets(self.client, self.group)
        read = self.broker.read_offsets()
        broker = {} if read.request_error is not None else dict(read.offsets)
        for store, offsets in (("zookeeper", zk), ("broker", broker)):
            for tp, off in offsets.items():
                key = (store, (tp[0], tp[1]))
                if off < self.last.get(key, -1):
                    self.regressions.append(f"{store} {tp[0]}-{tp[1]}: {self.last[key]} -> {off}")
                self.last[key] = max(off, self.last.get(key, -1))
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.sample()

    def start(self) -> _Monitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sample()
        self.broker.close()
        self.client.stop()
        self.client.close()


def _wait_settled(zk_connect: str, members: list[LegacyMember], group: str, partitions: int) -> None:
    client = connect(zk_connect)
    try:

        def settled() -> bool:
            if not all(m.consumer.is_stable() for m in members):
                return False
            owners = registry.read_owners(client, group)
            believed = Counter((tp.topic, tp.partition) for m in members for tp in m.consumer.owned())
            return len(owners) == partitions and all(believed[tp] == 1 for tp in owners)

        wait_for(settled, 30, "the group to own every partition exactly once", interval=0.05)
    finally:
        client.stop()
        client.close()


def test_offset_storage_properties() -> None:
    config = LegacyConsumerConfig.from_properties(
        {
            "group.id": "g",
            "zookeeper.connect": "127.0.0.1:2181",
            "offsets.storage": "Kafka",
            "zkcoord.commit.order": "ZooKeeper-First",
            "zkcoord.bootstrap.servers": "127.0.0.1:9092",
        }
    )
    assert (config.offsets_storage, config.dual_commit_enabled) == ("kafka", True)  # the original's default
    assert (config.commit_order, config.bootstrap_servers) == ("zookeeper-first", "127.0.0.1:9092")
    assert LegacyConsumerConfig.from_properties(config.to_properties()) == config
    with pytest.raises(ConfigError, match=r"zkcoord\.commit\.order"):
        config.replace(commit_order="both")


def test_documented_rolling_migration_and_rollback(zk_connect: str, zk: Any, node: NodeProcess) -> None:
    seen: list[tuple[int, int]] = []
    producer = PacedProducer(node.bootstrap, TOPIC, per_second=150, limit=6000).start()
    wait_for(lambda: zk.exists(f"/brokers/topics/{TOPIC}") is not None, 30, "the topic in ZooKeeper")
    monitor = _Monitor(zk_connect, node.bootstrap, GROUP)
    members: list[LegacyMember] = []
    restarts = 0
    t0 = time.monotonic()
    try:
        # Phase A: a ZooKeeper-storage group.
        for i in range(4):
            members.append(_member(_config(zk_connect, GROUP, f"m{i}-A", "zookeeper", False), seen).start())
        _wait_settled(zk_connect, members, GROUP, PARTITIONS)
        monitor.start()
        wait_for(lambda: len(registry.read_offsets(zk, GROUP)) == PARTITIONS, 30, "ZooKeeper offsets")
        assert monitor.broker.read_offsets().offsets == {}, "zookeeper storage must not touch the broker"

        def rolling(phase: str, storage: str, dual: bool) -> None:
            nonlocal restarts
            for i in range(4):
                members[i].stop()
                members[i] = _member(_config(zk_connect, GROUP, f"m{i}-{phase}", storage, dual), seen).start()
                restarts += 1
                _wait_settled(zk_connect, members, GROUP, PARTITIONS)

        # Phase B: offsets.storage=kafka + dual.commit.enabled=true, one member at a time.
        rolling("B", "kafka", True)
        wait_for(
            lambda: len(monitor.broker.read_offsets().offsets) == PARTITIONS, 30, "broker offsets for all"
        )
        # Phase C: dual commit off, one member at a time (the broker is the store of record now).
        rolling("C", "kafka", False)
        zk_frozen = registry.read_offsets(zk, GROUP)
        n = len(seen)
        wait_for(lambda: len(seen) > n + 50, 30, "progress in kafka-only storage")
        assert registry.read_offsets(zk, GROUP) == zk_frozen, "kafka-only members must not write ZooKeeper"
        # Rollback: dual commit back on (ZooKeeper kept current), ZooKeeper := max(zk, broker), then
        # zookeeper storage one member at a time (§7.6 rollback caveat).
        rolling("D", "kafka", True)
        broker_now = dict(monitor.broker.read_offsets().offsets)
        ZooKeeperSide.for_group(zk, GROUP, WriteMode.NEVER_REGRESS).write_offsets(broker_now)
        zk_now = registry.read_offsets(zk, GROUP)
        assert all(zk_now[LegacyTP(tp.topic, tp.partition)] >= off for tp, off in broker_now.items())
        rolling("E", "zookeeper", False)
        n = len(seen)
        wait_for(lambda: len(seen) > n + 50, 30, "progress after the rollback")
    finally:
        producer.stop()
        try:
            produced = set(producer.acked)
            wait_for(lambda: produced <= set(seen), 30, "every produced record to be consumed")
            for m in members:
                m.consumer.commit_offsets()
        finally:
            for m in members:
                m.stop()
            monitor.stop()
    elapsed = time.monotonic() - t0

    assert monitor.regressions == [], monitor.regressions
    assert monitor.samples >= 20
    assert restarts == 16
    assert len(produced) >= 500, "the producer ran throughout"
    missing = produced - set(seen)
    assert not missing, f"{len(missing)} records skipped, e.g. {sorted(missing)[:5]}"
    duplicates = len(seen) - len(set(seen))
    rate = len(produced) / elapsed
    # A restart may redeliver at most one commit interval of records (clean closes commit, so a correct
    # run sees ~0); a rollback that skipped "ZooKeeper current first" would show up as ZK < broker above.
    bound = restarts * rate * COMMIT_INTERVAL_MS / 1000.0 + PARTITIONS
    assert duplicates <= bound, f"{duplicates} duplicates > {bound:.0f}"
    final_zk = registry.read_offsets(zk, GROUP)
    assert sorted(final_zk) == [(TOPIC, p) for p in range(PARTITIONS)]
    assert sum(final_zk.values()) == len(produced), "ZooKeeper (of record again) holds every offset"


def test_dual_commit_with_the_broker_down_reports_it_and_the_next_commit_heals(
    zk_connect: str, zk: Any, node: NodeProcess
) -> None:
    topic = "fail"
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=5)
    try:
        for i in range(40):
            producer.send(topic, key=b"k", value=f"{i}".encode(), partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)
    seen: dict[str, list[tuple[int, int]]] = {"broker-first": [], "zookeeper-first": []}
    members = {
        order: _member(
            _config(
                zk_connect,
                f"g-{order}",
                "m",
                "kafka",
                True,
                auto_commit_enable=False,
                commit_order=order,
            ),
            seen[order],
            topic,
        ).start()
        for order in seen
    }
    brokers = {order: BrokerOffsetStore(node.bootstrap, f"g-{order}") for order in seen}
    tp = TopicPartition(topic, 0)

    def zk_offset(order: str) -> int | None:
        return registry.read_offsets(zk, f"g-{order}").get(LegacyTP(topic, 0))

    try:
        for order, m in members.items():
            wait_for(lambda o=order: len(seen[o]) >= 40, 30, f"{order}: all records consumed")  # type: ignore[misc]
            # Partition 0 holds the records; since 91eb077 the member also commits the reset position (0) of
            # the empty partitions it owns, so count only what this test is about.
            assert m.consumer.commit_offsets() >= 1
            assert m.consumer.stats.last_commit_result.committed
            broker_offsets = brokers[order].read_offsets().offsets
            assert zk_offset(order) == 40 and broker_offsets[tp] == 40
            assert all(off == 0 for other, off in broker_offsets.items() if other != tp)
            for b in brokers.values():
                b.close()
        node.stop()
        # One more consumed offset can't come from a dead broker: move the position as a consumer would.
        for m in members.values():
            with m.consumer._lock:
                for owned_tp, owned in m.consumer._owned.items():
                    if owned_tp.partition == 0:
                        owned.consumed = 41
        results = {}
        for order, m in members.items():
            m.consumer.commit_offsets()
            results[order] = m.consumer.stats.last_commit_result
            assert results[order] is not None and not results[order].committed
            failed = [(p.tp, p.store) for p in results[order].failures]
            assert failed == [(tp, Store.BROKER)], results[order].describe()
        # broker-first is the original's order: ZooKeeper only for partitions the broker accepted, so
        # ZooKeeper keeps the old offset and the skip is reported; zookeeper-first lands it in ZooKeeper.
        assert [(p.tp, p.store) for p in results["broker-first"].skipped] == [(tp, Store.ZOOKEEPER)]
        assert zk_offset("broker-first") == 40
        assert results["zookeeper-first"].written(Store.ZOOKEEPER)[tp] == 41
        assert zk_offset("zookeeper-first") == 41
        assert members["broker-first"].consumer.stats.commit_failures >= 2

        node.start()
        for order, m in members.items():
            # Nothing new consumed: the commit still goes out because a store is behind.
            wait_for(
                lambda m=m: (
                    (m.consumer.commit_offsets() >= 0)  # type: ignore[misc]
                    and m.consumer.stats.last_commit_result.committed
                ),
                30,
                f"{order}: a commit reaching both stores",
                interval=0.3,
            )
            assert zk_offset(order) == 41
            with BrokerOffsetStore(node.bootstrap, f"g-{order}") as b:
                assert b.read_offsets().offsets[tp] == 41
    finally:
        for m in members.values():
            m.stop()
        for b in brokers.values():
            b.close()
