"""A real Prometheus scrapes a live `zkcoord serve` (with the ZooKeeper offset bridge): after two kafka-python
members form a group, commit, commit again while the bridge's ZooKeeper is down, and one leaves, the scraped
series say so (groups by state, rebalances, commits, mirrored offsets, mirror failures and lag, the bridge's
ZooKeeper session, requests by API and error code, latency histograms)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer

from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.local.zookeeper import ZooKeeper, free_port
from zkcoord.testing.members import KafkaPythonMember
from zkcoord.testing.prometheus import PrometheusServer

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

TOPIC = "metered"


@pytest.fixture
def zookeeper(tmp_path) -> Iterator[ZooKeeper]:
    """The bridge's own ZooKeeper: the test takes it down for a while (the shared server must stay up)."""
    with ZooKeeper.start(1, base_dir=tmp_path / "zk") as server:
        yield server


@pytest.fixture
def node(tmp_path, zookeeper) -> Iterator[tuple[NodeProcess, str]]:
    metrics = f"127.0.0.1:{free_port()}"
    proc = NodeProcess(
        tmp_path / "serve",
        (
            *FAST_GROUP_FLAGS,
            "--num.partitions=2",
            f"--bridge-zk-offsets={zookeeper.hosts}",
            f"--metrics-listen={metrics}",
        ),
    )
    proc.start()
    try:
        yield proc, metrics
    finally:
        proc.stop()
        proc.kill9()


@pytest.fixture
def prometheus(tmp_path, node) -> Iterator[PrometheusServer]:
    server = PrometheusServer.start([node[1]], tmp_path / "prometheus", scrape_interval="500ms")
    try:
        yield server
    finally:
        server.stop()


def member(bootstrap: str, group: str) -> KafkaPythonMember:
    """A kafka-python group member polling in its own thread (poll drives joins and heartbeats); it commits when
    the test sets its `commit_now` (kafka-python is not thread-safe: commit on the polling thread)."""
    return KafkaPythonMember(bootstrap, group, TOPIC, auto_commit_interval_ms=None).start()


def produce(bootstrap: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(count):
        producer.send(TOPIC, f"r{i}".encode(), partition=i % 2)
    producer.flush()
    producer.close()


def test_prometheus_sees_a_group_form_commit_and_lose_a_member(
    node, zookeeper: ZooKeeper, prometheus: PrometheusServer
) -> None:
    proc, _metrics = node
    prom = prometheus
    prom.wait_for('up{job="zkcoord"}', lambda v: v == 1.0)
    assert prom.value('sum(zkcoord_groups{state="Stable"})') == 0
    assert prom.value('zkcoord_bridge_zookeeper_session{state="CONNECTED"}') == 1

    produce(proc.bootstrap, 20)

    group = f"g-{uuid.uuid4().hex[:6]}"
    members = [member(proc.bootstrap, group), member(proc.bootstrap, group)]
    try:
        # The group forms: one Stable group, a completed rebalance, JoinGroup and SyncGroup without error.
        for api in (
            "JoinGroup",
            "SyncGroup",
        ):  # both members (with no initial delay the first may form it alone)
            prom.wait_for(f'zkcoord_group_responses_total{{api="{api}",error="0"}}', lambda v: (v or 0) >= 2)
        prom.wait_for('sum(zkcoord_groups{state="Stable"})', lambda v: v == 1)
        rebalances = prom.wait_for("zkcoord_group_rebalances_total", lambda v: v is not None and v >= 1)
        assert rebalances is not None
        assert (prom.value('sum(zkcoord_requests_total{api="Produce"})') or 0) >= 1
        assert (prom.value('sum(zkcoord_request_duration_seconds_count{api="Fetch"})') or 0) >= 1
        assert prom.value("zkcoord_offset_commits_total") == 0

        # A commit: counted per partition, and mirrored to ZooKeeper by the bridge (no lag left behind).
        members[0].commit_now.set()
        assert members[0].committed.wait(30)
        prom.wait_for("zkcoord_offset_commits_total", lambda v: v is not None and v >= 1)
        prom.wait_for("zkcoord_bridge_mirrored_partitions_total", lambda v: v is not None and v >= 1)
        prom.wait_for("zkcoord_bridge_mirror_lag_partitions", lambda v: v == 0)
        assert prom.value("zkcoord_bridge_mirror_failures_total") == 0

        # The bridge's ZooKeeper goes away: a commit is still acknowledged, its mirror fails and waits (lag),
        # and the session gauge leaves CONNECTED; once ZooKeeper is back the mirror catches up.
        zookeeper.kill_node(0)
        prom.wait_for('zkcoord_bridge_zookeeper_session{state="CONNECTED"}', lambda v: v == 0)
        produce(proc.bootstrap, 10)
        members[0].committed.clear()
        members[0].commit_now.set()
        assert members[0].committed.wait(30)
        prom.wait_for("zkcoord_bridge_mirror_failures_total", lambda v: v is not None and v >= 1)
        prom.wait_for("zkcoord_bridge_mirror_lag_partitions", lambda v: v is not None and v >= 1)
        zookeeper.restart_node(0)
        prom.wait_for('zkcoord_bridge_zookeeper_session{state="CONNECTED"}', lambda v: v == 1)
        prom.wait_for("zkcoord_bridge_mirror_lag_partitions", lambda v: v == 0)

        # A member leaves: LeaveGroup answered, the group rebalances once more and is Stable with one member.
        members.pop().stop()  # sends LeaveGroup
        prom.wait_for('zkcoord_group_responses_total{api="LeaveGroup",error="0"}', lambda v: v == 1)
        prom.wait_for("zkcoord_group_rebalances_total", lambda v: v is not None and v > rebalances)
        prom.wait_for('sum(zkcoord_groups{state="Stable"})', lambda v: v == 1)
    finally:
        for m in members:
            m.stop()
    # After the last member leaves, the group is Empty.
    prom.wait_for('sum(zkcoord_groups{state="Empty"})', lambda v: v == 1)
