"""kill -9 of the node while commits are flowing, then a restart on the same data dir: every acknowledged commit
and every acknowledged record is still there, and a consumer group resumes exactly where it had committed."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient

from e2e.classic_groups import PARTITIONS, Consumed, new_topic, produce
from e2e.conftest import FAST_GROUP_FLAGS, ServerProcess
from zkcoord.testing import wait_for
from zkcoord.testing.members import ConfluentMember

pytestmark = pytest.mark.e2e


@pytest.fixture
def node(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    extra = tuple(getattr(request, "param", ()))
    proc = ServerProcess(tmp_path / "data", (*FAST_GROUP_FLAGS, "--num.partitions=1", *extra))
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill9()


class CommitLoop:
    """Commits growing offsets for every partition (simple-consumer commits, generation -1) as fast as the
    node answers; `acked` holds the last offset each partition's commit was acknowledged with."""

    def __init__(self, node: ServerProcess, group: str, topic: str) -> None:
        self.tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.consumer = KafkaConsumer(
            bootstrap_servers=node.bootstrap, group_id=group, enable_auto_commit=False, retry_backoff_ms=50
        )
        self.consumer.assign(self.tps)
        self.acked: dict[int, int] = {}
        self.attempted = 0
        self.commits = 0
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.halt.is_set():
            n += 1
            self.attempted = n * 10
            offsets = {tp: OffsetAndMetadata(n * 10 + tp.partition, "", -1) for tp in self.tps}
            try:
                self.consumer.commit(offsets)
            except Exception:
                continue  # not acknowledged: the node is down; retry with the next offsets
            for tp, om in offsets.items():
                self.acked[tp.partition] = om.offset
            self.commits += 1


def commits_across_a_kill9(node: ServerProcess, group: str, topic: str) -> tuple[CommitLoop, dict[int, int]]:
    """Simple-consumer commits keep flowing while the node is killed (-9) and restarted on its data dir: the
    loop afterwards, and what had been acknowledged when the kill landed."""
    loop = CommitLoop(node, group, topic)
    loop.thread.start()
    try:
        wait_for(lambda: loop.commits >= 50, 60, "50 acknowledged commits")
        node.kill9()
        acked_at_kill = dict(loop.acked)
        node.start()  # same port, same data dir
        loop.halt.set()
        loop.thread.join(60)
        assert not loop.thread.is_alive()
    finally:
        loop.halt.set()
        loop.consumer.close(autocommit=False)
    return loop, acked_at_kill


def committed(node: ServerProcess, group: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        found = admin.list_group_offsets({group: None}).get(group, {})
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in found.items() if tp.topic == topic}


def read_all(node: ServerProcess, topic: str, expected: int) -> set[tuple[int, int]]:
    consumer = Consumer(
        {"bootstrap.servers": node.bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    seen: set[tuple[int, int]] = set()
    try:
        consumer.assign([CTopicPartition(topic, p, 0) for p in range(PARTITIONS)])

        def more() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                seen.add((partition, offset))
            return len(seen) >= expected

        wait_for(more, 60, f"{expected} records read back", 0)
    finally:
        consumer.close()
    return seen


def test_kill9_restart_keeps_acknowledged_commits_and_records(node: ServerProcess) -> None:
    topic = new_topic(node, "restart")
    produced = produce(node, topic, 0, 3000)

    # a consumer group consumes everything and commits synchronously (acknowledged) before the crash
    member_group = f"members-{uuid.uuid4().hex[:6]}"
    sink = Consumed()
    member = ConfluentMember(node.bootstrap, member_group, topic, sink=sink.add)
    member.start()
    wait_for(lambda: sink.covers(produced), 60, "the group consumed the first 3000 records")
    member.stop()  # commits the final positions (acknowledged), then leaves
    ends = {p: max(o for q, o in produced if q == p) + 1 for p in range(PARTITIONS)}
    assert committed(node, member_group, topic) == ends

    # simple-consumer commits keep flowing while the node is killed
    simple_group = f"simple-{uuid.uuid4().hex[:6]}"
    loop, acked_at_kill = commits_across_a_kill9(node, simple_group, topic)

    after = committed(node, simple_group, topic)
    for p in range(PARTITIONS):
        # every acknowledged commit survived; a commit in flight at the kill may or may not have
        assert loop.acked[p] <= after[p] <= loop.attempted + p, (p, acked_at_kill, loop.acked, after)
        assert after[p] % 10 == p  # it is one of the offsets this partition was committed with
    assert committed(node, member_group, topic) == ends
    assert read_all(node, topic, len(produced)) >= produced

    # the group resumes at its commits: only records produced after the restart are delivered
    more = produce(node, topic, 3000, 600)
    sink2 = Consumed()
    resumed = ConfluentMember(node.bootstrap, member_group, topic, sink=sink2.add)
    resumed.start()
    try:
        wait_for(lambda: sink2.covers(more), 60, "the resumed group consumed the 600 new records")
    finally:
        resumed.stop()
    assert sink2.offsets == more


@pytest.mark.parametrize("node", [("--group.records.fsync", "never")], indirect=True, ids=["fsync-never"])
def test_without_fsync_a_process_crash_still_keeps_acknowledged_commits(node: ServerProcess) -> None:
    """fsync=never leaves the disk to the OS: a machine crash may lose commits, a process crash loses none (each
    batch is written to the file before its answers). The node says at start which policy it runs."""
    assert any("(fsync=never)" in line for line in node.output), list(node.output)[-5:]
    topic = new_topic(node, "nofsync")
    group = f"simple-{uuid.uuid4().hex[:6]}"
    loop, _ = commits_across_a_kill9(node, group, topic)
    after = committed(node, group, topic)
    assert all(loop.acked[p] <= after[p] <= loop.attempted + p for p in range(PARTITIONS)), (
        loop.acked,
        after,
    )
