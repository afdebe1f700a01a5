"""Topics over a node's life, with real clients: DeleteTopics (logs and group offsets go, a re-created topic
starts empty), and a damaged partition log refusing to open while the other partitions keep serving."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaStorageError, UnknownTopicOrPartitionError
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse

from e2e.wire_calls import call_once
from zkcoord.errors import ErrorCode
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.records.batch import split_batches
from zkcoord.testing import wait_for

pytestmark = pytest.mark.e2e


def _list_offset(port: int, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v1 for one partition (-1: latest, -2: earliest)."""
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(
        version=1,
        replica_id=-1,
        topics=[
            T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])
        ],
    )
    p = call_once(port, req, ListOffsetsResponse).topics[0].partitions[0]
    return int(p.error_code), int(p.offset)


def _read_all(bootstrap: str, topic: str, partition: int, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2000)
    try:
        consumer.assign([TopicPartition(topic, partition)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    proc = NodeProcess(
        tmp_path_factory.mktemp("topic-lifecycle"),
        (*FAST_GROUP_FLAGS, "--num.partitions=1", "--log.retention.check.interval.ms=100"),
    )
    with proc:
        yield proc


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        return [producer.send(topic, v, partition=partition).get(30).offset for v in values]
    finally:
        producer.close()


def _consume_and_commit(bootstrap: str, topic: str, group: str, expected: int) -> list[tuple[int, bytes]]:
    """Join `group`, read `expected` records of `topic` from its committed position (earliest without one),
    commit, leave; (offset, value) of what was read."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.value) for r in records)
        consumer.commit()
        return got
    finally:
        consumer.close()


def test_delete_topic_drops_logs_and_offsets_and_a_recreated_topic_starts_empty(node: NodeProcess) -> None:
    topic, group, other = f"doomed-{uuid.uuid4().hex[:6]}", "doomed-readers", f"kept-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 2, 1), NewTopic(other, 1, 1)])
        assert _produce(node.bootstrap, topic, [b"old-%d" % i for i in range(5)]) == [0, 1, 2, 3, 4]
        _produce(node.bootstrap, other, [b"kept"])
        assert len(_consume_and_commit(node.bootstrap, topic, group, 5)) == 5
        _consume_and_commit(node.bootstrap, other, group, 1)
        committed = admin.list_group_offsets(group)[group]
        assert committed[TopicPartition(topic, 0)].offset == 5
        assert committed[TopicPartition(other, 0)].offset == 1

        result = admin.delete_topics([topic], timeout_ms=10_000)
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(topic, 0)]
        assert topic not in admin.list_topics()
        assert not (node.data_dir / "logs" / f"{topic}-0").exists()
        committed = admin.list_group_offsets(group)[group]
        assert TopicPartition(topic, 0) not in committed  # the deleted partitions' offsets are gone ...
        assert committed[TopicPartition(other, 0)].offset == 1  # ... and only those
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([topic])

        admin.create_topics([NewTopic(topic, 1, 1)])
        assert _produce(node.bootstrap, topic, [b"new-0", b"new-1"]) == [0, 1]
    finally:
        admin.close()
    # The group resumes from no offset: the re-created topic from 0, only its new records.
    assert _consume_and_commit(node.bootstrap, topic, group, 2) == [(0, b"new-0"), (1, b"new-1")]


def test_retention_moves_the_start_and_clients_see_it(node: NodeProcess) -> None:
    """retention.bytes / segment.bytes given at CreateTopics: whole old segments go, ListOffsets(earliest) says
    where the log now starts, a Fetch below it is OFFSET_OUT_OF_RANGE and a consumer resets to the start."""
    topic = f"retained-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        configs = {"retention.bytes": "4096", "segment.bytes": "1024"}
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=0, batch_size=1)
    try:
        for i in range(200):
            producer.send(topic, b"r%03d-" % i + b"x" * 50).get(30)
    finally:
        producer.close()
    directory = node.data_dir / "logs" / f"{topic}-0"
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, auto_offset_reset="earliest")
    try:

        def stored() -> int:
            total = 0
            for p in directory.glob("*.log"):
                with contextlib.suppress(FileNotFoundError):  # retention may remove it between glob and stat
                    total += p.stat().st_size
            return total

        # Whatever is left still holds retention.bytes, less than one more segment (1024 + one batch) over it.
        wait_for(lambda: stored() < 4096 + 1024 + 200, 15, "retention to catch up with the last records")
        assert stored() >= 4096
        start = consumer.beginning_offsets([tp])[tp]
        assert start == min(int(p.stem) for p in directory.glob("*.log")) > 0  # a segment's base offset
        assert consumer.end_offsets([tp])[tp] == 200
        assert _list_offset(node.port, topic, 0, -2) == (ErrorCode.NONE, start)
        consumer.assign([tp])
        consumer.seek(tp, 0)  # below the log start: OFFSET_OUT_OF_RANGE, reset to earliest
        first: list[int] = []
        deadline = time.monotonic() + 15
        while not first and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                first.extend(r.offset for r in records)
        assert first[0] == start
    finally:
        consumer.close()
    assert _fetch_error(node.port, topic, 0, 0) == ErrorCode.OFFSET_OUT_OF_RANGE


def _fetch_error(port: int, topic: str, partition: int, offset: int) -> int:
    T = FetchRequest.FetchTopic
    req = FetchRequest(
        version=4,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[
            T(
                topic=topic,
                partitions=[
                    T.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    return int(call_once(port, req, FetchResponse).responses[0].partitions[0].error_code)


def test_a_damaged_partition_refuses_to_open_and_the_others_serve(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "node", (*FAST_GROUP_FLAGS,))
    topic = "damaged"
    with node:
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=node.bootstrap)
        try:
            for i in range(3):  # one batch each: a damaged first batch has valid batches after it
                for p in (0, 1):
                    producer.send(topic, b"v%d" % i, partition=p).get(30)
        finally:
            producer.close()
    seg = tmp_path / "node" / "logs" / f"{topic}-0" / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    first = split_batches(bytes(data))[0]
    data[first.size - 1] ^= 0x01  # a flipped bit in the first batch's last record
    seg.write_bytes(bytes(data))

    with node:
        assert _list_offset(node.port, topic, 0, -1)[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert _list_offset(node.port, topic, 1, -1) == (ErrorCode.NONE, 3)
        producer = KafkaProducer(bootstrap_servers=node.bootstrap, retries=0)
        try:
            with pytest.raises(KafkaStorageError):
                producer.send(topic, b"refused", partition=0).get(30)
            assert producer.send(topic, b"v3", partition=1).get(30).offset == 3
        finally:
            producer.close()
        assert _read_all(node.bootstrap, topic, 1, 4) == [b"v0", b"v1", b"v2", b"v3"]
        report = f"damaged batch in {seg} at byte 0 of {len(data)}"
        wait_for(lambda: any(report in line for line in node.output), 10, "the damage report in the node log")
        assert any("a valid batch follows at byte" in line for line in node.output)
    assert seg.read_bytes() == bytes(data)  # nothing truncated, nothing rewritten
