"""The consumer rebalance protocol (KIP-848) with real confluent-kafka members (`group.protocol=consumer`), each in
its own process, against one `zkcoord serve --zk` node under a paced producer: three members join one by one, one
leaves, one joins, one is killed with SIGKILL, the topic grows from 3 to 6 partitions (ZooKeeper-era
`kafka-topics --alter`). Every member reports its assignment callbacks with a machine-wide monotonic clock; the
observer replays them in time order and requires that no partition is ever held by two live members, and that every
acknowledged record is consumed (0 lost). librdkafka's admin client describes and lists the group as a consumer
group on the way."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.member_lines import MemberProcess, Observer
from migration.compare.partitions import increase_partitions
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.testing.producers import PacedProducer
from zkcoord.zk.session import connect, ensure_chroot

pytestmark = pytest.mark.e2e

SESSION_MS = 3000
MEMBER = Path(__file__).with_name("consumer_protocol_member_proc.py")


@dataclass
class Node:
    zk_connect: str
    proc: NodeProcess


@pytest.fixture(scope="module")
def node(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    connect_string = ensure_chroot(zk_server.hosts, f"/zkcoord-tests/kip848-{uuid.uuid4().hex[:8]}")
    flags = ("--zk", connect_string, "--node-id", "1", "--num.partitions=3", *FAST_GROUP_FLAGS,
             f"--group.consumer.session.timeout.ms={SESSION_MS}", "--group.consumer.heartbeat.interval.ms=250")  # fmt: skip
    proc = NodeProcess(tmp_path_factory.mktemp("kip848-node"), flags)
    proc.start()
    try:
        yield Node(connect_string, proc)
    finally:
        proc.stop()


def test_joins_leave_crash_and_partition_increase_lose_nothing_and_never_double_assign(node: Node) -> None:
    tag = uuid.uuid4().hex[:6]
    topic, group = f"kip848-{tag}", f"kip848-{tag}"
    observer = Observer()
    admin = AdminClient({"bootstrap.servers": node.proc.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(20)
    # ~200 records/s round the partitions the producer's metadata shows (refreshed every second, so the new
    # partitions get records after the increase); remembers what was acknowledged.
    producer = PacedProducer(
        node.proc.bootstrap,
        topic,
        per_second=200,
        round_robin=True,
        config={"acks": "all", "metadata_max_age_ms": 1000},
    ).start()
    members: dict[str, MemberProcess] = {}

    try:
        _scenario(node, group, topic, admin, observer, producer, members)
        assert producer.failed == []
        wait_for(lambda: producer.acked <= observer.consumed, 30, "every acknowledged record consumed")
        observer.holders()  # once more over every event, after the last
        assert len(producer.acked) > 500
    finally:
        producer.stop()
        for m in members.values():
            m.leave()


def _scenario(
    node: Node,
    group: str,
    topic: str,
    admin: AdminClient,
    observer: Observer,
    producer: PacedProducer,
    members: dict[str, MemberProcess],
) -> None:
    """Joins, a leave, a join, a kill -9 and a partition increase, each waited for until the live members hold
    every partition (each at least one); then records produced into every new partition."""

    def settled(names: set[str], partitions: int) -> bool:
        held = observer.holders()
        live = {m: held.get(m, set()) for m in names}
        return set().union(*live.values()) == set(range(partitions)) and all(live.values())

    def settle(names: set[str], partitions: int, what: str) -> None:
        wait_for(lambda: settled(names, partitions), 30, what)

    wait_for(lambda: len(producer.acked) > 20, 20, "the producer's first acknowledgements")
    for name in ("m1", "m2", "m3"):
        members[name] = MemberProcess(str(MEMBER), [node.proc.bootstrap, group, topic, name], name, observer)
        settle(set(members), 3, f"{name} joined and the group reconciled")
    members.pop("m2").leave()
    settle({"m1", "m3"}, 3, "m2 left")
    members["m4"] = MemberProcess(str(MEMBER), [node.proc.bootstrap, group, topic, "m4"], "m4", observer)
    settle({"m1", "m3", "m4"}, 3, "m4 joined")
    # librdkafka's admin client describes a consumer group with ConsumerGroupDescribe (69) and lists its type.
    described = admin.describe_consumer_groups([group])[group].result(20)
    assert described.type == ConsumerGroupType.CONSUMER and described.partition_assignor == "uniform"
    assert sorted(m.client_id for m in described.members) == ["m1", "m3", "m4"]
    listed = admin.list_consumer_groups().result(20).valid
    assert [(g.group_id, g.type) for g in listed if g.group_id == group] == [
        (group, ConsumerGroupType.CONSUMER)
    ]
    members.pop("m3").kill9()
    settle({"m1", "m4"}, 3, "m3's partitions moved after its session expired")
    client = connect(node.zk_connect)
    try:
        increase_partitions(client, topic, 6)
    finally:
        client.stop()
        client.close()
    settle({"m1", "m4"}, 6, "the six partitions assigned")
    wait_for(lambda: {p for p, _ in producer.acked} >= set(range(6)), 20, "records in the new partitions")
    producer.stop()
