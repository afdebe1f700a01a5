"""auto.offset.reset with no stored offset, on real ZooKeeper and a real `zkcoord serve --zk` broker: the reset
position becomes the member's consume position and is committed before the partition is released, so a new
owner starts where the old one reset, not at a newer log end (records produced in between are not skipped)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from zkcoord.legacy import paths
from zkcoord.legacy.codecs import decode_offset
from zkcoord.legacy.rebalance import TopicPartition
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for

pytestmark = pytest.mark.integration

TOPIC = "reset"


@pytest.fixture
def node(zk_connect: str, tmp_path: Path) -> Iterator[NodeProcess]:
    proc = NodeProcess(
        tmp_path / "node", ("--zk", zk_connect, "--node-id", "1", "--num.partitions=2", *FAST_GROUP_FLAGS)
    )
    with proc:
        yield proc
    proc.kill9()


@pytest.fixture
def produce(node: NodeProcess) -> Iterator[Any]:
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=0)

    def send(partition: int, *values: bytes) -> list[int]:
        futures = [producer.send(TOPIC, value=v, partition=partition) for v in values]
        producer.flush(30)
        return [f.get(10).offset for f in futures]

    yield send
    producer.close(5)


def stored_offset(zk: Any, group: str, partition: int) -> int | None:
    path = paths.offset_path(group, TOPIC, partition)
    return decode_offset(path, zk.get(path)[0]) if zk.exists(path) else None


def drain(member: Any, want: int) -> list[Any]:
    """Records handed out until `want` arrived or 10 s pass without one."""
    got: list[Any] = []
    while len(got) < want:
        msg = member.next_message(10.0)
        if msg is None:
            break
        got.append(msg)
    return got


def start_owner_of_everything(zk: Any, member_factory: Any, produce: Any) -> Any:
    """Member a (largest, auto-commit on but its timer far away) owning both partitions of a topic with an
    old backlog; its data path has looked at the partitions once and found nothing new."""
    assert produce(0, b"old0", b"old1") == [0, 1]
    assert produce(1, b"old2") == [0]
    wait_for(lambda: zk.exists(paths.topic_path(TOPIC)) is not None, 10, "the topic znode")
    a = member_factory(
        "g",
        {TOPIC: 1},
        consumer_id="a",
        auto_offset_reset="largest",
        auto_commit_enable=True,
        auto_commit_interval_ms=600_000,
    )
    wait_for(lambda: a.is_stable() and len(a.owned()) == 2, 20, "a to own both partitions")
    assert a.next_message(1.0) is None  # starts at the log end: the backlog is not handed out
    # The reset position is the consume position (ConsumerFetcherThread.handleOffsetOutOfRange).
    assert a.positions() == {TopicPartition(TOPIC, 0): 2, TopicPartition(TOPIC, 1): 1}
    return a


def test_reset_position_is_committed_when_the_owner_leaves(zk, member_factory, produce):
    a = start_owner_of_everything(zk, member_factory, produce)
    produce(0, b"new0", b"new1")
    produce(1, b"new2")
    a.close()  # leaves before handing out any of the new records; commits before releasing
    assert (stored_offset(zk, "g", 0), stored_offset(zk, "g", 1)) == (2, 1)

    b = member_factory("g", {TOPIC: 1}, consumer_id="b", auto_offset_reset="largest")
    wait_for(lambda: b.is_stable() and len(b.owned()) == 2, 20, "b to own both partitions")
    got = drain(b, 3)
    assert sorted(m.value for m in got) == [b"new0", b"new1", b"new2"]


def test_reset_position_is_committed_before_a_rebalance_releases(zk, member_factory, produce):
    a = start_owner_of_everything(zk, member_factory, produce)
    produce(1, b"new1a", b"new1b")
    # b joins: a commits before it releases, range gives partition 1 to b.
    b = member_factory("g", {TOPIC: 1}, consumer_id="b", auto_offset_reset="largest")
    wait_for(
        lambda: a.is_stable() and b.is_stable() and set(b.owned()) == {TopicPartition(TOPIC, 1)},
        20,
        "b to own partition 1",
    )
    assert stored_offset(zk, "g", 1) == 1
    assert [m.value for m in drain(b, 2)] == [b"new1a", b"new1b"]
    # Partition 0 stayed with a: its reset position was committed too, and a resumes there.
    assert stored_offset(zk, "g", 0) == 2
    produce(0, b"new0")
    assert [m.value for m in drain(a, 1)] == [b"new0"]


class EndOfLogFetcher:
    """A data path whose logs end at `end` and never grow: a reset lands on `end` (largest) and no record
    is ever handed out."""

    end = 40

    def __init__(self, _member: Any = None) -> None:
        self.resets: dict[TopicPartition, int] = {}

    def assign(self, positions: Any, continuing: Any = frozenset()) -> None:
        self.resets = {tp: self.end for tp, o in positions.items() if o < 0}

    def poll(self, timeout_ms: int) -> list[Any]:
        return []

    def reset_positions(self) -> dict[TopicPartition, int]:
        taken, self.resets = self.resets, {}
        return taken

    def close(self) -> None:
        self.resets = {}


@pytest.mark.parametrize("mode", ["fast", "faithful"])
def test_commit_writes_the_reset_position(zk, kit, member_factory, mode):
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 3)
    zk.create(paths.offset_path("g", "t", 2), b"7", makepath=True)  # partition 2 has a stored offset
    m = member_factory("g", {"t": 1}, consumer_id="c", mode=mode, fetcher_factory=EndOfLogFetcher)
    wait_for(lambda: m.is_stable() and len(m.owned()) == 3, 10, "ownership")
    assert m.commit_offsets() == 0  # the data path has not looked at the partitions yet: nothing to commit
    assert m.next_message(0) is None
    assert m.positions() == {
        TopicPartition("t", 0): 40,
        TopicPartition("t", 1): 40,
        TopicPartition("t", 2): 7,
    }
    assert m.commit_offsets() == 2  # the two reset positions; the stored offset did not move
    stored = {p: decode_offset("x", zk.get(paths.offset_path("g", "t", p))[0]) for p in range(3)}
    assert stored == {0: 40, 1: 40, 2: 7}
    assert m.commit_offsets() == 0  # checkpointed: not written again
