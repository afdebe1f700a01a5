"""The legacy member's dual commit honours offsets.commit.max.retries and offsets.channel.backoff.ms, as the 0.8.2
consumer's commitOffsets(): a broker that is down for the first attempt (a real refused connection) is retried
after the back-off, and the retry writes the broker and then ZooKeeper, instead of leaving ZooKeeper skipped.
Real ZooKeeper, a real `zkcoord serve` node started during the back-off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition

from zkcoord.bridge.member import BridgedOffsets, member_offsets
from zkcoord.bridge.policy import BridgeConfig, CommitOrder, OffsetsStorage
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.rebalance import TopicPartition as LegacyTP
from zkcoord.local.node import NodeProcess
from zkcoord.local.zookeeper import free_port

pytestmark = pytest.mark.integration

GROUP = "retrying-members"


@pytest.fixture
def broker_later(tmp_path: Path) -> Iterator[NodeProcess]:
    node = NodeProcess(tmp_path / "node", port=free_port())
    try:
        yield node
    finally:
        node.kill9()


def _config(zk_connect: str, node: NodeProcess, retries: int) -> LegacyConsumerConfig:
    return LegacyConsumerConfig(
        group_id=GROUP,
        zookeeper_connect=zk_connect,
        offsets_storage="kafka",
        dual_commit_enabled=True,
        commit_order="broker-first",
        bootstrap_servers=node.bootstrap,
        socket_timeout_ms=2000,
        offsets_commit_max_retries=retries,
        offsets_channel_backoff_ms=300,
    )


def test_a_broker_error_is_retried_and_zookeeper_is_not_skipped(
    zk: Any, zk_connect: str, broker_later: NodeProcess
) -> None:
    slept: list[float] = []

    def backoff(seconds: float) -> None:
        slept.append(seconds)
        if not broker_later.running:  # the broker comes up during the first back-off
            broker_later.start()
            producer = KafkaProducer(bootstrap_servers=broker_later.bootstrap)
            try:
                producer.send("t", b"x", partition=0).get(30)  # the topic exists before the retry
            finally:
                producer.close()

    config = _config(zk_connect, broker_later, retries=3)
    bridge = BridgeConfig(OffsetsStorage.KAFKA, True, CommitOrder.BROKER_FIRST)
    offsets = BridgedOffsets(config, zk, GROUP, bridge, batched=True, sleep=backoff)  # the stores stay real
    tp = LegacyTP("t", 0)
    outcome = offsets.commit({tp: 42}, {}, {}, lambda: None, retries=3)
    offsets.close()

    assert slept == [0.3]  # one retry, after offsets.channel.backoff.ms
    assert outcome.count == 1
    assert outcome.result is not None and not outcome.result.failures and not outcome.result.skipped
    assert zk.get(f"/consumers/{GROUP}/offsets/t/0")[0] == b"42"  # ZooKeeper written after the broker
    admin = KafkaAdminClient(bootstrap_servers=broker_later.bootstrap)
    try:
        assert admin.list_group_offsets(GROUP)[GROUP][TopicPartition("t", 0)].offset == 42
    finally:
        admin.close()


def test_without_retries_the_failed_broker_write_gates_zookeeper(
    zk: Any, zk_connect: str, broker_later: NodeProcess
) -> None:
    """An auto-commit (no retries, as the original) with the broker down: the broker-first order leaves
    ZooKeeper unwritten and says so; the next commit carries the offsets."""
    offsets = member_offsets(_config(zk_connect, broker_later, retries=3), zk, GROUP, True)
    outcome = offsets.commit({LegacyTP("t", 0): 7}, {}, {}, lambda: None)
    offsets.close()
    assert outcome.count == 0
    assert outcome.result is not None and outcome.result.skipped  # ZooKeeper: not written, reported
    assert zk.exists(f"/consumers/{GROUP}/offsets/t/0") is None
