"""Real clients produce to and consume from a zkcoord node: kafka-python, confluent-kafka (librdkafka), kcat."""

from __future__ import annotations

import subprocess
import time
import uuid
from typing import Any as ServerProcess  # the `server` fixture (tests/e2e/conftest.py)

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.e2e


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _kp_read(server: ServerProcess, topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, consumer_timeout_ms=2000)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


def test_kafka_python_idempotent_producer_and_manual_consumer(server: ServerProcess) -> None:
    topic = _topic("kp")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)  # default: idempotent (InitProducerId)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(3000)]
        producer.flush(30)
        metas = [f.get(10) for f in futures]
    finally:
        producer.close()
    per_partition: dict[int, list[int]] = {}
    for m in metas:
        per_partition.setdefault(m.partition, []).append(m.offset)
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))  # dense, in order, no duplicates
    values = _kp_read(server, topic, 3, 3000)
    assert sorted(values) == sorted(b"v%d" % i for i in range(3000))


def test_confluent_producer_and_consumer(server: ServerProcess) -> None:
    topic = _topic("ck")
    producer = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    delivered: list[int] = []
    for i in range(2000):
        producer.produce(
            topic, value=b"c%d" % i, on_delivery=lambda err, msg: err is None and delivered.append(1)
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(delivered) == 2000
    consumer = Consumer(
        {"bootstrap.servers": server.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([CTopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 2000 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            values.append(msg.value())
    finally:
        consumer.close()
    assert values == [b"c%d" % i for i in range(2000)]


def test_kcat_produce_and_consume(server: ServerProcess) -> None:
    topic = _topic("kc")
    lines = "".join(f"line-{i}\n" for i in range(500))
    subprocess.run(
        ["kcat", "-b", server.bootstrap, "-P", "-t", topic], input=lines, text=True, check=True, timeout=30
    )
    out = subprocess.run(
        ["kcat", "-b", server.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert out.stdout.splitlines() == [f"line-{i}" for i in range(500)]
    # what kcat wrote, kafka-python reads
    assert _kp_read(server, topic, 1, 500) == [b"line-%d" % i for i in range(500)]


def test_corrupt_batch_is_rejected_and_nothing_stored(server: ServerProcess) -> None:
    import socket
    import struct

    from zkcoord.records.batch import build_batch
    from zkcoord.server import kafka_protocol as kp

    topic = _topic("bad")
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    producer.send(topic, b"good").get(10)
    producer.close()
    bad = bytearray(build_batch([(None, b"evil")]))
    bad[-1] ^= 0x55
    from kafka.protocol.producer import ProduceRequest as PR

    T = PR.TopicProduceData
    frame = kp.encode_request(
        kp.PRODUCE,
        7,
        1,
        "t",
        transactional_id=None,
        acks=1,
        timeout_ms=1000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=bytes(bad))])],
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(frame)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = sock.recv(size, socket.MSG_WAITALL)
    _corr, resp = kp.decode_response(kp.PRODUCE, 7, body)
    assert resp.responses[0].partition_responses[0].error_code == 2  # CORRUPT_MESSAGE
    assert _kp_read(server, topic, 1, 1) == [b"good"]


def test_kill9_and_restart_keep_acknowledged_records(server: ServerProcess) -> None:
    topic = _topic("dur")
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    futures = [producer.send(topic, b"d%d" % i) for i in range(1000)]
    producer.flush(30)
    acked = [f.get(10).offset for f in futures]
    producer.close()
    assert acked == list(range(1000))
    server.kill9()
    server.start()
    assert _kp_read(server, topic, 1, 1000) == [b"d%d" % i for i in range(1000)]
