"""Burrow 1.2.1 (/usr/bin/Burrow) against `serve --zk` nodes: its `kafka` cluster module polls our Metadata and
ListOffsets; its `kafka_zk` consumer module reads /consumers/G/offsets (legacy groups); its `kafka` consumer module
consumes the `__consumer_offsets` topic the cluster serves from the ZooKeeper record stores (broker-protocol
groups). For both, the lag endpoint must report end - committed per partition.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from zkcoord.local.node import NodeProcess
from zkcoord.placement.coordinator import OFFSETS_TOPIC, partition_for_group
from zkcoord.records.offsets import OffsetCommitKey, OffsetCommitValue, decode_record
from zkcoord.testing import free_port, wait_for
from zkcoord.zk import registry

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

BURROW = "/usr/bin/Burrow"
TOPIC = "lagged"
RECORDS = 100
COMMITTED = 90
GROUP = "oldgrp"


def _config(
    zk_hosts: str, chroot: str, bootstrap: str, http_port: int, base: Path, kafka_consumer: bool = False
) -> str:
    zk_servers = json.dumps(zk_hosts.split(","))
    servers = json.dumps(bootstrap.split(","))
    # Fetch of RecordBatch v2 needs sarama's Kafka >= 0.11 requests (Fetch v4); the cluster module keeps 0.10.
    consumer = (
        f"""
[client-profile.consumer]
client-id="burrow-offsets"
kafka-version="0.11.0"

[consumer.newkafka]
class-name="kafka"
cluster="local"
servers={servers}
client-profile="consumer"
offsets-topic="__consumer_offsets"
start-latest=false
"""
        if kafka_consumer
        else ""
    )
    return (
        consumer
        + f"""
[general]
pidfile="{base}/burrow.pid"

[logging]
level="info"

[zookeeper]
servers={zk_servers}
timeout=6
root-path="{chroot}/burrow"

[client-profile.test]
client-id="burrow-test"
kafka-version="0.10.0"

[cluster.local]
class-name="kafka"
servers={servers}
client-profile="test"
topic-refresh=1
offset-refresh=1

[consumer.oldzk]
class-name="kafka_zk"
servers={zk_servers}
zookeeper-path="{chroot}"
zookeeper-timeout=6
cluster="local"

[httpserver.default]
address="127.0.0.1:{http_port}"

[storage.default]
class-name="inmemory"
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1
"""
    )


@pytest.fixture
def node(zk_connect: str, tmp_path: Path) -> Iterator[NodeProcess]:
    proc = NodeProcess(
        tmp_path / "node", ("--zk", zk_connect, "--node-id", "1", "--offsets.topic.num.partitions=1")
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.kill9()


@contextlib.contextmanager
def _burrow(conf_dir: Path, config: str) -> Iterator[Any]:
    """Burrow running on `config`; killed on exit. The yielded object has `poll()` and `log()`."""
    conf_dir.mkdir()
    (conf_dir / "burrow.toml").write_text(config)
    log_path = conf_dir / "burrow.out"
    with log_path.open("w") as out:
        proc = subprocess.Popen(
            [BURROW, "-config-dir", str(conf_dir)],
            cwd=conf_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    proc.log = lambda: log_path.read_text()[-3000:]  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(10)


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


def test_burrow_reports_lag_of_zookeeper_group(
    zk: Any, zk_server: Any, zk_chroot: str, node: NodeProcess, tmp_path: Path
) -> None:
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks=1)
    for i in range(RECORDS):
        producer.send(TOPIC, f"r{i}".encode(), partition=0)
    producer.flush(20)
    producer.close(5)
    zk.create(f"/consumers/{GROUP}/offsets/{TOPIC}/0", str(COMMITTED).encode(), makepath=True)

    http_port = free_port()
    chroot = "/" + zk_chroot.strip("/")
    config = _config(zk_server.hosts, chroot, node.bootstrap, http_port, tmp_path)
    with _burrow(tmp_path / "burrow", config) as burrow:
        base = f"http://127.0.0.1:{http_port}/v3/kafka/local"
        found: dict[str, Any] = {}

        def lag_reported() -> bool:
            assert burrow.poll() is None, burrow.log()
            body = _get(f"{base}/consumer/{GROUP}/lag")
            if not body or body.get("error") or not body.get("status"):
                return False
            parts = body["status"].get("partitions") or []
            if not parts or parts[0].get("current_lag") != RECORDS - COMMITTED:
                # the first commit can arrive before the first broker-offset poll and is then dropped:
                # bump the committed offset's mtime so Burrow sees a fresh commit
                zk.set(f"/consumers/{GROUP}/offsets/{TOPIC}/0", str(COMMITTED).encode())
                return False
            found.update(body)
            return True

        wait_for(lag_reported, 60, "Burrow lag for the ZooKeeper group", interval=1.0)
        status = found["status"]
        assert status["cluster"] == "local" and status["group"] == GROUP
        part = status["partitions"][0]
        assert part["topic"] == TOPIC and part["partition"] == 0
        assert part["current_lag"] == RECORDS - COMMITTED
        assert part["end"]["offset"] == COMMITTED
        assert status["totallag"] == RECORDS - COMMITTED
        topic = _get(f"{base}/topic/{TOPIC}")
        assert topic is not None and topic["offsets"] == [RECORDS]


NEW_GROUP = "newgrp"
NEW_TOPIC = "lagged2"
OFFSETS_PARTITIONS = 4
COMMITS = {0: 60, 1: 75}  # partition -> committed offset; RECORDS produced to each


@pytest.fixture
def two_nodes(zk: Any, zk_connect: str, tmp_path: Path) -> Iterator[list[NodeProcess]]:
    flags = (
        "--zk",
        zk_connect,
        f"--offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
        "--group.min.session.timeout.ms=1000",
        "--group.initial.rebalance.delay.ms=0",
    )
    nodes = [NodeProcess(tmp_path / f"node{n}", (*flags, "--node-id", str(n))) for n in (1, 2)]
    try:
        for n in nodes:
            n.start()
        yield nodes
    finally:
        for n in nodes:
            n.kill9()


def _offsets_leaders(zk: Any) -> dict[int, int]:
    out = {}
    for p in range(OFFSETS_PARTITIONS):
        state = registry.read_partition_state(zk, OFFSETS_TOPIC, p)
        out[p] = state.leader if state is not None else -1
    return out


def test_burrow_reports_lag_of_broker_protocol_group(
    zk: Any, zk_server: Any, zk_chroot: str, two_nodes: list[NodeProcess], tmp_path: Path
) -> None:
    bootstrap = ",".join(n.bootstrap for n in two_nodes)
    wait_for(
        lambda: sorted(set(_offsets_leaders(zk).values())) == [1, 2],
        30,
        "offsets partitions led by both nodes",
    )
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        admin.create_topics([NewTopic(NEW_TOPIC, len(COMMITS), 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks=1, retries=10)
    try:
        for p in sorted(COMMITS):
            for i in range(RECORDS):
                producer.send(NEW_TOPIC, f"r{p}-{i}".encode(), partition=p)
        producer.flush(30)
    finally:
        producer.close(5)

    consumer = KafkaConsumer(
        NEW_TOPIC,
        bootstrap_servers=bootstrap.split(","),
        group_id=NEW_GROUP,
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        metadata_max_age_ms=1000,
    )
    try:
        wait_for(
            lambda: bool(consumer.poll(timeout_ms=200) is not None and len(consumer.assignment()) == 2),
            60,
            "the kafka-python group owns both partitions",
        )
        commits = {TopicPartition(NEW_TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in COMMITS.items()}
        consumer.commit(commits)

        # __consumer_offsets is internal, one partition per offsets partition, with the offsets leaders; the
        # coordinator's partition holds exactly the commit records the coordinator wrote.
        reader = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False)
        try:
            meta_parts = reader.partitions_for_topic(OFFSETS_TOPIC)
            assert meta_parts == set(range(OFFSETS_PARTITIONS))
            assert OFFSETS_TOPIC in reader._client.cluster.internal_topics
            coordinator_partition = partition_for_group(NEW_GROUP, OFFSETS_PARTITIONS)
            tp = TopicPartition(OFFSETS_TOPIC, coordinator_partition)
            reader.assign([tp])
            reader.seek_to_beginning(tp)
            latest: dict[int, int] = {}
            end = reader.end_offsets([tp])[tp]
            assert end > 0

            def commits_read() -> bool:
                for rec in reader.poll(timeout_ms=300).get(tp, []):
                    key, value = decode_record(rec.key, rec.value)
                    if isinstance(key, OffsetCommitKey) and key.group == NEW_GROUP and value is not None:
                        assert isinstance(value, OffsetCommitValue)
                        latest[key.partition] = value.offset
                return latest == COMMITS and reader.position(tp) >= end

            wait_for(commits_read, 30, "the commit records fetched from __consumer_offsets")
        finally:
            reader.close()
        assert not (two_nodes[0].data_dir / "logs" / f"{OFFSETS_TOPIC}-0").exists()

        http_port = free_port()
        chroot = "/" + zk_chroot.strip("/")
        config = _config(zk_server.hosts, chroot, bootstrap, http_port, tmp_path, kafka_consumer=True)
        with _burrow(tmp_path / "burrow", config) as burrow:
            url = f"http://127.0.0.1:{http_port}/v3/kafka/local/consumer/{NEW_GROUP}/lag"
            found: dict[str, Any] = {}

            def lag_reported() -> bool:
                assert burrow.poll() is None, burrow.log()
                body = _get(url)
                parts = (body or {}).get("status", {}).get("partitions") or [] if body else []
                lags = {p["partition"]: p.get("current_lag") for p in parts if p.get("topic") == NEW_TOPIC}
                if lags != {p: RECORDS - o for p, o in COMMITS.items()}:
                    # a commit read before Burrow's first broker-offset poll is dropped: commit again
                    consumer.commit(commits)
                    return False
                found.update(body)
                return True

            wait_for(lag_reported, 90, "Burrow lag for the broker-protocol group", interval=1.0)
        status = found["status"]
        assert status["group"] == NEW_GROUP
        assert status["totallag"] == sum(RECORDS - o for o in COMMITS.values())
        for part in status["partitions"]:
            assert part["end"]["offset"] == COMMITS[part["partition"]]
    finally:
        consumer.close(autocommit=False)
