"""Helpers of the classic-group e2e tests (test_groups_clients, test_groups_mixed, test_groups_restart): a topic of
PARTITIONS partitions, N records produced and acknowledged, what a group's members received, and a wait for a Stable
group whose members own every partition once."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic

from e2e.conftest import ServerProcess
from zkcoord.testing import wait_for
from zkcoord.zk.session import SessionFault

PARTITIONS = 6

Offsets = set[tuple[int, int]]


def new_topic(server: ServerProcess, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()
    return topic


def produce(server: ServerProcess, topic: str, start: int, count: int) -> Offsets:
    """Produce `count` records round-robin over the partitions; returns every acknowledged (partition, offset)."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    acked: Offsets = set()
    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.add((msg.partition(), msg.offset()))

    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, value=b"r%d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failed, failed[:3]
    assert len(acked) == count
    return acked


class Consumed:
    """What a group's members received, shared by their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.offsets: Offsets = set()
        self.deliveries = 0

    def add(self, partition: int, offset: int) -> None:
        with self.lock:
            self.offsets.add((partition, offset))
            self.deliveries += 1

    def covers(self, wanted: Offsets) -> bool:
        with self.lock:
            return wanted <= self.offsets


def wait_stable(
    admin: KafkaAdminClient,
    group: str,
    members: int,
    timeout: float = 60,
    server: ServerProcess | None = None,
) -> dict[str, Any]:
    """Wait until the group is Stable with `members` members that between them own every partition once; on
    timeout, fail with the group's last description and the coordinator's log of the group (from `server`)."""
    found: dict[str, Any] = {}

    def ready() -> bool:
        nonlocal found
        found = dict(admin.describe_groups([group])[group])
        if found["group_state"] != "Stable" or len(found["members"]) != members:
            return False
        owned = assigned_partitions(found)
        return sorted(p for ps in owned.values() for p in ps) == list(range(PARTITIONS))

    try:
        wait_for(ready, timeout, f"group {group} Stable with {members} members covering all partitions", 0.1)
    except SessionFault as exc:
        told = "".join(line for line in list(server.output) if group in line) if server is not None else ""
        raise AssertionError(f"{exc}\nlast description: {found}\ncoordinator log:\n{told}") from exc
    return found


def assigned_partitions(group: dict[str, Any]) -> dict[str, list[int]]:
    """member id -> partitions of its assignment (DescribeGroups, decoded by kafka-python's admin client)."""
    out: dict[str, list[int]] = {}
    for m in group["members"]:
        parts = (m.get("member_assignment") or {}).get("assigned_partitions") or []
        out[m["member_id"]] = sorted(p for t in parts for p in t["partitions"])
    return out
