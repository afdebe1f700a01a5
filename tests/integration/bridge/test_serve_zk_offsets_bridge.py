"""`zkcoord serve --zk ... --bridge-zk-offsets` with real kafka-python groups on real ZooKeeper: commits land in
the legacy offset znodes, OffsetFetch answers max(coordinator, ZooKeeper), a znode never goes backwards, and a
rollback to ZooKeeper storage after a broker-only run regresses nothing."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.zk.member import LegacyConsumer
from zkcoord.zk.session import connect, ensure_chroot

pytestmark = pytest.mark.integration

TOPIC = "bridged"
PARTITIONS = 2


@pytest.fixture(scope="module")
def chroot_connect(zk_server: Any) -> Iterator[str]:
    yield ensure_chroot(zk_server.hosts, f"/bridge-serve-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def zkc(chroot_connect: str) -> Iterator[Any]:
    client = connect(chroot_connect)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="module")
def node(chroot_connect: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    server = NodeProcess(
        tmp_path_factory.mktemp("bridged-node"),
        ("--zk", chroot_connect, "--node-id", "1", f"--num.partitions={PARTITIONS}", "--bridge-zk-offsets",
         *FAST_GROUP_FLAGS),
    )  # fmt: skip
    server.start()
    try:
        yield server
    finally:
        server.stop()
        import os

        if os.environ.get("BRIDGE_DEBUG_LOG"):
            Path(os.environ["BRIDGE_DEBUG_LOG"]).write_text("".join(server.output))
    assert "offset bridge mirrored=" in "".join(server.output)


@pytest.fixture(scope="module")
def produced(node: NodeProcess) -> dict[int, int]:
    """40 records per partition of TOPIC; returns partition -> log end offset."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=5, retries=5)
    try:
        for i in range(40 * PARTITIONS):
            producer.send(TOPIC, value=f"{i}".encode(), partition=i % PARTITIONS)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)
    return {p: 40 for p in range(PARTITIONS)}


def _consumer(node: NodeProcess, group: str, **extra: Any) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=node.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        request_timeout_ms=10000,
        metadata_max_age_ms=500,  # a rejoin follows a topic's partitions appearing, without waiting 5 minutes
        **extra,
    )


def _consume(consumer: Any, want: int, timeout: float = 30.0) -> list[tuple[int, int]]:
    """Poll until `want` records arrived (bounded by `timeout`); (partition, offset) of each."""
    got: list[tuple[int, int]] = []

    def more() -> bool:
        for records in consumer.poll(timeout_ms=1000).values():
            got.extend((r.partition, r.offset) for r in records)
        return len(got) >= want

    wait_for(more, timeout, f"{want} records")
    return got


def _has_partitions(consumer: Any, topic: str) -> bool:
    return bool(consumer.partitions_for_topic(topic))


def _subscribe(consumer: Any, topics: list[str]) -> None:
    """Subscribe once the topics' metadata is known. kafka-python 3.0.12 otherwise joins with an empty
    assignment, rebalances again when the metadata arrives, and a poll timing out during that second join can
    leave it joined on the wire but never started (no heartbeats, evicted): seen here 1 run in ~5."""
    for topic in topics:
        wait_for(partial(_has_partitions, consumer, topic), 30, f"metadata of {topic}")
    consumer.subscribe(topics)
    consumer.topics()  # fills the join's metadata snapshot (kafka-python 3.0.12's lost join: docs/cluster.md)


def _assigned(consumer: Any) -> bool:
    consumer.poll(timeout_ms=1000)
    return bool(consumer.assignment())


def _znode(zkc: Any, group: str, partition: int) -> bytes | None:
    path = f"/consumers/{group}/offsets/{TOPIC}/{partition}"
    return zkc.get(path)[0] if zkc.exists(path) else None


def _tp(partition: int) -> Any:
    from kafka import TopicPartition

    return TopicPartition(TOPIC, partition)


def test_group_commits_appear_in_the_legacy_znodes(
    node: NodeProcess,
    produced: dict[int, int],
    zkc: Any,
    chroot_connect: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    consumer = _consumer(node, "g-commits")
    try:
        _subscribe(consumer, [TOPIC])
        _consume(consumer, sum(produced.values()))
        consumer.commit()
        # The commit response waited for the mirror, so the znodes hold the offsets as soon as it returns.
        assert [_znode(zkc, "g-commits", p) for p in range(PARTITIONS)] == [b"40", b"40"]
        from kafka import OffsetAndMetadata

        consumer.commit({_tp(0): OffsetAndMetadata(41, "", -1)})
        assert _znode(zkc, "g-commits", 0) == b"41"
    finally:
        consumer.close()

    # The 0.8 tools that read offsets directly see them (ExportZkOffsets' format through `zkcoord legacy export`).
    from zkcoord.cli import main

    assert main(["legacy", "export", "--zk", chroot_connect, "--group", "g-commits"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"/consumers/g-commits/offsets/{TOPIC}/0:41",
        f"/consumers/g-commits/offsets/{TOPIC}/1:40",
    ]


def test_offset_fetch_answers_a_higher_znode_and_znodes_never_go_back(
    node: NodeProcess, produced: dict[int, int], zkc: Any
) -> None:
    from kafka import OffsetAndMetadata

    group = "g-max"
    first = _consumer(node, group)
    try:
        _subscribe(first, [TOPIC])
        _consume(first, 1)
        first.commit({_tp(0): OffsetAndMetadata(10, "", -1), _tp(1): OffsetAndMetadata(10, "", -1)})
        assert _znode(zkc, group, 0) == b"10"
        zkc.set(f"/consumers/{group}/offsets/{TOPIC}/0", b"25")  # a legacy member got further
        assert first.committed(_tp(0)) == 25
        assert first.committed(_tp(1)) == 10
        # The coordinator acknowledges a lower commit (its own store moves) but the znode is kept.
        first.commit({_tp(0): OffsetAndMetadata(12, "", -1)})
        assert _znode(zkc, group, 0) == b"25"
        assert first.committed(_tp(0)) == 25
        first.commit({_tp(0): OffsetAndMetadata(30, "", -1)})
        assert _znode(zkc, group, 0) == b"30"
    finally:
        first.close()
    # A new member of the group starts where the max says.
    zkc.set(f"/consumers/{group}/offsets/{TOPIC}/1", b"33")
    second = _consumer(node, group)
    try:
        _subscribe(second, [TOPIC])
        seen = _consume(second, (40 - 30) + (40 - 33))
        assert min(o for p, o in seen if p == 0) == 30
        assert min(o for p, o in seen if p == 1) == 33
    finally:
        second.close()


def test_malformed_znode_is_reported_not_hidden(
    node: NodeProcess, produced: dict[int, int], zkc: Any
) -> None:
    from kafka.errors import KafkaTimeoutError

    group = "g-malformed"
    zkc.create(f"/consumers/{group}/offsets/{TOPIC}/0", b"12x", makepath=True)
    consumer = _consumer(node, group)
    try:
        # LOAD_IN_PROGRESS is retried by the client until its deadline: never an answer without ZooKeeper's side.
        with pytest.raises(KafkaTimeoutError):
            consumer.committed(_tp(0), timeout_ms=1500)
        # Each failed fetch is one client retry; the log says so a bounded number of times (RateLimitedLog:
        # 10 lines a minute per kind), not once per retry (~10 lines/s while the znode stays malformed).
        retries = 25
        for _ in range(retries):
            with pytest.raises(KafkaTimeoutError):
                consumer.committed(_tp(0), timeout_ms=150)
        lines = [line for line in list(node.output) if "OffsetFetch answers LOAD_IN_PROGRESS" in line]
        assert lines and all(f"group={group} {TOPIC}/0" in line and "12x" in line for line in lines), lines
        assert len(lines) <= 10, f"{len(lines)} lines for {retries + 1}+ fetches"
        assert consumer.committed(_tp(1)) is None
        assert zkc.get(f"/consumers/{group}/offsets/{TOPIC}/0")[0] == b"12x"
        zkc.set(f"/consumers/{group}/offsets/{TOPIC}/0", b"7")  # the operator repairs it
        assert consumer.committed(_tp(0)) == 7
    finally:
        consumer.close()


def test_rollback_to_zookeeper_after_a_broker_only_run_regresses_nothing(
    node: NodeProcess, produced: dict[int, int], zkc: Any, chroot_connect: str
) -> None:
    group = "g-rollback"
    consumer = _consumer(node, group)
    try:
        _subscribe(consumer, [TOPIC])
        _consume(consumer, 50)
        consumer.commit()
        committed = {p: consumer.committed(_tp(p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()
    assert sum(committed.values()) >= 50
    # Back to a ZooKeeper-storage legacy member, no `migrate rollback` in between: the znodes are current.
    config = LegacyConsumerConfig(
        group_id=group,
        zookeeper_connect=chroot_connect,
        consumer_id="legacy-1",
        auto_offset_reset="smallest",
        auto_commit_interval_ms=200,
        rebalance_backoff_ms=200,
        socket_timeout_ms=3000,
        mode="fast",
    )
    legacy = LegacyConsumer(config, {TOPIC: 1})
    seen: list[tuple[int, int]] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            msg = legacy.next_message(timeout=0.1)
            if msg is not None:
                seen.append((msg.partition, msg.offset))

    legacy.start()
    thread = threading.Thread(target=run, name="legacy-rollback", daemon=True)
    thread.start()
    try:
        remaining = sum(produced[p] - committed[p] for p in range(PARTITIONS))
        wait_for(lambda: len(seen) >= remaining, 30, f"{remaining} records on the legacy member")
    finally:
        stop.set()
        thread.join(10)
        legacy.close()
    for p in range(PARTITIONS):
        offsets = sorted(o for q, o in seen if q == p)
        if committed[p] < produced[p]:
            assert offsets[0] == committed[p], (
                f"partition {p} restarted at {offsets[0]}, committed {committed[p]}"
            )
        assert set(range(committed[p], produced[p])) <= set(offsets)


def test_zookeeper_outage_commits_acknowledged_fetch_refused_mirror_catches_up(tmp_path: Path) -> None:
    """Single-node mode (no --zk): the bridge has its own ZooKeeper, which goes away for a while."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError
    from kazoo.exceptions import KazooException

    from zkcoord.local.zookeeper import ZooKeeper

    with ZooKeeper.start(1, base_dir=tmp_path / "zk") as zookeeper:
        server = NodeProcess(
            tmp_path / "node",
            (f"--num.partitions={PARTITIONS}", "--bridge-zk-offsets", zookeeper.hosts, *FAST_GROUP_FLAGS),
        )
        server.start()
        zkc = connect(zookeeper.hosts)
        consumer = None
        try:
            producer = KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=5, retries=5)
            for i in range(20 * PARTITIONS):
                producer.send(TOPIC, value=b"x", partition=i % PARTITIONS)
            producer.flush(timeout=30)
            producer.close(timeout=5)
            consumer = _consumer(server, "g-outage", max_poll_records=5)
            _subscribe(consumer, [TOPIC])
            _consume(consumer, 5)
            consumer.commit()
            first = {p: consumer.committed(_tp(p)) for p in range(PARTITIONS)}
            assert [_znode(zkc, "g-outage", p) for p in range(PARTITIONS)] == [
                None if first[p] is None else str(first[p]).encode() for p in range(PARTITIONS)
            ]
            zookeeper.kill_node(0)
            _consume(consumer, 20 * PARTITIONS - 5)
            consumer.commit()  # acknowledged from the coordinator's store while ZooKeeper is down
            with pytest.raises(KafkaTimeoutError):
                consumer.committed(_tp(0), timeout_ms=1500)  # the max is unknown: refused, not guessed
            zookeeper.restart_node(0)

            def caught_up() -> bool:
                # The test's own client was cut off too: under load the outage can outlast its session, and
                # until kazoo has a new one its calls fail; that is "not yet", not a failure of the mirror.
                try:
                    return [_znode(zkc, "g-outage", p) for p in range(PARTITIONS)] == [b"20", b"20"]
                except KazooException:
                    return False

            wait_for(caught_up, 30, "the mirror to catch up after the outage")
            assert [consumer.committed(_tp(p)) for p in range(PARTITIONS)] == [20, 20]
        finally:
            if consumer is not None:
                consumer.close()
            zkc.stop()
            zkc.close()
            server.stop()
        summary = [line for line in server.output if "offset bridge mirrored=" in line]
        assert summary and "unmirrored=0" in summary[-1]
        assert "mirror_failures=0" not in summary[-1] and "fetch_failures=0" not in summary[-1]


def test_migrate_workflow_sees_the_bridge_and_rollback_finds_zookeeper_current(
    node: NodeProcess,
    produced: dict[int, int],
    chroot_connect: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from zkcoord.cli import main

    group = "g-workflow"
    consumer = _consumer(node, group)
    try:
        _subscribe(consumer, [TOPIC])
        _consume(consumer, 30)
        consumer.commit()
    finally:
        consumer.close()
    common = ["--zk", chroot_connect, "--bootstrap", node.bootstrap, "--group", group]
    common += ["--state-dir", str(tmp_path / "state")]
    assert main(["migrate", "plan", *common]) == 0
    out = capsys.readouterr().out
    assert "coordinator offset bridge (serve --bridge-zk-offsets): on (bridge-" in out
    assert "no coordinator offset bridge is registered" not in out
    assert main(["migrate", "rollback", *common]) == 0
    out = capsys.readouterr().out
    assert "raised 0 ZooKeeper offset(s) to the broker's" in out  # the bridge had kept ZooKeeper current


def test_cluster_of_two_nodes_bridges_every_coordinator_and_survives_a_coordinator_move(
    zk_connect: str, zk: Any, tmp_path: Path
) -> None:
    """Cluster mode: each node mirrors the groups it coordinates; after the coordinator of a group moves, the new
    one answers the max and keeps mirroring."""
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata

    from zkcoord.bridge.zk_store import list_offset_bridges
    from zkcoord.placement.coordinator import OFFSETS_TOPIC, partition_for_group
    from zkcoord.zk import registry

    groups = {partition_for_group(f"g-cluster-{i}", 2): f"g-cluster-{i}" for i in range(20)}
    assert sorted(groups) == [0, 1]
    flags = ("--zk", zk_connect, "--offsets.topic.num.partitions=2", f"--num.partitions={PARTITIONS}",
             "--bridge-zk-offsets", *FAST_GROUP_FLAGS)  # fmt: skip
    nodes = {n: NodeProcess(tmp_path / f"node{n}", (*flags, "--node-id", str(n))) for n in (1, 2)}

    def leaders() -> list[int]:
        states = [registry.read_partition_state(zk, OFFSETS_TOPIC, p) for p in (0, 1)]
        return [s.leader if s is not None else -1 for s in states]

    try:
        for node in nodes.values():
            node.start()
        wait_for(lambda: sorted(leaders()) == [1, 2], 30, "one offsets partition led by each node")
        assert len(list_offset_bridges(zk)) == 2
        bootstrap = [n.bootstrap for n in nodes.values()]
        producer = KafkaProducer(bootstrap_servers=bootstrap, retries=10)
        try:  # the topic exists, with leaders, before any group subscribes to it
            producer.send(TOPIC, b"x", partition=0).get(30)
        finally:
            producer.close(timeout=5)
        for partition, group in sorted(groups.items()):
            consumer = KafkaConsumer(
                bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                session_timeout_ms=6000, heartbeat_interval_ms=500, request_timeout_ms=10000, metadata_max_age_ms=500,
            )  # fmt: skip
            try:
                _subscribe(consumer, [TOPIC])
                wait_for(partial(_assigned, consumer), 30, "assignment")
                consumer.commit({_tp(0): OffsetAndMetadata(100 + partition, "", -1)})
            finally:
                consumer.close()
            assert _znode(zk, group, 0) == str(100 + partition).encode()
        # Move group 0's coordinator: stop the node that leads offsets partition 0.
        victim = leaders()[0]
        nodes[victim].stop()
        survivor = 3 - victim
        wait_for(lambda: leaders()[0] == survivor, 60, "offsets partition 0 to move")
        group = groups[0]
        zk.set(f"/consumers/{group}/offsets/{TOPIC}/0", b"150")  # a legacy member moved on meanwhile
        consumer = KafkaConsumer(
            bootstrap_servers=nodes[survivor].bootstrap, group_id=group, enable_auto_commit=False,
            session_timeout_ms=6000, heartbeat_interval_ms=500, request_timeout_ms=10000, metadata_max_age_ms=500,
        )  # fmt: skip
        try:
            assert consumer.committed(_tp(0), timeout_ms=30000) == 150
            # Half of TOPIC's partitions died with the victim (replication factor 1); a topic created now lives
            # on the survivor, so the member gets an assignment (a generation) and commits TOPIC's offset.
            producer = KafkaProducer(bootstrap_servers=nodes[survivor].bootstrap, retries=10)
            try:
                producer.send("after-move", b"x", partition=0).get(30)
            finally:
                producer.close(timeout=5)
            _subscribe(consumer, ["after-move"])
            wait_for(partial(_assigned, consumer), 30, "assignment")
            consumer.commit({_tp(0): OffsetAndMetadata(160, "", -1)})
        finally:
            consumer.close()
        assert _znode(zk, group, 0) == b"160"
    finally:
        for node in nodes.values():
            node.stop()
