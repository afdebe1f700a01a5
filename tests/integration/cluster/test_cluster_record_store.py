"""The ZooKeeper-backed record store: durable, ordered, fenced by the offsets partition's leadership, compactable."""

from __future__ import annotations

import contextlib
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import PartitionState
from zkcoord.placement.coordinator import OFFSETS_TOPIC
from zkcoord.zk.record_store import (
    LOAD_WINDOW,
    PartitionFence,
    StoreFenced,
    ZkRecordStore,
    _decode_batch_checked,
    _decode_batch_fast,
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


def test_compaction_schedule_runs_after_n_batches_keeps_records_and_offsets_monotonic(
    zk: Any, zk_client_factory: Any
) -> None:
    fence = lead(zk, 6, leader=1, epoch=0)
    store = ZkRecordStore(zk_client_factory(), fence, compact_after_batches=10)
    store.append([(b"early", b"x")])
    assert not store.compaction_due()  # not before the leader has loaded the partition
    assert list(store.load()) == [(b"early", b"x")]
    due: list[int] = []
    store.on_compaction_due = lambda: due.append(store.batch_count())
    ends = [store.log_end_offset()]
    expected: dict[bytes, bytes | None] = {b"early": b"x"}
    for i in range(8):
        rec = (f"k{i % 3}".encode(), str(i).encode())
        store.append([rec])
        expected[rec[0]] = rec[1]
        ends.append(store.log_end_offset())
    assert not store.compaction_due() and not store.maybe_compact() and due == []
    store.append([(b"early", None)])  # the 10th batch: due now, signalled once
    expected[b"early"] = None
    assert store.compaction_due() and due == [10]
    before = store.log_batches()
    assert store.maybe_compact() is True
    assert store.batch_count() == 1 and store.compactions == 1 and not store.compaction_due()
    (snap,) = store.log_batches()
    assert snap.base_offset >= before[-1].next_offset  # the snapshot sits above every old offset
    ends.append(store.log_end_offset())
    assert ends == sorted(ends)
    live = {k: v for k, v in expected.items() if v is not None}
    assert dict(snap.records) == live
    # a new leader loads exactly the live records and continues above the snapshot
    f2 = lead(zk, 6, leader=2, epoch=1)
    s2 = ZkRecordStore(zk_client_factory(), f2, compact_after_batches=10)
    assert dict(s2.load()) == live and s2.log_end_offset() == store.log_end_offset()
    s2.append([(b"k0", b"new")])
    assert s2.log_batches()[-1].base_offset >= store.log_end_offset()
    # due again once the partition holds 10 batch znodes (the snapshot + 9 appends), not before
    for i in range(7):
        s2.append([(b"k1", str(i).encode())])
    assert not s2.compaction_due()
    s2.append([(b"k2", b"last")])
    assert s2.compaction_due()


def test_a_deposed_leader_cannot_compact(zk: Any, zk_client_factory: Any) -> None:
    f1 = lead(zk, 7, leader=1, epoch=0)
    zombie = ZkRecordStore(zk_client_factory(), f1, compact_after_batches=3)
    list(zombie.load())
    for i in range(4):
        zombie.append([(b"k", str(i).encode())])
    assert zombie.compaction_due()
    names = sorted(zk.get_children(records_path(7)))
    lead(zk, 7, leader=2, epoch=1)  # the controller moved the partition
    with pytest.raises(StoreFenced):
        zombie.maybe_compact()
    assert sorted(zk.get_children(records_path(7))) == names  # nothing created, nothing deleted
    assert zombie.compactions == 0


def test_compaction_refused_for_size_backs_off(zk: Any) -> None:
    store = ZkRecordStore(
        zk, lead(zk, 8, 1, 0), max_batch_bytes=40 * 1024, max_multi_bytes=100 * 1024, compact_after_batches=2
    )
    list(store.load())
    for i in range(3):  # three distinct 35 KiB keys: their snapshot does not fit one 100 KiB request
        store.append([(f"k{i}".encode(), b"x" * 35 * 1024)])
    assert store.compaction_due()
    assert store.maybe_compact() is False and store.batch_count() == 3
    assert not store.compaction_due()  # retried only once the history has doubled
    for i in range(3):
        store.append([(f"k{i}".encode(), b"y")])
    assert store.compaction_due() and store.maybe_compact() is True and store.batch_count() == 1


def test_store_config_is_validated(zk: Any) -> None:
    with pytest.raises(ValueError, match="compact_after_batches"):
        ZkRecordStore(zk, lead(zk, 9, 1, 0), compact_after_batches=1)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=4096))
def test_any_bytes_decode_to_records_or_a_malformed_znode(data: bytes) -> None:
    try:
        records = decode_batch("/p", data)
    except MalformedZnode as exc:
        assert exc.path == "/p"
        return
    assert encode_batch(records) == data  # whatever decodes is exactly a batch


_records = st.lists(st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=40)), max_size=20)


@settings(max_examples=300, deadline=None)
@given(_records, st.data())
def test_a_corrupted_or_cut_batch_never_raises_anything_but_malformed(records: Any, data: Any) -> None:
    good = encode_batch(records)
    pos = data.draw(st.integers(0, len(good) - 1))
    flipped = good[:pos] + bytes([good[pos] ^ data.draw(st.integers(1, 255))]) + good[pos + 1 :]
    for bad in (flipped, good[:pos], good + data.draw(st.binary(min_size=1, max_size=8))):
        with contextlib.suppress(MalformedZnode):
            assert encode_batch(decode_batch("/p", bad)) == bad


def test_a_huge_record_count_is_refused_before_any_work() -> None:
    with pytest.raises(MalformedZnode, match="record count 2147483647 cannot fit in the 0 bytes left"):
        decode_batch("/p", b"ZKR1" + (2**31 - 1).to_bytes(4, "big"))


def test_children_that_are_no_sequential_batch_name_are_not_ours_and_ignored(zk: Any) -> None:
    store = ZkRecordStore(zk, lead(zk, 5, 1, 0))
    store.append([(b"k", b"v")])
    for name in ("batch-", "batch-abc", "batch-12x", "other"):
        zk.create(f"{records_path(5)}/{name}", b"whatever")
    assert list(store.load()) == [(b"k", b"v")]
    assert store.batch_count() == 1


def test_a_record_the_check_refuses_makes_its_batch_malformed_by_path(zk: Any) -> None:
    def check(key: bytes, value: bytes | None) -> None:
        if key == b"bad":
            raise KeyError("no such key version")  # any exception type

    store = ZkRecordStore(zk, lead(zk, 6, 1, 0), check_record=check)
    store.append([(b"ok", b"1")])
    store.append([(b"ok", b"2"), (b"bad", b"3")])
    with pytest.raises(
        MalformedZnode, match=r"batch-0000000001: record 1 does not decode: 'no such key version'"
    ):
        list(store.load())
    assert store.batch_count() == 2  # nothing deleted


def test_compaction_meeting_a_malformed_batch_deletes_nothing_and_backs_off(zk: Any) -> None:
    store = ZkRecordStore(zk, lead(zk, 7, 1, 0), compact_after_batches=2)
    store.append([(b"a", b"1")])
    list(store.load())
    zk.create(records_path(7) + "/batch-", b"garbage", sequence=True)
    store.append([(b"a", b"2")])
    assert store.compaction_due()
    assert store.maybe_compact() is False
    assert store.batch_count() == 3 and not store.compaction_due()


@settings(max_examples=300, deadline=None)
@given(_records, st.data())
def test_the_fast_batch_decoder_equals_the_checked_one(records: Any, data: Any) -> None:
    good = encode_batch(records)
    assert _decode_batch_fast(good) == records
    pos = data.draw(st.integers(0, len(good) - 1))
    flipped = good[:pos] + bytes([good[pos] ^ data.draw(st.integers(1, 255))]) + good[pos + 1 :]
    for bad in (flipped, good[:pos], good + data.draw(st.binary(min_size=1, max_size=8))):
        fast = _decode_batch_fast(bad)
        try:
            checked = _decode_batch_checked("/p", bad)
        except MalformedZnode:
            assert fast is None  # the checked decoder names what is off
        else:
            assert fast == checked


def test_a_load_of_more_batches_than_the_read_window_keeps_their_order_and_names_a_late_bad_one(
    zk: Any,
) -> None:
    count = 2 * LOAD_WINDOW + 7
    store = ZkRecordStore(zk, lead(zk, 8, 1, 0), compact_after_batches=10 * count)
    for i in range(count):
        store.append([(f"k{i % 5}".encode(), str(i).encode()), (b"t", None)])
    expected = [r for i in range(count) for r in ((f"k{i % 5}".encode(), str(i).encode()), (b"t", None))]
    assert list(ZkRecordStore(zk, store.fence).load()) == expected
    # A batch the check refuses, behind more than one window of good ones: the load fails naming it.
    store.append([(b"bad", b"x")])
    refusing = ZkRecordStore(zk, store.fence, check_record=lambda k, v: k != b"bad" or 1 / 0)
    with pytest.raises(MalformedZnode, match=f"batch-{count:010d}: record 0 does not decode"):
        list(refusing.load())
    assert store.batch_count() == count + 1  # nothing deleted


def test_the_log_view_holds_each_batch_as_its_bytes_not_as_record_objects(zk: Any) -> None:
    store = ZkRecordStore(zk, lead(zk, 9, 1, 0), compact_after_batches=1000)
    batch = [(f"group-{i:05d}/topic/{i}".encode(), bytes(24)) for i in range(100)]  # a typical commit
    for _ in range(50):
        store.append(batch)
    encoded = sum(len(encode_batch(batch)) for _ in range(50))
    reader = ZkRecordStore(zk, store.fence)
    tracemalloc.start()
    try:
        for _ in reader.load():
            pass
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Record tuples of bytes would take ~3x the encoded size; the batches' own bytes plus small index objects
    # stay under 1.5x (50 x 100 records, 7.4 KB a batch).
    assert held < 1.5 * encoded, (held, encoded)
    views = reader.log_batches()
    assert [len(b.records) for b in views] == [100] * 50
    assert list(views[-1].records) == batch and views[-1].records == tuple(batch)


def test_a_batch_appended_while_a_load_is_read_stays_in_the_log_view(zk: Any) -> None:
    store = ZkRecordStore(zk, lead(zk, 10, 1, 0))
    store.append([(b"a", b"1")])
    store.append([(b"b", b"1")])
    loading = store.load()
    assert next(loading) == (b"a", b"1")  # the load has listed both batches and is between them
    store.append([(b"c", b"1")])
    assert list(loading) == [(b"b", b"1")]
    assert [list(b.records) for b in store.log_batches()] == [[(b"a", b"1")], [(b"b", b"1")], [(b"c", b"1")]]
    assert store.log_end_offset() == store.log_batches()[-1].next_offset


def test_no_compaction_runs_while_a_load_is_read(zk: Any) -> None:
    # More batches than one read window: the load has not even asked for the last ones when it yields the first.
    count = LOAD_WINDOW + 10
    store = ZkRecordStore(zk, lead(zk, 11, 1, 0), compact_after_batches=2)
    for i in range(count):
        store.append([(f"k{i}".encode(), b"v")])
    list(store.load())
    assert store.compaction_due()
    loading = store.load()
    assert next(loading) == (b"k0", b"v")
    # A compaction now would delete batches this load has yet to read and put their records in a snapshot
    # listed after it: the load would miss them.
    assert not store.compaction_due() and store.maybe_compact() is False and store.compact() is False
    assert [k for k, _ in loading] == [f"k{i}".encode() for i in range(1, count)]
    assert store.batch_count() == count
    assert store.maybe_compact() is True and store.batch_count() == 1
    assert sorted(k for k, _ in store.load()) == sorted(f"k{i}".encode() for i in range(count))
