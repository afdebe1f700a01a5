"""One `zkcoord serve --zk` node killed with -9 and restarted on the same data dir once ZooKeeper has expired its
`/brokers/ids` entry (what the comparison runner's coordinator-kill does), with a producer and a kafka-python group
that live through the outage: every OffsetFetch answered after the restart is the last acknowledged commit, the
group resumes there (no record consumed twice, none lost), and a partition increase written to ZooKeeper after the
restart reaches Metadata, the long-lived producer and the group.

The clients use `reconnect_backoff_max_ms=1000` (the Java clients' default). With kafka-python's own default
(30 s) the client also backs off its *metadata refreshes* exponentially while the only broker is down, and can
go ~30 s after the restart without one: that, not the node, is why the comparison runs sometimes missed a
partition increase after a coordinator restart (docs/cluster.md, "Restarting a node")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic

from migration.compare.partitions import increase_partitions
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.testing.members import KafkaPythonMember
from zkcoord.testing.producers import PacedProducer
from zkcoord.zk import registry

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

TOPIC = "orders"
PARTITIONS = 8
GROWN = 12
GROUP = "restart-grp"
NODE_ID = 1
RATE_PER_S = 100
CLIENT_FLAGS: dict[str, Any] = {"metadata_max_age_ms": 1000, "reconnect_backoff_max_ms": 1000}


@pytest.fixture
def node(zk_connect: str, tmp_path: Path) -> Iterator[NodeProcess]:
    proc = NodeProcess(
        tmp_path / "node",
        ("--zk", zk_connect, "--node-id", str(NODE_ID), "--num.partitions=1",
         "--zookeeper.session.timeout.ms=4000", *FAST_GROUP_FLAGS),
    )  # fmt: skip
    proc.start()
    try:
        yield proc
    finally:
        proc.kill9()


def member_of(bootstrap: str) -> KafkaPythonMember:
    """One kafka-python group member, auto-committing every second; polled only from the test thread (1 s polls:
    kafka-python 3.0.12 can lose a rejoin that outlives a short poll() when the topic grows during the join,
    docs/cluster.md, "The failover benchmark's first-join hang")."""
    return KafkaPythonMember(
        bootstrap,
        GROUP,
        TOPIC,
        heartbeat_interval_ms=500,
        auto_commit_interval_ms=1000,
        config={"request_timeout_ms": 8000, "retry_backoff_ms": 100, **CLIENT_FLAGS},
        poll_timeout_s=1.0,
    )


def _offset_fetch(bootstrap: str) -> dict[int, int] | None:
    """The group's committed offsets by OffsetFetch from outside the group, or None while no answer."""
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    except Exception:
        return None
    try:
        offsets = admin.list_group_offsets(GROUP)[GROUP]
    except Exception:
        return None
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == TOPIC}


def test_restart_keeps_commits_and_serves_partition_increase(node: NodeProcess, zk: Any) -> None:
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    admin.close()
    # Round-robin over the partitions the producer's own metadata shows, RATE_PER_S, through the outage.
    producer = PacedProducer(
        node.bootstrap,
        TOPIC,
        per_second=RATE_PER_S,
        round_robin=True,
        config={"acks": 1, "retries": 10, "request_timeout_ms": 10000, **CLIENT_FLAGS},
    ).start()
    member: KafkaPythonMember | None = None
    try:
        member = member_of(node.bootstrap)

        def consumed_everywhere() -> bool:
            member.poll()
            return {p for p, _o in member.consumed} == set(range(PARTITIONS))

        wait_for(consumed_everywhere, 20, "the member consuming every partition")
        # Stop polling (positions freeze, so any later auto-commit carries the same offsets) and commit them
        # synchronously: the last acknowledged commit before the crash.
        frozen = member.positions()
        member.consumer.commit()
        node.kill9()
        wait_for(lambda: registry.read_broker(zk, NODE_ID) is None, 20, "/brokers/ids/1 expired")
        node.start()

        answers: list[dict[int, int]] = []

        def fetched_three() -> bool:
            c = _offset_fetch(node.bootstrap)
            if c is not None:
                answers.append(c)
            return len(answers) >= 3

        wait_for(fetched_three, 20, "OffsetFetch answers after the restart")
        assert all(a == frozen for a in answers), (frozen, answers, "".join(node.output))

        # A partition increase after the restart: Metadata, the long-lived producer and the group follow.
        increase_partitions(zk, TOPIC, GROWN)
        probe = KafkaConsumer(bootstrap_servers=node.bootstrap, metadata_max_age_ms=500)
        try:
            wait_for(
                lambda: probe.partitions_for_topic(TOPIC) == set(range(GROWN)), 10, "Metadata: 12 partitions"
            )
        finally:
            probe.close()
        wait_for(lambda: producer.known_partitions() == GROWN, 10, "the producer's metadata: 12 partitions")

        def owns_new_partitions() -> bool:
            member.poll()
            return {p for p, _o in member.consumed} >= set(range(PARTITIONS, GROWN))

        wait_for(owns_new_partitions, 20, "the member consuming the new partitions")
        producer.stop()
        acked = producer.acked

        def drained() -> bool:
            member.poll()
            return acked <= set(member.consumed)

        wait_for(drained, 20, "every acknowledged record consumed")
    finally:
        producer.stop()  # already stopped on success; stops its threads on failure
        if member is not None:
            member.consumer.close(autocommit=False)
    # Resumed at the committed offsets: no record delivered twice, including across the restart.
    assert len(member.consumed) == len(set(member.consumed))
    assert {p for p, _o in acked} == set(range(GROWN))
