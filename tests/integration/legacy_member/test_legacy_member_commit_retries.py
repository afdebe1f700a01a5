"""A legacy member's explicit commit_offsets() honours offsets.commit.max.retries / offsets.channel.backoff.ms
end to end: a member with dual commit (broker first) whose broker, a real `zkcoord serve` node, is stopped when it
commits gets the commit through after the back-off, in both stores. Real ZooKeeper; the data path is the
directory's FakeFetcher (what is read does not matter here, only what is committed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition

from zkcoord.bridge.member import BridgedOffsets
from zkcoord.bridge.policy import BridgeConfig, CommitOrder, OffsetsStorage
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.local.node import NodeProcess
from zkcoord.local.zookeeper import free_port
from zkcoord.testing import wait_for
from zkcoord.zk.member import LegacyConsumer

pytestmark = pytest.mark.integration

GROUP = "explicit-committers"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[NodeProcess]:
    node = NodeProcess(tmp_path / "node", port=free_port())
    try:
        yield node
    finally:
        node.kill9()


def test_explicit_commit_is_retried_after_the_backoff_and_reaches_both_stores(
    zk: Any, zk_connect: str, broker: NodeProcess, kit: Any
) -> None:
    kit.make_topic(zk, "t", 1)
    kit.register_broker(zk, 0, broker.port)  # the member waits for a registered broker before it claims
    broker.start()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        producer.send("t", b"x", partition=0).get(30)  # the broker knows the topic the member commits
    finally:
        producer.close()
    slept: list[float] = []

    def backoff(seconds: float) -> None:
        slept.append(seconds)
        if not broker.running:
            broker.start()  # the broker is back for the retry

    def offsets(config: LegacyConsumerConfig, client: Any, group: str, batched: bool) -> BridgedOffsets:
        bridge = BridgeConfig(OffsetsStorage.KAFKA, True, CommitOrder.BROKER_FIRST)
        return BridgedOffsets(config, client, group, bridge, batched=batched, sleep=backoff)

    config = LegacyConsumerConfig(
        group_id=GROUP,
        zookeeper_connect=zk_connect,
        auto_commit_enable=False,
        offsets_storage="kafka",
        dual_commit_enabled=True,
        bootstrap_servers=broker.bootstrap,
        socket_timeout_ms=2000,
        offsets_commit_max_retries=3,
        offsets_channel_backoff_ms=200,
        rebalance_backoff_ms=50,
    )
    member = LegacyConsumer(config, {"t": 1}, fetcher_factory=kit.FakeFetcher, offsets=offsets)
    member.start()
    try:
        wait_for(lambda: len(member.owned()) == 1, 30, "the member owns t-0")
        message = member.next_message(10)
        assert message is not None and message.offset == 0
        broker.stop()  # down when the member commits
        assert member.commit_offsets() == 1
        assert slept == [0.2]  # one retry, offsets.channel.backoff.ms later
        assert zk.get(f"/consumers/{GROUP}/offsets/t/0")[0] == b"1"
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            assert admin.list_group_offsets(GROUP)[GROUP][TopicPartition("t", 0)].offset == 1
        finally:
            admin.close()
    finally:
        member.close(commit=False)
