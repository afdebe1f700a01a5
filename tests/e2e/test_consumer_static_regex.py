"""Static membership and regex subscriptions of the consumer rebalance protocol (KIP-848) with real confluent-kafka
members (`group.protocol=consumer`) against one `zkcoord serve --zk` node.

Static: two members with `group.instance.id`, each in its own process; one is restarted (closed: librdkafka's
temporary leave, member epoch -2; a new process with the same instance id joins under a new member id) within its
session timeout. Its partitions never go to the other member, the new process gets exactly them, and
ConsumerGroupDescribe shows the instance ids and the same group epoch (no rebalance). Regex: a member subscribed to `^<prefix>-.*` picks up a topic created
while it runs, and not a topic that does not match."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.consumer_wire import Wire
from e2e.member_lines import MemberProcess, Observer
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.zk.session import ensure_chroot

pytestmark = pytest.mark.e2e

SESSION_MS = 8000  # a restarted process (python + librdkafka start, then its join) comes back well within it
MEMBER = Path(__file__).with_name("consumer_protocol_member_proc.py")


@pytest.fixture(scope="module")
def node(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    connect_string = ensure_chroot(zk_server.hosts, f"/zkcoord-tests/kip848-static-{uuid.uuid4().hex[:8]}")
    flags = ("--zk", connect_string, "--node-id", "1", "--num.partitions=1", *FAST_GROUP_FLAGS,
             f"--group.consumer.session.timeout.ms={SESSION_MS}", "--group.consumer.heartbeat.interval.ms=250",
             "--group.consumer.regex.refresh.interval.ms=500")  # fmt: skip
    proc = NodeProcess(tmp_path_factory.mktemp("kip848-static-node"), flags)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def test_a_static_member_restarted_within_its_session_keeps_its_partitions(node: NodeProcess) -> None:
    tag = uuid.uuid4().hex[:6]
    topic, group = f"static-{tag}", f"static-{tag}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(20)
    obs = Observer()
    wire: Wire | None = None
    members = {
        "a1": MemberProcess(str(MEMBER), [node.bootstrap, group, topic, "a1", "inst-a"], "a1", obs),
        "b": MemberProcess(str(MEMBER), [node.bootstrap, group, topic, "b", "inst-b"], "b", obs),
    }
    try:

        def split() -> bool:
            held = obs.holders()
            a, b = held.get("a1", set()), held.get("b", set())
            return bool(a) and bool(b) and a | b == set(range(4))

        wait_for(split, 30, "a1 and b share the four partitions")
        before = obs.holders()
        a_parts, b_parts = before["a1"], before["b"]
        wire = Wire(
            node.port
        )  # raw ConsumerGroupDescribe: the group epoch, which the admin client does not show
        epoch = wire.describe(group).group_epoch
        b_events = sum(1 for e in obs.events if e[1] == "b")
        described = admin.describe_consumer_groups([group])[group].result(20)
        assert sorted((m.client_id, m.group_instance_id) for m in described.members) == [
            ("a1", "inst-a"),
            ("b", "inst-b"),
        ]
        started = time.monotonic()
        members.pop("a1").leave()  # a temporary leave (epoch -2): a1's partitions stay with its instance id
        members["a2"] = MemberProcess(str(MEMBER), [node.bootstrap, group, topic, "a2", "inst-a"], "a2", obs)
        wait_for(lambda: obs.holders().get("a2") == a_parts, 30, "the restarted a2 gets a1's partitions back")
        assert time.monotonic() - started < SESSION_MS / 1000, "the restart did not fit in the session"
        # b saw nothing: no revocation, no new partition, while a1 was away and after a2 came back.
        assert obs.holders()["b"] == b_parts
        assert sum(1 for e in obs.events if e[1] == "b") == b_events
        described = admin.describe_consumer_groups([group])[group].result(20)
        assert sorted((m.client_id, m.group_instance_id) for m in described.members) == [
            ("a2", "inst-a"),
            ("b", "inst-b"),
        ]
        assert wire.describe(group).group_epoch == epoch, "the restart within the session caused a rebalance"
    finally:
        if wire is not None:
            wire.close()
        for m in members.values():
            m.leave()


def test_a_regex_subscription_picks_up_a_topic_created_while_it_runs(node: NodeProcess) -> None:
    tag = uuid.uuid4().hex[:6]
    prefix, group = f"rx{tag}", f"regex-{tag}"
    first, later, other = f"{prefix}-first", f"{prefix}-later", f"not{prefix}-other"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(first, 2, 1)])[first].result(20)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    consumer = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 500,
            "fetch.wait.max.ms": 100,
        }
    )
    seen: set[tuple[str, bytes]] = set()

    def consumed(want: set[tuple[str, bytes]], what: str) -> None:
        deadline = time.monotonic() + 30
        while not want <= seen:
            assert time.monotonic() < deadline, f"timed out waiting for {what}: missing {sorted(want - seen)}"
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.add((msg.topic(), msg.value()))

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        producer.produce(first, b"1")
        producer.flush(10)
        consumed({(first, b"1")}, "the record in the topic the regex matched at first")
        for t in (later, other):
            admin.create_topics([NewTopic(t, 1, 1)])[t].result(20)
        producer.produce(later, b"2")
        producer.produce(other, b"3")
        producer.flush(10)
        consumed({(later, b"2")}, "the record in the topic created while the member ran")
        described = admin.describe_consumer_groups([group])[group].result(20)
        (member,) = described.members
        topics = {tp.topic for tp in member.assignment.topic_partitions}
        assert topics == {first, later}
        assert all(t != other for t, _ in seen)
    finally:
        consumer.close()
