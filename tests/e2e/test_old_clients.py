"""The era's own clients against one `zkcoord serve --zk` node shared by the module: version-0 offsets in
ZooKeeper (kafka-python's own v0 request classes over a real socket, and a zkcoord legacy member)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kazoo.client import KazooClient

from e2e.wire_calls import call_once
from zkcoord.errors import ErrorCode
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.records.batch import GZIP, build_batch
from zkcoord.records.message_set import LegacyMessage, decode_message_set, encode_message, encode_message_set
from zkcoord.testing import wait_for

pytestmark = pytest.mark.e2e

TOPIC = "old-clients"


class Cluster:
    def __init__(self, node: NodeProcess, zk_connect: str, zk: KazooClient) -> None:
        self.node = node
        self.zk_connect = zk_connect
        self.zk = zk


@pytest.fixture(scope="module")
def cluster(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    chroot = f"/old-clients-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zk_server.hosts)
    root.start(30)
    root.ensure_path(chroot)
    connect = f"{zk_server.hosts}{chroot}"
    zk = KazooClient(hosts=connect)
    zk.start(30)
    node = NodeProcess(
        tmp_path_factory.mktemp("old-clients-node"),
        ("--zk", connect, "--node-id", "1", "--num.partitions=1", *FAST_GROUP_FLAGS),
    )
    try:
        with node:
            yield Cluster(node, connect, zk)
    finally:
        node.kill9()
        zk.stop()
        zk.close()
        root.delete(chroot, recursive=True)
        root.stop()
        root.close()


def _commit_v0(port: int, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> dict[Any, int]:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    topics = sorted({t for t, _ in offsets})
    req = OffsetCommitRequest(
        version=0,
        group_id=group,
        topics=[
            T(
                name=t,
                partitions=[
                    P(partition_index=p, committed_offset=o, committed_metadata=m)
                    for (tt, p), (o, m) in sorted(offsets.items())
                    if tt == t
                ],
            )
            for t in topics
        ],
    )
    resp = call_once(port, req, OffsetCommitResponse)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def _fetch(port: int, group: str, tps: list[tuple[str, int]], version: int = 0) -> dict[Any, tuple[int, int]]:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = sorted({t for t, _ in tps})
    req = OffsetFetchRequest(
        version=version,
        group_id=group,
        topics=[T(name=t, partition_indexes=[p for tt, p in tps if tt == t]) for t in topics],
    )
    resp = call_once(port, req, OffsetFetchResponse)
    return {
        (t.name, p.partition_index): (p.committed_offset, p.error_code)
        for t in resp.topics
        for p in t.partitions
    }


def _legacy_consume(zk_connect: str, group: str, topic: str, n: int) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "zkcoord", "legacy", "consume", "--zk", zk_connect, "--group", group,
           "--topic", topic, "--max-messages", str(n)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, timeout=90, stdin=subprocess.DEVNULL)


def test_v0_offsets_are_the_zookeeper_offsets(cluster: Cluster) -> None:
    topic, group = f"{TOPIC}-v0", "old-group"
    producer = KafkaProducer(bootstrap_servers=cluster.node.bootstrap, linger_ms=5)
    try:
        for i in range(60):
            producer.send(topic, value=b"r%d" % i, partition=0)
        producer.flush(30)
    finally:
        producer.close(5)
    port = cluster.node.port
    path = f"/consumers/{group}/offsets/{topic}/0"

    # kafka-node's Offset API (OffsetCommit v0, as its HighLevelConsumer) lands in the znode as Kafka writes it:
    # the decimal offset, metadata not stored.
    bs = cluster.node.bootstrap
    assert json.loads(_kafka_node("commit", bs, topic, group, "40")) == {
        topic: {"partition": 0, "errorCode": 0}
    }
    assert cluster.zk.get(path)[0] == b"40"
    # The same through kafka-python's v0 classes; a partition the cluster does not know and metadata over
    # offset.metadata.max.bytes are refused, nothing written.
    errors = _commit_v0(
        port,
        group,
        {(topic, 0): (42, "from an 0.8 client"), (topic, 9): (5, ""), ("no-such-topic", 0): (5, "")},
    )
    assert errors == {(topic, 0): 0, (topic, 9): 3, ("no-such-topic", 0): 3}
    assert cluster.zk.get(path)[0] == b"42"
    assert _commit_v0(port, group, {(topic, 0): (43, "x" * 4097)}) == {(topic, 0): 12}
    assert cluster.zk.get(path)[0] == b"42"
    assert cluster.zk.exists(f"/consumers/{group}/offsets/no-such-topic") is None
    # v1+ is unchanged: the coordinator's store (once it has loaded: v0 never waited for it) has nothing.
    # Until then v1 answers one of the coordinator-not-ready codes, which one depending on how far the node got:
    # NOT_AVAILABLE before the controller named a leader for the group's offsets partition (seen on a fresh
    # clone: waiting only for LOAD_IN_PROGRESS to end took that for the answer), LOAD_IN_PROGRESS while loading.
    not_ready = {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    }
    v1: dict[Any, tuple[int, int]] = {}

    def coordinator_answers() -> bool:
        v1.update(_fetch(port, group, [(topic, 0)], version=1))
        return v1[(topic, 0)][1] not in not_ready

    wait_for(coordinator_answers, 30, "the group's coordinator to be elected and loaded")
    assert v1 == {(topic, 0): (-1, 0)}

    # A zkcoord legacy member starts from the v0 commit, and commits in ZooKeeper as it goes.
    done = _legacy_consume(cluster.zk_connect, group, topic, 5)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout.splitlines() == [b"r%d" % i for i in range(42, 47)]
    wait_for(lambda: cluster.zk.get(path)[0] == b"47", 10, "the member's commit")

    # ... and the legacy member's ZooKeeper commit is what OffsetFetch v0 returns; no znode is Kafka's
    # UNKNOWN_TOPIC_OR_PARTITION with offset -1, as is a partition the cluster does not know.
    assert json.loads(_kafka_node("fetchcommit", bs, topic, group)) == {topic: {"0": 47}}
    fetched = _fetch(port, group, [(topic, 0), (topic, 3), ("no-such-topic", 0)])
    assert fetched == {(topic, 0): (47, 0), (topic, 3): (-1, 3), ("no-such-topic", 0): (-1, 3)}
    assert _fetch(port, "never-committed", [(topic, 0)]) == {(topic, 0): (-1, 3)}
    # A znode that is no number is that partition's error, never a default offset.
    cluster.zk.set(path, b"forty")
    assert _fetch(port, group, [(topic, 0)]) == {(topic, 0): (-1, -1)}


# -- every generation of client on one topic ----------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
NODE_CLIENT = Path(__file__).parent / "clients" / "kafka_node_client.js"
OLD_LIBRDKAFKA = ("0.8.2.2", "0.10.2.1")  # broker.version.fallback: magic 0 (Produce v0/Fetch v0), magic 1
CODECS = ("none", "gzip", "snappy")
Record = tuple[bytes, bytes]


def _old_mode(fallback: str) -> dict[str, Any]:
    return {"api.version.request": False, "broker.version.fallback": fallback, "log_level": 3}


def _ck_produce(
    bootstrap: str, topic: str, tag: str, conf: dict[str, Any], codecs: tuple[str, ...] = CODECS
) -> list[Record]:
    sent: list[Record] = []
    for codec in codecs:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "compression.codec": codec, "linger.ms": 5, **conf}
        )
        errors: list[Any] = []
        report = errors.append
        for i in range(2):
            key, value = f"{tag}-{codec}-k{i}".encode(), f"{tag}-{codec}-v{i}".encode() + bytes([0, 255, i])
            producer.produce(
                topic, key=key, value=value, partition=0, on_delivery=lambda e, m, report=report: report(e)
            )
            sent.append((key, value))
        assert producer.flush(30) == 0
        assert errors == [None, None], (tag, codec, errors)
    return sent


def _ck_consume(bootstrap: str, topic: str, n: int, conf: dict[str, Any]) -> list[tuple[int, Record]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, **conf}
    )
    got: list[tuple[int, Record]] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])

        def more() -> bool:
            m = consumer.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append((m.offset(), (m.key(), m.value())))
            return len(got) >= n

        wait_for(more, 60, f"{n} records through librdkafka {conf}", interval=0)
    finally:
        consumer.close()
    return got


def _kp_produce(
    bootstrap: str,
    topic: str,
    tag: str,
    api_version: tuple[int, ...] | None,
    codecs: tuple[str | None, ...] = (None, "gzip", "snappy"),
) -> list[Record]:
    sent: list[Record] = []
    for codec in codecs:
        kw: dict[str, Any] = {"api_version": api_version} if api_version else {}
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5, **kw)
        try:
            futures = []
            for i in range(2):
                key, value = f"{tag}-{codec}-k{i}".encode(), f"{tag}-{codec}-v{i}".encode()
                futures.append(producer.send(topic, key=key, value=value, partition=0))
                sent.append((key, value))
            producer.flush(30)
            for f in futures:
                f.get(10)
        finally:
            producer.close(5)
    return sent


def _kp_consume(
    bootstrap: str, topic: str, n: int, api_version: tuple[int, ...] | None
) -> list[tuple[int, Record]]:
    kw: dict[str, Any] = {"api_version": api_version} if api_version else {}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **kw)
    got: list[tuple[int, Record]] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)

        def more() -> bool:
            for records in consumer.poll(200).values():
                got.extend((r.offset, (r.key, r.value)) for r in records)
            return len(got) >= n

        wait_for(more, 60, f"{n} records through kafka-python {api_version}", interval=0)
    finally:
        consumer.close()
    return got


def _kcat(bootstrap: str, fallback: str, *args: str, stdin: bytes = b"") -> bytes:
    cmd = ["kcat", "-b", bootstrap, "-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}",
           "-X", "log_level=3", *args]  # fmt: skip
    done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def _kcat_produce(bootstrap: str, topic: str, tag: str, fallback: str) -> list[Record]:
    sent: list[Record] = []
    for codec in CODECS:
        lines = [(f"{tag}-{codec}-k{i}".encode(), f"{tag}-{codec}-v{i}".encode()) for i in range(2)]
        stdin = b"".join(k + b"\t" + v + b"\n" for k, v in lines)
        _kcat(bootstrap, fallback, "-P", "-t", topic, "-p", "0", "-K", "\t", "-z", codec, stdin=stdin)
        sent += lines
    return sent


def _kcat_consume(bootstrap: str, topic: str, fallback: str) -> list[tuple[int, Record]]:
    # offset, key length, value length on a line, then the raw key and value: binary values come back intact
    out = _kcat(
        bootstrap, fallback, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %K %S\n%k%s"
    )
    got: list[tuple[int, Record]] = []
    pos = 0
    while pos < len(out):
        eol = out.index(b"\n", pos)
        offset, klen, vlen = (int(x) for x in out[pos:eol].split())
        key = out[eol + 1 : eol + 1 + klen]
        got.append((offset, (key, out[eol + 1 + klen : eol + 1 + klen + vlen])))
        pos = eol + 1 + klen + vlen
    return got


def _kafka_node(*args: str) -> bytes:
    modules = REPO / ".npm" / "node_modules"
    assert (modules / "kafka-node").is_dir(), "kafka-node is missing: run scripts/setup.sh"
    env = {**os.environ, "NODE_PATH": str(modules)}
    done = subprocess.run(["node", str(NODE_CLIENT), *args], capture_output=True, timeout=90, env=env)
    assert done.returncode == 0, (done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))
    return done.stdout


def test_every_generation_produces_and_reads_every_record(cluster: Cluster) -> None:
    """Magic 2 (kafka-python, librdkafka today), magic 1 (librdkafka 0.10.2.1 mode, kafka-python (0, 10),
    kafka-node) and magic 0 (librdkafka and kcat in 0.8.2.2 mode, kafka-python (0, 8, 2)) into one partition, each
    uncompressed, gzip and snappy; then every client generation reads all of it back in order, bytes intact."""
    bs, topic = cluster.node.bootstrap, f"{TOPIC}-generations"
    expected: list[Record] = []
    expected += _kp_produce(bs, topic, "kp-now", None)  # creates the topic (the others then find its leader)
    expected += _ck_produce(bs, topic, "ck-now", {})
    for fallback in OLD_LIBRDKAFKA:
        expected += _ck_produce(bs, topic, f"ck-{fallback}", _old_mode(fallback))
        expected += _kcat_produce(bs, topic, f"kcat-{fallback}", fallback)
    expected += _kp_produce(bs, topic, "kp-0.10", (0, 10))
    expected += _kp_produce(bs, topic, "kp-0.8.2", (0, 8, 2))
    _kafka_node("produce", bs, topic, "kafka-node")
    expected += [
        (f"kafka-node-c{c}-k{i}".encode(), f"kafka-node-c{c}-v{i}".encode())
        for c in range(3)
        for i in range(2)
    ]
    want = list(enumerate(expected))
    n = len(expected)

    readers: dict[str, list[tuple[int, Record]]] = {
        "kafka-python": _kp_consume(bs, topic, n, None),
        "kafka-python (0, 10)": _kp_consume(bs, topic, n, (0, 10)),
        "kafka-python (0, 8, 2)": _kp_consume(bs, topic, n, (0, 8, 2)),
        "confluent-kafka": _ck_consume(bs, topic, n, {}),
    }
    for fallback in OLD_LIBRDKAFKA:
        readers[f"confluent-kafka {fallback}"] = _ck_consume(bs, topic, n, _old_mode(fallback))
        readers[f"kcat {fallback}"] = _kcat_consume(bs, topic, fallback)
    node_seen = json.loads(_kafka_node("consume", bs, topic, str(n)))
    readers["kafka-node"] = [
        (o, (base64.b64decode(k) if k is not None else b"", base64.b64decode(v))) for o, k, v in node_seen
    ]
    for name, got in readers.items():
        assert got[:n] == want, name


def test_lz4_from_every_generation_is_read_back_by_old_and_current_clients(cluster: Cluster) -> None:
    """lz4 as each generation writes it: kafka-python at (0, 8, 2) (magic 0, Kafka 0.8.2's header checksum), at
    (0, 10, 0) (magic 1) and today (RecordBatch v2), librdkafka today and in 0.8.2.2 mode (magic 0); every record
    read back in order by old clients (Fetch v0: converted down) and current ones (the stored lz4 batches)."""
    bs, topic = cluster.node.bootstrap, f"{TOPIC}-lz4"
    expected: list[Record] = []
    expected += _kp_produce(bs, topic, "kp-now", None, ("lz4",))  # creates the topic
    expected += _kp_produce(bs, topic, "kp-0.10", (0, 10, 0), ("lz4",))
    expected += _kp_produce(bs, topic, "kp-0.8.2", (0, 8, 2), ("lz4",))
    expected += _ck_produce(bs, topic, "ck-now", {}, ("lz4",))
    expected += _ck_produce(bs, topic, "ck-0.8.2.2", _old_mode("0.8.2.2"), ("lz4",))
    want, n = list(enumerate(expected)), len(expected)
    readers = {
        "kafka-python (0, 8, 2)": _kp_consume(bs, topic, n, (0, 8, 2)),
        "kafka-python": _kp_consume(bs, topic, n, None),
        "confluent-kafka 0.8.2.2": _ck_consume(bs, topic, n, _old_mode("0.8.2.2")),
        "confluent-kafka": _ck_consume(bs, topic, n, {}),
    }
    for name, got in readers.items():
        assert got[:n] == want, name


# -- hostile message sets and per-partition answers ---------------------------------------------------------------


def _produce(port: int, version: int, topic: str, records: bytes) -> tuple[int, int]:
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    req = ProduceRequest(
        version=version,
        acks=1,
        timeout_ms=10000,
        topic_data=[T(name=topic, partition_data=[P(index=0, records=records)])],
    )
    resp = call_once(port, req, ProduceResponse)
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def _fetch_records(
    port: int, version: int, topic: str, partitions: list[int]
) -> dict[int, tuple[int, bytes]]:
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    req = FetchRequest(
        version=version,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        topics=[
            T(
                topic=topic,
                partitions=[P(partition=i, fetch_offset=0, partition_max_bytes=1 << 20) for i in partitions],
            )
        ],
    )
    resp = call_once(port, req, FetchResponse)
    return {
        p.partition_index: (p.error_code, bytes(p.records or b""))
        for t in resp.responses
        for p in t.partitions
    }


def _end_offset(port: int, topic: str) -> int:
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(
        version=0,
        replica_id=-1,
        topics=[
            T(
                name=topic,
                partitions=[T.ListOffsetsPartition(partition_index=0, timestamp=-1, max_num_offsets=1)],
            )
        ],
    )
    p = call_once(port, req, ListOffsetsResponse).topics[0].partitions[0]
    assert p.error_code == 0
    return int(p.old_style_offsets[0])


def test_bad_message_sets_get_kafkas_error_and_store_nothing(cluster: Cluster) -> None:
    port, topic = cluster.node.port, f"{TOPIC}-hostile"
    good = [
        LegacyMessage(0, b"k", b"v", 1_700_000_000_000),
        LegacyMessage(1, b"k2", b"v2", 1_700_000_000_001),
    ]
    producer = KafkaProducer(bootstrap_servers=cluster.node.bootstrap)
    producer.send(topic, b"first", partition=0).get(30)  # creates the topic and waits for its leader
    producer.close(5)
    assert _produce(port, 2, topic, encode_message_set(good, magic=1, codec=GZIP)) == (0, 1)
    assert _produce(port, 0, topic, encode_message_set(good, magic=0)) == (0, 3)
    before = _end_offset(port, topic)
    assert before == 5

    wrong_crc = bytearray(encode_message_set(good, magic=0))
    wrong_crc[20] ^= 0xFF  # inside the first message's CRC-covered bytes
    inner = encode_message_set(good, magic=1)
    truncated_wrapper = encode_message(0, None, _gzip(inner[:-4]), attributes=GZIP)
    nested = encode_message(0, None, _gzip(encode_message_set(good, magic=1, codec=GZIP)), attributes=GZIP)
    # a small frame inflating past the server's bound on inflated records (64 MiB) and so past its request limit
    bomb = encode_message(0, None, _gzip(encode_message(0, None, b"\x00" * (65 << 20))), attributes=GZIP)
    assert len(bomb) < 200_000
    record_batch_in_v2 = build_batch([(b"k", b"v")])
    for name, data, version in (
        ("wrong CRC", bytes(wrong_crc), 0),
        ("truncated nested wrapper", truncated_wrapper, 2),
        ("nested compression", nested, 2),
        ("compressed bomb", bomb, 2),
        ("RecordBatch v2 in Produce v2", record_batch_in_v2, 2),
    ):
        assert _produce(port, version, topic, data) == (ErrorCode.CORRUPT_MESSAGE, -1), name
    assert _end_offset(port, topic) == before

    # Fetch v0-v3 answers every partition asked: records converted down, or the partition's own error.
    for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        answer = _fetch_records(port, version, topic, [0, 7])
        assert answer[7] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, b"")
        error, records = answer[0]
        assert error == 0
        got = decode_message_set(records, partial_tail=True)
        assert [(m.offset, m.key, m.value, m.magic) for m in got] == [
            (0, None, b"first", magic),
            (1, b"k", b"v", magic),
            (2, b"k2", b"v2", magic),
            (3, b"k", b"v", magic),
            (4, b"k2", b"v2", magic),
        ]


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()
