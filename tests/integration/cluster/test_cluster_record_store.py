"""The ZooKeeper-backed record store: durable, ordered, fenced by the offsets partition's leadership, compactable."""

from __future__ import annotations

from typing import Any

import pytest

from zkcoord.cluster.coordinator import OFFSETS_TOPIC
from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import PartitionState
from zkcoord.zk.record_store import (
    PartitionFence,
    StoreFenced,
    ZkRecordStore,
    decode_batch,
    encode_batch,
    records_path,
    split_batches,
)

pytestmark = pytest.mark.integration


def lead(zk: Any, partition: int, leader: int, epoch: int) -> PartitionFence:
    """Write the partition state as the controller would and return the fence the leader gets."""
    path = paths.partition_state_path(OFFSETS_TOPIC, partition)
    data = PartitionState(leader, epoch, (leader,), 1).encode()
    if zk.exists(path) is None:
        zk.create(path, data, makepath=True)
    else:
        zk.set(path, data)
    _, stat = zk.get(path)
    return PartitionFence(partition, epoch, stat.version)


def test_batch_codec_roundtrip_and_errors() -> None:
    recs = [(b"k1", b"v1"), (b"k2", None), (b"", b"")]
    assert decode_batch("p", encode_batch(recs)) == recs
    good = encode_batch(recs)
    with pytest.raises(MalformedZnode, match="does not start"):
        decode_batch("p", b"XXXX" + good[4:])
    with pytest.raises(MalformedZnode, match="truncated batch"):
        decode_batch("p", good[:-1])
    with pytest.raises(MalformedZnode, match="trailing bytes"):
        decode_batch("p", good + b"\0")
    assert [len(b) for b in split_batches([(b"k", b"x" * 100)] * 10, 300)] == [2, 2, 2, 2, 2]


def test_append_load_across_leaders_and_fencing(zk: Any, zk_client_factory: Any) -> None:
    f1 = lead(zk, 3, leader=1, epoch=0)
    node1 = zk_client_factory()
    s1 = ZkRecordStore(node1, f1)
    s1.append([(b"a", b"1"), (b"b", b"1")])
    s1.append([(b"a", b"2")])
    assert list(s1.load()) == [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]

    # the controller moves partition 3 to node 2 (epoch 1): node 1's next append is refused as a whole
    f2 = lead(zk, 3, leader=2, epoch=1)
    with pytest.raises(StoreFenced) as info:
        s1.append([(b"a", b"stale"), (b"c", b"stale")])
    assert info.value.code == 16 and info.value.retriable
    node2 = zk_client_factory()
    s2 = ZkRecordStore(node2, f2)
    assert list(s2.load()) == [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]
    s2.append([(b"b", None)])
    assert list(s2.load())[-1] == (b"b", None)
    # other partitions are separate
    other = ZkRecordStore(node2, lead(zk, 4, leader=2, epoch=0))
    assert list(other.load()) == []


def test_large_append_is_split_under_the_request_limit(zk: Any) -> None:
    store = ZkRecordStore(zk, lead(zk, 0, 1, 0), max_batch_bytes=64 * 1024, max_multi_bytes=200 * 1024)
    records = [(f"key-{i}".encode(), bytes([i % 256]) * 4096) for i in range(200)]  # ~820 KB
    store.append(records)
    assert list(store.load()) == records
    assert store.batch_count() >= 13
    with pytest.raises(ValueError, match="cannot fit"):
        store.append([(b"huge", b"x" * 300 * 1024)])


def test_compaction_keeps_last_values_and_is_fenced(zk: Any) -> None:
    fence = lead(zk, 1, 1, 0)
    store = ZkRecordStore(zk, fence)
    for i in range(20):
        store.append([(b"offset-a", str(i).encode()), (b"offset-b", str(i).encode())])
    store.append([(b"offset-b", None), (b"group", b"g")])
    assert store.compact() is True
    assert store.batch_count() == 1
    assert sorted(store.load()) == [(b"group", b"g"), (b"offset-a", b"19")]
    store.append([(b"offset-a", b"20")])
    assert dict(store.load())[b"offset-a"] == b"20"
    lead(zk, 1, 2, 1)
    with pytest.raises(StoreFenced):
        store.compact()
    assert store.batch_count() == 2  # nothing deleted by the refused compaction


def test_malformed_batch_is_named_and_left_intact(zk: Any) -> None:
    store = ZkRecordStore(zk, lead(zk, 2, 1, 0))
    store.append([(b"k", b"v")])
    bad = zk.create(records_path(2) + "/batch-", b"garbage", sequence=True)
    with pytest.raises(MalformedZnode, match="batch-"):
        list(store.load())
    assert zk.get(bad)[0] == b"garbage"


def test_log_offsets_are_monotonic_across_leaders_and_compaction(zk: Any, zk_client_factory: Any) -> None:
    f1 = lead(zk, 5, leader=1, epoch=0)
    s1 = ZkRecordStore(zk_client_factory(), f1)
    assert list(s1.load()) == [] and s1.log_batches() == ()
    start = s1.log_end_offset()
    s1.append([(b"a", b"1"), (b"b", b"1")])
    s1.append([(b"a", b"2")])
    b1, b2 = s1.log_batches()
    assert b1.base_offset >= start and b2.base_offset >= b1.next_offset
    assert [r for b in s1.log_batches() for r in b.records] == [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]
    end1 = s1.log_end_offset()
    assert end1 == b2.next_offset

    # The next leader sees the same batches at the same offsets, and its appends continue above them.
    f2 = lead(zk, 5, leader=2, epoch=1)
    s2 = ZkRecordStore(zk_client_factory(), f2)
    list(s2.load())
    assert s2.log_batches() == tuple(
        type(b)(b.seq, s2.log_batches()[i].timestamp_ms, b.records) for i, b in enumerate(s1.log_batches())
    )
    assert s2.log_end_offset() == end1
    s2.append([(b"b", None)])
    assert s2.log_batches()[-1].base_offset >= end1
    end2 = s2.log_end_offset()

    # Compaction replaces the history with a snapshot at a higher offset; the end never goes back.
    assert s2.compact()
    (snap,) = s2.log_batches()
    assert snap.base_offset >= end2 and snap.records == ((b"a", b"2"),)
    assert s2.log_end_offset() >= end2
    s3 = ZkRecordStore(zk_client_factory(), f2)
    list(s3.load())
    assert [b.seq for b in s3.log_batches()] == [snap.seq] and s3.log_end_offset() == s2.log_end_offset()
