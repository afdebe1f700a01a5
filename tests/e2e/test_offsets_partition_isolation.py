"""A malformed batch znode in one offsets partition's record store, seen by real kafka-python clients of a
`zkcoord serve --zk` node: the groups of every other partition are served after a restart, the bad partition's
group gets the retriable COORDINATOR_LOAD_IN_PROGRESS (never an answer from partial data), and removing the bad
znode serves it without another restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaTimeoutError

from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.placement.coordinator import partition_for_group
from zkcoord.testing import wait_for
from zkcoord.zk.record_store import records_path

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

OFFSETS_PARTITIONS = 4
TOPIC = "isolated"


def _flags(zk_connect: str) -> tuple[str, ...]:
    return ("--zk", zk_connect, "--node-id", "1", "--num.partitions=1",
            f"--offsets.topic.num.partitions={OFFSETS_PARTITIONS}", *FAST_GROUP_FLAGS)  # fmt: skip


def _group_in(partition: int) -> str:
    return next(
        g for i in range(1000) if partition_for_group(g := f"grp-{i}", OFFSETS_PARTITIONS) == partition
    )


@pytest.fixture
def restarted(zk_connect: str, tmp_path: Path) -> Iterator[list[NodeProcess]]:
    nodes: list[NodeProcess] = []
    yield nodes
    for n in nodes:
        if n.running:
            n.stop()


def _consumer(node: NodeProcess, group: str) -> Any:
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=group, enable_auto_commit=False,
                             request_timeout_ms=10000, reconnect_backoff_max_ms=500)  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0)])
    return consumer


def test_one_partitions_bad_batch_leaves_the_other_groups_served(
    zk: Any, zk_connect: str, tmp_path: Path, restarted: list[NodeProcess]
) -> None:
    # The bad partition sorts first: before, it also stopped every partition loaded after it.
    bad_group, good_group = _group_in(1), _group_in(3)
    tp = TopicPartition(TOPIC, 0)
    first = NodeProcess(tmp_path / "node", _flags(zk_connect)).start()
    restarted.append(first)
    producer = KafkaProducer(bootstrap_servers=first.bootstrap)
    producer.send(TOPIC, b"x").get(timeout=30)  # the topic exists
    producer.close(5)
    for group, offset in ((bad_group, 5), (good_group, 9)):
        consumer = _consumer(first, group)
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
        consumer.close()
    first.stop()

    bad = zk.create(
        records_path(1) + "/batch-", b"ZKR1\x00\x00\x00\x09", sequence=True
    )  # 9 records, no bytes
    second = NodeProcess(tmp_path / "node", _flags(zk_connect), port=first.port).start()
    restarted.append(second)
    good = _consumer(second, good_group)
    stuck = _consumer(second, bad_group)
    try:
        assert good.committed(tp, timeout_ms=30000) == 9
        with pytest.raises(KafkaTimeoutError):  # LOAD_IN_PROGRESS, retried by the client until its deadline
            stuck.committed(tp, timeout_ms=2000)
        log = "".join(second.output)
        assert "offsets partition 1 NOT served" in log and bad in log and "record count 9 cannot fit" in log
        assert zk.get(bad)[0] == b"ZKR1\x00\x00\x00\x09"  # left as it was

        zk.delete(bad)  # the operator gives the bad batch up: partition 1 loads without a restart
        wait_for(lambda: _committed_or_none(stuck, tp) == 5, 15, "the repaired partition to be served")
    finally:
        good.close()
        stuck.close()


def _committed_or_none(consumer: Any, tp: TopicPartition) -> int | None:
    try:
        return consumer.committed(tp, timeout_ms=1000)  # type: ignore[no-any-return]
    except KafkaTimeoutError:
        return None
