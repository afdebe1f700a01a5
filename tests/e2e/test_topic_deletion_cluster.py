"""DeleteTopics on a two-node `serve --zk` cluster with kafka-python: the controller deletes `/brokers/topics/T`
only after every live node has dropped its partition logs and its groups' offsets of T; a topic re-created under
the same name starts empty; a node that was down during the deletion does not bring the topic back."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from zkcoord.legacy.codecs import kafka_uuid_string
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.zk import registry
from zkcoord.zk.controller import DELETION_ACKS_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

GROUP = "deletion-readers"


@pytest.fixture
def nodes(zk_connect: str, tmp_path: Path) -> Iterator[list[NodeProcess]]:
    procs = [
        NodeProcess(
            tmp_path / f"node{i}",
            ("--zk", zk_connect, "--node-id", str(i), "--num.partitions=1", *FAST_GROUP_FLAGS),
        )
        for i in (1, 2)
    ]
    try:
        for p in procs:
            p.start()
        yield procs
    finally:
        for p in procs:
            p.kill9()


def _bootstrap(nodes: list[NodeProcess]) -> str:
    return ",".join(n.bootstrap for n in nodes if n.running)


def _produce(bootstrap: str, topic: str, per_partition: dict[int, list[bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=20, retry_backoff_ms=100)
    try:
        wait_for(
            lambda: len(producer.partitions_for(topic) or ()) >= len(per_partition), 30, "topic metadata"
        )
        futures = [producer.send(topic, v, partition=p) for p, vs in per_partition.items() for v in vs]
        for f in futures:
            f.get(30)
    finally:
        producer.close()


def _read_in_group(bootstrap: str, topic: str, expected: int) -> list[tuple[int, int, bytes]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        metadata_max_age_ms=1000,
    )
    try:
        wait_for(lambda: bool(consumer.partitions_for_topic(topic)), 30, "topic metadata")
        consumer.subscribe([topic])
        consumer.topics()  # metadata before the first join (kafka-python 3.0.12's lost join: docs/cluster.md)
        got: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + 45
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend((r.partition, r.offset, r.value) for r in records)
        consumer.commit()
        return sorted(got)
    finally:
        consumer.close()


def test_delete_topic_across_the_cluster(nodes: list[NodeProcess], zk_connect: str) -> None:
    zk = KazooClient(hosts=zk_connect)
    zk.start(30)
    bootstrap = _bootstrap(nodes)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_for(lambda: len(admin.describe_cluster()["brokers"]) == 2, 30, "both nodes registered")
        configs = {"retention.bytes": "1048576", "segment.bytes": "4096"}
        admin.create_topics([NewTopic("doomed", 4, 1, topic_configs=configs), NewTopic("kept", 1, 1)])
        # Kafka's /config/topics/T, written with the topic; every node keeps the topic's configs
        assert json.loads(zk.get("/config/topics/doomed")[0]) == {"version": 1, "config": configs}
        assert zk.exists("/config/topics/kept") is None
        for n in nodes:
            path = n.data_dir / "logs" / "doomed-0" / "topic-config.json"
            wait_for(path.exists, 10, f"{path} written")
            assert json.loads(path.read_text())["config"] == configs
        _produce(bootstrap, "doomed", {p: [b"old-%d-%d" % (p, i) for i in range(2)] for p in range(4)})
        _produce(bootstrap, "kept", {0: [b"kept"]})
        assert len(_read_in_group(bootstrap, "doomed", 8)) == 8
        assert len(_read_in_group(bootstrap, "kept", 1)) == 1
        before = admin.list_group_offsets(GROUP)[GROUP]
        assert {tp.partition: o.offset for tp, o in before.items() if tp.topic == "doomed"} == dict.fromkeys(
            range(4), 2
        )
        led = {n.data_dir for n in nodes if any((n.data_dir / "logs").glob("doomed-*/*.log"))}
        assert len(led) == 2  # both nodes hold partitions of the topic

        result = admin.delete_topics(["doomed"], timeout_ms=30_000)
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("doomed", 0)]
        assert zk.exists("/brokers/topics/doomed") is None
        assert zk.exists("/admin/delete_topics/doomed") is None
        assert zk.exists("/config/topics/doomed") is None  # deleted with the topic, as Kafka does
        assert zk.exists(f"{DELETION_ACKS_ROOT}/doomed") is None
        for n in nodes:
            assert not list((n.data_dir / "logs").glob("doomed-*")), n.data_dir
        after = admin.list_group_offsets(GROUP)[GROUP]
        assert not [tp for tp in after if tp.topic == "doomed"]
        assert after[TopicPartition("kept", 0)].offset == 1

        admin.create_topics([NewTopic("doomed", 1, 1)])
        _produce(bootstrap, "doomed", {0: [b"new-0", b"new-1"]})
        assert _read_in_group(bootstrap, "doomed", 2) == [(0, 0, b"new-0"), (0, 1, b"new-1")]

        # A node away during a deletion keeps its files but neither serves nor republishes the topic.
        admin.create_topics([NewTopic("while-away", 2, 1)])
        _produce(bootstrap, "while-away", {0: [b"a"], 1: [b"b"]})
        away = nodes[1]
        away.stop()
        wait_for(lambda: zk.exists("/brokers/ids/2") is None, 30, "node 2 deregistered")
        result = admin.delete_topics(["while-away"], timeout_ms=30_000)
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("while-away", 0)]
        assert list((away.data_dir / "logs").glob("while-away-*/*.log"))
        away.start()
        wait_for(lambda: zk.exists("/brokers/ids/2") is not None, 30, "node 2 registered again")
        node2 = KafkaAdminClient(bootstrap_servers=away.bootstrap)
        try:
            assert "while-away" not in node2.list_topics()
        finally:
            node2.close()
        assert zk.exists("/brokers/topics/while-away") is None
        assert any("while-away are not served" in line for line in away.output)
        logs = away.data_dir / "logs"
        assert list(logs.glob("while-away-*.stale/*.log"))  # kept for the operator, out of the way ...
        assert not list(
            logs.glob("while-away-[0-9]")
        )  # ... so a topic re-created under the name starts empty
        admin.create_topics([NewTopic("while-away", 2, 1)])
        _produce(bootstrap, "while-away", {0: [b"again-0"], 1: [b"again-1"]})
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        try:
            consumer.assign([TopicPartition("while-away", 0), TopicPartition("while-away", 1)])
            seen: list[tuple[int, int, bytes]] = []
            deadline = time.monotonic() + 30
            while len(seen) < 2 and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    seen.extend((r.partition, r.offset, r.value) for r in records)
            seen.sort()
        finally:
            consumer.close()
        assert seen == [(0, 0, b"again-0"), (1, 0, b"again-1")]

        # Away during a deletion and a re-creation: the topic is in ZooKeeper again, under a new id, so the
        # node's logs (stored with the old id) are an earlier topic's: set aside, and the new topic starts empty.
        admin.create_topics([NewTopic("reborn", 2, 1)])
        _produce(bootstrap, "reborn", {0: [b"old-0"], 1: [b"old-1"]})
        stored = away.data_dir / "logs" / "reborn-0" / "partition.metadata"
        old_id = registry.read_topic(zk, "reborn").topic_id  # type: ignore[union-attr]
        assert old_id is not None
        wait_for(lambda: stored.exists(), 15, "node 2 stored the topic's id")
        away.stop()
        wait_for(lambda: zk.exists("/brokers/ids/2") is None, 30, "node 2 deregistered")
        result = admin.delete_topics(["reborn"], timeout_ms=30_000)
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("reborn", 0)]
        admin.create_topics([NewTopic("reborn", 2, 1)])
        new_id = registry.read_topic(zk, "reborn").topic_id  # type: ignore[union-attr]
        assert new_id is not None and new_id != old_id
        assert stored.read_text().endswith(f"{kafka_uuid_string(old_id)}\n")
        away.start()
        wanted = kafka_uuid_string(new_id)
        wait_for(lambda: stored.exists() and wanted in stored.read_text(), 30, "node 2 took the new id")
        assert any("their topic id" in line and "reborn" in line for line in away.output)
        assert len(list(logs.glob("reborn-*.stale"))) == 2  # the old topic's partitions, kept aside
        assert not list(logs.glob("reborn-[0-9]/*.log"))  # the new topic's logs start empty here
    finally:
        admin.close()
        zk.stop()
        zk.close()
