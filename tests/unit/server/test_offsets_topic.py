"""`__consumer_offsets` as a served internal topic: the read-only log view over record-store batches, and the
Broker's Metadata / ListOffsets / Fetch / Produce / CreateTopics answers for it (cluster and single-node)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zkcoord.records.batch import iter_records, split_batches, validate_batch
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.broker import OFFSETS_TOPIC, Broker, ServerConfig
from zkcoord.server.log import LogManager, OffsetsTopicLog
from zkcoord.zk.record_store import OFFSETS_PER_BATCH, IndexedBatch


@dataclass
class _Fence:
    leader_epoch: int = 3


class FakeStore:
    """What OffsetsTopicLog reads from a ZkRecordStore."""

    def __init__(self, batches: list[IndexedBatch], end: int | None = None) -> None:
        self.batches = tuple(batches)
        self.fence = _Fence()
        self.end = end if end is not None else (batches[-1].next_offset if batches else 0)

    def log_batches(self) -> tuple[IndexedBatch, ...]:
        return self.batches

    def log_end_offset(self) -> int:
        return self.end


def _records(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    for header in split_batches(data) if data else []:
        batch = data[header.position : header.position + header.size]
        validate_batch(batch)  # CRC-32C and framing are what a real client checks
        out += [(r.offset, r.key, r.value) for r in iter_records(batch)]
    return out


def test_view_serves_exact_bytes_at_store_offsets() -> None:
    b1 = IndexedBatch(2, 1000, ((b"k1", b"v1"), (b"k2", None)))
    b2 = IndexedBatch(5, 2000, ((b"k1", b"v2"),))
    view = OffsetsTopicLog(FakeStore([b1, b2]))
    base1, base2 = 2 * OFFSETS_PER_BATCH, 5 * OFFSETS_PER_BATCH
    assert view.log_start_offset == 0 and view.next_offset == base2 + 1
    everything = [(base1, b"k1", b"v1"), (base1 + 1, b"k2", None), (base2, b"k1", b"v2")]
    assert _records(view.read(0, 1 << 20)) == everything
    # A fetch inside or past a batch starts at the first batch holding an offset >= it (gaps are skipped).
    assert _records(view.read(base1 + 1, 1 << 20)) == everything
    assert _records(view.read(base1 + 2, 1 << 20)) == everything[2:]
    assert view.read(base2 + 1, 1 << 20) == b""
    # max_bytes smaller than a batch still returns one whole batch (KIP-74), never a partial one.
    assert _records(view.read(0, 1)) == everything[:2]
    assert view.offset_for_timestamp(1500) == (base2, 2000)
    assert view.offset_for_timestamp(3000) == (-1, -1)


batches_strategy = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=50),
        st.lists(st.tuples(st.binary(max_size=4), st.none() | st.binary(max_size=4)), min_size=1, max_size=4),
    ),
    max_size=6,
    unique_by=lambda b: b[0],
)


@given(batches_strategy, st.integers(min_value=0, max_value=51 * OFFSETS_PER_BATCH))
def test_view_read_is_the_suffix_of_the_log_from_the_fetch_offset(
    raw: list[tuple[int, list[tuple[bytes, bytes | None]]]], offset: int
) -> None:
    batches = [IndexedBatch(seq, seq, tuple(recs)) for seq, recs in sorted(raw)]
    view = OffsetsTopicLog(FakeStore(batches))
    log = [(b.base_offset + i, k, v) for b in batches for i, (k, v) in enumerate(b.records)]
    got = _records(view.read(offset, 1 << 30))
    # whole batches: the first returned batch is the first whose last offset >= offset
    first = next((b for b in batches if b.next_offset > offset), None)
    expected = [r for r in log if first is not None and r[0] >= first.base_offset]
    assert got == expected
    assert all(a[0] < b[0] for a, b in itertools.pairwise(got))


class FakeCluster:
    """The part of ClusterRouting the Broker consults, with one loaded offsets partition (1) of 3."""

    def __init__(self, view: OffsetsTopicLog) -> None:
        self.view = view
        self.published: list[tuple[str, int]] = []

    def brokers(self) -> list[tuple[int, str, int]]:
        return [(1, "127.0.0.1", 9092), (2, "127.0.0.1", 9093)]

    def controller_id(self) -> int:
        return 2

    def cluster_id(self) -> str:
        return "cluster-from-zookeeper"

    def leads(self, topic: str, partition: int) -> bool:
        return True

    def partition_meta(self, topic: str, count: int) -> list[tuple[int, int, tuple[int, ...], int]]:
        return [(p, 1, (1,), 0) for p in range(count)]

    def offsets_partition_count(self) -> int:
        return 3

    def offsets_log(self, partition: int) -> OffsetsTopicLog | None:
        return self.view if partition == 1 else None

    def offsets_topic_meta(self) -> kp.TopicMeta:
        parts = (
            kp.PartitionMeta(0, 2, (2,)),
            kp.PartitionMeta(1, 1, (1,)),
            kp.PartitionMeta(2, -1, (-1,), 5),
        )
        return kp.TopicMeta(OFFSETS_TOPIC, 0, parts, internal=True)

    def topic_created(self, topic: str, partitions: int) -> None:
        self.published.append((topic, partitions))


def _call(broker: Broker, api_key: int, version: int, **fields: Any) -> Any:
    req = kp.decode_request(kp.encode_request(api_key, version, 7, "t", **fields)[4:])
    frame = broker.dispatch(req)
    assert isinstance(frame, bytes)
    return kp.decode_response(api_key, version, frame[4:])[1]


def _broker(tmp_path: Path, cluster: Any) -> Broker:
    return Broker(ServerConfig(data_dir=tmp_path, node_id=1), LogManager(tmp_path), cluster=cluster)


def _metadata(broker: Broker, names: list[str] | None) -> Any:
    M = kp._CLASSES[kp.METADATA][0]
    topics = None if names is None else [M.MetadataRequestTopic(name=n) for n in names]
    return _call(broker, kp.METADATA, 9, topics=topics, allow_auto_topic_creation=True)


def test_cluster_metadata_lists_the_internal_topic_and_never_creates_a_data_topic(tmp_path: Path) -> None:
    cluster = FakeCluster(OffsetsTopicLog(FakeStore([])))
    broker = _broker(tmp_path, cluster)
    for names in (None, [OFFSETS_TOPIC]):
        md = _metadata(broker, names)
        (topic,) = [t for t in md.topics if t.name == OFFSETS_TOPIC]
        assert topic.is_internal and topic.error_code == 0
        assert [(p.partition_index, p.leader_id, p.error_code) for p in topic.partitions] == [
            (0, 2, 0),
            (1, 1, 0),
            (2, -1, 5),
        ]
    assert OFFSETS_TOPIC not in broker.logs.topics and cluster.published == []
    # An unknown data topic is published to ZooKeeper and answered LEADER_NOT_AVAILABLE (no local guess).
    md = _metadata(broker, ["fresh"])
    assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [("fresh", 5, 0)]
    assert cluster.published == [("fresh", 1)] and "fresh" not in broker.logs.topics


def test_single_node_metadata_for_the_internal_topic_creates_nothing(tmp_path: Path) -> None:
    broker = _broker(tmp_path, None)
    md = _metadata(broker, [OFFSETS_TOPIC])
    assert [(t.name, t.error_code, t.is_internal) for t in md.topics] == [(OFFSETS_TOPIC, 3, True)]
    assert OFFSETS_TOPIC not in broker.logs.topics
    assert not (tmp_path / "logs" / f"{OFFSETS_TOPIC}-0").exists()


def test_list_offsets_and_fetch_read_the_view_only_where_loaded(tmp_path: Path) -> None:
    batch = IndexedBatch(4, 1234, ((b"\x00\x01key", b"\x00\x03value"),))
    broker = _broker(tmp_path, FakeCluster(OffsetsTopicLog(FakeStore([batch]))))
    L = kp._CLASSES[kp.LIST_OFFSETS][0]
    LP = L.ListOffsetsTopic.ListOffsetsPartition
    parts = [LP(partition_index=p, timestamp=ts) for p, ts in ((1, -1), (1, -2), (0, -1), (7, -1))]
    lo = _call(
        broker,
        kp.LIST_OFFSETS,
        1,
        replica_id=-1,
        topics=[L.ListOffsetsTopic(name=OFFSETS_TOPIC, partitions=parts)],
    )
    got = [(p.partition_index, p.error_code, p.offset) for p in lo.topics[0].partitions]
    end = 4 * OFFSETS_PER_BATCH + 1
    assert got == [(1, 0, end), (1, 0, 0), (0, 6, -1), (7, 3, -1)]

    F = kp._CLASSES[kp.FETCH][0]
    FP = F.FetchTopic.FetchPartition
    fparts = [FP(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in (1, 0)]
    fr = _call(
        broker,
        kp.FETCH,
        4,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[F.FetchTopic(topic=OFFSETS_TOPIC, partitions=fparts)],
    )
    (p1, p0) = fr.responses[0].partitions
    assert (p1.error_code, p1.high_watermark) == (0, end)
    assert _records(bytes(p1.records)) == [(4 * OFFSETS_PER_BATCH, b"\x00\x01key", b"\x00\x03value")]
    assert p0.error_code == 6


def test_produce_and_create_topics_for_the_internal_topic_are_refused(tmp_path: Path) -> None:
    from zkcoord.records.batch import build_batch

    P = kp._CLASSES[kp.PRODUCE][0]
    for cluster in (None, FakeCluster(OffsetsTopicLog(FakeStore([])))):
        broker = _broker(tmp_path / str(cluster is None), cluster)
        data = P.TopicProduceData.PartitionProduceData(index=0, records=build_batch([(b"k", b"v")]))
        pr = _call(
            broker,
            kp.PRODUCE,
            3,
            transactional_id=None,
            acks=1,
            timeout_ms=1000,
            topic_data=[P.TopicProduceData(name=OFFSETS_TOPIC, partition_data=[data])],
        )
        assert pr.responses[0].partition_responses[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
        assert OFFSETS_TOPIC not in broker.logs.topics
        C = kp._CLASSES[kp.CREATE_TOPICS][0]
        ct = _call(
            broker,
            kp.CREATE_TOPICS,
            1,
            topics=[
                C.CreatableTopic(
                    name=OFFSETS_TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=1000,
            validate_only=False,
        )
        assert ct.topics[0].error_code == (17 if cluster is None else 36)
        assert OFFSETS_TOPIC not in broker.logs.topics
