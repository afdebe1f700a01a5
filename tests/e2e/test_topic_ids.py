"""Stored topic ids (KIP-516) on one `zkcoord serve --zk` node over a real ZooKeeper, seen by real clients: a topic
created, deleted and created again gets a new id in `/brokers/topics/T` (Kafka 2.8's version 3), in Metadata v12
(raw frames, and librdkafka's describe_topics) and the old id is UNKNOWN_TOPIC_ID; a topic znode written the 0.8
way (no id) is given one once by the controller, kept across a node restart; a confluent-kafka consumer with
`group.protocol=consumer` keeps consuming across a deletion and re-creation of its topic."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kafka.admin import KafkaAdminClient
from kafka.protocol.metadata import MetadataRequest as KMetadata
from kazoo.client import KazooClient

from e2e.wire_calls import read_exactly
from zkcoord.errors import ErrorCode as E
from zkcoord.group.consumer_messages import ConsumerGroupDescribeRequest as Describe
from zkcoord.legacy.codecs import TopicAssignment, kafka_uuid_string
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.server import kafka_protocol as kp
from zkcoord.testing import wait_for
from zkcoord.zk import registry
from zkcoord.zk.session import connect, ensure_chroot

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


@dataclass
class Node:
    proc: NodeProcess
    zk: KazooClient
    admin: AdminClient


@pytest.fixture(scope="module")
def node(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    connect_string = ensure_chroot(zk_server.hosts, f"/zkcoord-tests/topic-ids-{uuid.uuid4().hex[:8]}")
    # No auto-creation: librdkafka's admin and producer handles ask for the deleted topic's metadata right after
    # the deletion and would create it again (2 partitions, from --num.partitions) before the test does.
    flags = ("--zk", connect_string, "--node-id", "1", "--num.partitions=2", "--auto.create.topics.enable=false",
             *FAST_GROUP_FLAGS,
             "--group.consumer.session.timeout.ms=6000", "--group.consumer.heartbeat.interval.ms=250")  # fmt: skip
    proc = NodeProcess(tmp_path_factory.mktemp("topic-ids-node"), flags)
    zk = connect(connect_string)
    proc.start()
    try:
        yield Node(proc, zk, AdminClient({"bootstrap.servers": proc.bootstrap}))
    finally:
        proc.stop()
        zk.stop()
        zk.close()


def znode(zk: KazooClient, topic: str) -> TopicAssignment | None:
    return registry.read_topic(zk, topic)


def stored_id(zk: KazooClient, topic: str) -> uuid.UUID | None:
    found = znode(zk, topic)
    return None if found is None else found.topic_id


def metadata_v12(port: int, *, names: tuple[str, ...] = (), ids: tuple[uuid.UUID, ...] = ()) -> list[Any]:
    """Metadata v12 topics asked by name and by id, as raw frames."""
    topics = [KMetadata.MetadataRequestTopic(topic_id=None, name=n) for n in names]
    topics += [KMetadata.MetadataRequestTopic(topic_id=i, name=None) for i in ids]
    frame = kp.encode_request(kp.METADATA, 12, 9, "ids-test", topics=topics, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)  # fmt: skip
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame)
        head = read_exactly(sock, 4)
        body = read_exactly(sock, struct.unpack(">i", head)[0])
    return list(kp.decode_response(kp.METADATA, 12, body)[1].topics)


def described_assignment(port: int, group: str) -> list[tuple[str, str, tuple[int, ...]]]:
    """(topic id hex, name, partitions) of every member's assignment, from a raw ConsumerGroupDescribe."""
    frame = kp.encode_consumer_group_request(11, "ids-test", Describe(0, (group,)))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame)
        body = read_exactly(sock, struct.unpack(">i", read_exactly(sock, 4))[0])
    (described,) = kp.decode_consumer_group_response(69, 0, body)[1].groups
    return sorted((t.topic_id, t.topic_name, t.partitions) for m in described.members for t in m.assignment)


def librdkafka_id(admin: AdminClient, topic: str) -> uuid.UUID:
    """The topic id librdkafka's admin client reads from Metadata (its Uuid's two halves: librdkafka prints ids in
    standard base64, where Kafka's Uuid.toString is URL-safe)."""
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(15)
    msb = described.topic_id.get_most_significant_bits() % 2**64
    lsb = described.topic_id.get_least_significant_bits() % 2**64
    return uuid.UUID(int=msb << 64 | lsb)


def create(node: Node, topic: str, partitions: int) -> uuid.UUID:
    node.admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    topic_id = stored_id(node.zk, topic)
    assert topic_id is not None  # written with the topic, not later
    wait_for(lambda: [t.topic_id for t in metadata_v12(node.proc.port, names=(topic,))] == [topic_id], 15,
             f"{topic} served with its stored id")  # fmt: skip
    return topic_id


def delete(node: Node, topic: str) -> None:
    try:
        node.admin.delete_topics([topic], operation_timeout=30)[topic].result(40)
    except (
        Exception
    ) as exc:  # with what the node said meanwhile (its controller's and its own deletion steps)
        told = "".join(line for line in list(node.proc.output) if "topic" in line)[-6000:]
        found = node.zk.exists(f"/brokers/topics/{topic}")
        znode_now = (
            "absent"
            if found is None
            else f"czxid {found.czxid}, ctime {found.ctime}, "
            + repr(node.zk.get(f"/brokers/topics/{topic}")[0])
        )
        raise AssertionError(f"deleting {topic}: {exc!r}; znode now: {znode_now}; node log:\n{told}") from exc
    wait_for(lambda: node.zk.exists(f"/brokers/topics/{topic}") is None, 30, f"{topic} deleted")
    wait_for(lambda: metadata_v12(node.proc.port, names=(topic,))[0].error_code != 0, 15, f"{topic} gone")


def test_ids_are_stored_new_after_re_creation_and_given_once_to_old_znodes(node: Node) -> None:
    port = node.proc.port
    first = create(node, "recycled", 2)
    assert znode(node.zk, "recycled") == TopicAssignment.of({0: [1], 1: [1]}, topic_id=first)  # version 3
    assert librdkafka_id(node.admin, "recycled") == first
    partition_file = node.proc.data_dir / "logs" / "recycled-0" / "partition.metadata"
    wait_for(partition_file.exists, 15, "the node stored the id beside the logs")
    assert partition_file.read_text() == f"version: 0\ntopic_id: {kafka_uuid_string(first)}\n"

    delete(node, "recycled")
    second = create(node, "recycled", 2)
    assert second != first
    assert librdkafka_id(node.admin, "recycled") == second
    kafka_python = KafkaAdminClient(bootstrap_servers=node.proc.bootstrap, request_timeout_ms=10_000)
    try:  # kafka-python's admin: Metadata v12 by name and by id (KIP-516)
        described = kafka_python.describe_topics(["recycled", first])
    finally:
        kafka_python.close()
    assert [(t["error_code"], t["name"], t["topic_id"]) for t in described] == [
        (0, "recycled", str(second)),
        (E.UNKNOWN_TOPIC_ID, "", str(first)),
    ]
    by_id = metadata_v12(port, ids=(first, second))
    assert [(t.error_code, t.name, t.topic_id) for t in by_id] == [
        (E.UNKNOWN_TOPIC_ID, "", first),
        (0, "recycled", second),
    ]

    # A topic znode as a 0.8-era tool writes it (no id): zkcoord's controller gives it one, once, in place.
    registry.write_topic(node.zk, "legacy", {0: [1], 1: [1]})
    wait_for(lambda: stored_id(node.zk, "legacy") is not None, 15, "the controller assigned an id")
    given = stored_id(node.zk, "legacy")
    assert given is not None
    assert znode(node.zk, "legacy") == TopicAssignment.of({0: [1], 1: [1]}, topic_id=given)
    _data, stat = node.zk.get("/brokers/topics/legacy")
    assert stat.version == 1  # written once by the tool, once by the controller
    wait_for(lambda: [t.topic_id for t in metadata_v12(port, names=("legacy",))] == [given], 15, "served")

    node.proc.stop()
    node.proc.start()
    assert stored_id(node.zk, "legacy") == given and node.zk.get("/brokers/topics/legacy")[1].version == 1
    wait_for(lambda: [t.topic_id for t in metadata_v12(port, names=("legacy", "recycled"))] == [given, second],
             15, "the same ids after a restart")  # fmt: skip


class Reader:
    """A confluent-kafka consumer with `group.protocol=consumer` polling in its own thread, as an application's
    loop does (revocations run inside poll); the values it read, waited on with a deadline."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        # No auto-commit: librdkafka commits revoked partitions by name (OffsetCommit v9), which would store the
        # deleted topic's positions for the topic created after it (see docs/wire-server.md, topic ids).
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
        })  # fmt: skip
        self.consumer.subscribe([topic])
        self.got: set[bytes] = set()
        self.commit_asked = threading.Event()
        self.committed = threading.Event()
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kip848-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.1)
            if self.commit_asked.is_set() and not self.committed.is_set():
                self.consumer.commit(asynchronous=False)
                self.committed.set()
            value = None if msg is None or msg.error() else msg.value()
            if value is None:
                continue
            with self._changed:
                self.got.add(value)
                self._changed.notify_all()

    def wait_for(self, expected: set[bytes], timeout_s: float = 45.0) -> None:
        with self._changed:
            self._changed.wait_for(lambda: expected <= self.got, timeout_s)
            assert expected <= self.got, f"missing {sorted(expected - self.got)}"

    def commit(self) -> None:
        self.commit_asked.set()
        assert self.committed.wait(15), "the reader did not commit"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self.consumer.close()


def test_a_consumer_protocol_member_keeps_consuming_across_re_creation(node: Node) -> None:
    topic = "reborn"
    create(node, topic, 2)
    producer = Producer({"bootstrap.servers": node.proc.bootstrap, "linger.ms": 0})

    def produce(prefix: str) -> set[bytes]:
        """6 records, 3 per partition, so the old topic's positions are the new topic's end."""
        values = {f"{prefix}-{i}".encode() for i in range(6)}
        for v in sorted(values):
            producer.produce(topic, v, partition=int(v[-1:]) % 2)
        assert producer.flush(15) == 0
        return values

    reader = Reader(node.proc.bootstrap, "reborn-readers", topic)
    try:
        reader.wait_for(produce("old"))
        first = stored_id(node.zk, topic)
        assert first is not None and described_assignment(node.proc.port, "reborn-readers") == [
            (first.hex, topic, (0, 1))
        ]
        reader.commit()  # offsets 3 and 3: the deletion removes them with the topic
        delete(node, topic)
        second = create(node, topic, 2)
        # The re-created topic is a new one: the member is assigned it under its new id and reads it from the
        # start, not from the old topic's positions.
        reader.wait_for(produce("new"))
        assert described_assignment(node.proc.port, "reborn-readers") == [(second.hex, topic, (0, 1))]
    finally:
        reader.close()
        producer.flush(5)


def test_a_deletion_completes_although_the_name_is_created_again_at_once(node: Node) -> None:
    """DeleteTopics waits for the topic it deletes, not for the name: a topic created again under the name the
    moment the old one's znode goes (a producer auto-creating it, or another admin) is another topic, so the
    deletion answers NONE instead of REQUEST_TIMED_OUT after its whole timeout (it did, before)."""
    topic = "phoenix"
    first = create(node, topic, 2)
    gone, recreated = threading.Event(), threading.Event()

    # the moment the deletion removes the topic's znode (a ZooKeeper watch), another client creates it again
    def on_change(data: bytes | None, stat: Any) -> bool:
        if stat is None:
            gone.set()
        return stat is not None  # watch on until the znode is gone

    node.zk.DataWatch(f"/brokers/topics/{topic}", on_change)

    def recreate_when_gone() -> None:
        assert gone.wait(30), "the topic's znode was never deleted"
        node.admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
        recreated.set()

    helper = threading.Thread(target=recreate_when_gone, daemon=True)
    helper.start()
    began = time.monotonic()
    assert node.admin.delete_topics([topic], operation_timeout=20)[topic].result(30) is None
    took = time.monotonic() - began
    helper.join(20)
    assert recreated.is_set()
    assert stored_id(node.zk, topic) not in (None, first)  # the name holds a new topic
    assert took < 15, f"the deletion answered after {took:.1f} s"
